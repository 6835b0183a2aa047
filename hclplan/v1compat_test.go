package hclplan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/rogpeppe/go-internal/txtar"
)

// v1Golden holds, for every plan committed before the language's v2
// additions, its digest, the sha256 of its canonical JSON ("invalid" for
// the files that are meant not to parse) and a short sha256 of every
// diagnostic validate gives it (severity, place, summary, detail). The values were computed by the v1
// code; the v2 language must keep every one of them.
var v1Golden = []struct{ file, digest, jsonSHA, diagSHA string }{
	{"../examples/filesystem-readonly/docs-reader.hcl", "sha256:48946b3ee1245cda1aabfb630830ea7fec30c98c59ac94fde38458e78f86c55c", "e7b7bf569f82a799a369e694509302bdfec4776a4261323cc890238cce63e2fe", "e3b0c44298fc1c14"},
	// The examples lost their near expires; these values are the v1 code's for the new bytes.
	// Later every example's upstream became one the repository ships
	// (refund.hcl: ./refund-server) or a pinned npm package (docs-reader.hcl,
	// triage.hcl); their values are this code's for the new bytes, the
	// upstream command being the only change.
	{"../examples/github-triage/triage.hcl", "sha256:107203f41addb9aba255018b586b30c07bd65072218e8cd2db711b3537e5fb07", "dc7d76eeb65e9924e2a3b7f107b51b1210560a6de25fb024cb551259540f3ee2", "e3b0c44298fc1c14"},
	{"../examples/refund/refund.hcl", "sha256:6e45f89298533daabf0b1e342e8f1ec2063cea508620b7d6cb937dce5169ad98", "e9d1f240f042003b45d59d6791f00e00eefdd27ac74a00ab29977ce0b8752d51", "e3b0c44298fc1c14"},
	{"testdata/fmt/aligned.golden.hcl", "sha256:8e89b243e0efaa33634f702bec3500c1b26c7db0a6763877a21ff421e22ce005", "8eb0f64a6b6cd711192930e6fb9613d90890066e36d92879f29f188756c64a12", "e3b0c44298fc1c14"},
	{"testdata/fmt/aligned.in.hcl", "sha256:99d4a0d43ec3b0475e3240eaa4f988b392b71cf8f4f665de2e5dba148c14e215", "0103c2d06bb33a5785a62a2be9335b527cde600da2f9fcda51c5e9d8015fbbd9", "e3b0c44298fc1c14"},
	{"testdata/fmt/comments.golden.hcl", "sha256:0d65ffacbed1e254b3c811580f058e57ccf75ffaef42653bb8a633aae34ab00f", "e19759548bb4f6f48c262982dd4ee215467313190fee54d84aaa606c6e7a9a11", "e3b0c44298fc1c14"},
	{"testdata/fmt/comments.in.hcl", "sha256:c50851a5fc36bdd9fbd26c05ce7cd388f3e2c76177ac9721b261cb24e7251b4b", "a6e2bff3161d89d64267ccbf6c5618ad5e662bbc0eecd5d85421a082da59daa9", "e3b0c44298fc1c14"},
	{"testdata/fmt/heredoc.golden.hcl", "sha256:872fbdb61762c6e175ff055195b78dcdc5a804de633c4815d5fa3bc2bec039ba", "4e407d67a54aeab506d66f381d2c4db7f43ba3068da4e7bcaca0d110d3c179fe", "e3b0c44298fc1c14"},
	{"testdata/fmt/heredoc.in.hcl", "sha256:a41b4612ca771098e4df636896d0306398a5693dc971b8c4ab3af07558b555c3", "d766b910d1c8fa471a41d63af7b40bc6f696eb032ea096c428dfab4406668de9", "e3b0c44298fc1c14"},
	{"testdata/fmt/nested.golden.hcl", "sha256:d325d390faa4265d134dec4ee9703d00cf077b562989e645e430798d77b90f5a", "61b6f7c7b734e582ce504e373011c41758277d7fc74c7c061ac0d349ba545085", "e3b0c44298fc1c14"},
	{"testdata/fmt/nested.in.hcl", "sha256:0053dd2a57ce5827028a2dd295894d59fcea165016ad07be5108df3368336197", "d727cac8384dc4f1e023b33cbe216c3b574a8e36981d50c01a5bf0ac71d5879b", "e3b0c44298fc1c14"},
	{"testdata/fmt/unicode.golden.hcl", "sha256:f10d6e7f7feeb9c975ec75727f7e496d669c6444b13dc91ff5209994b9d9e8b3", "invalid", "92e4879dca30282d"},
	{"testdata/fmt/unicode.in.hcl", "sha256:c8dfe7b9f6ecbae8c91a68969fd2edc44d4f02f913e53ad949bd1ae90591911a", "invalid", "e54e97a6edf23cf6"},
	{"../gitapprove/testdata/hold.hcl", "sha256:bd1e45d6541a8be685af58839d0d42248f1c3e2751539eef620e04e669a27556", "invalid", "6a3ad54be1d1efd9"},
	{"plandiff/testdata/plandiff/formatting/new.hcl", "sha256:aac8c9f67b939a099fd2ff41c6688bc1aa28faa724af7636bf9e6a1e4371216d", "81f7e05502c57490aba33eada4dd54b828aaa7b7b944eb3af0c229c8ab360d20", "e3b0c44298fc1c14"},
	{"plandiff/testdata/plandiff/formatting/old.hcl", "sha256:7ee5f7b07028e069acb3a310d8be49fba438adbc966978504861dcc16ba94610", "508c4791413a8a8bc247dc443f99b734296ef45bdeb1141c3e7fda69769628ea", "e3b0c44298fc1c14"},
	{"plandiff/testdata/plandiff/narrow/new.hcl", "sha256:7ee5f7b07028e069acb3a310d8be49fba438adbc966978504861dcc16ba94610", "508c4791413a8a8bc247dc443f99b734296ef45bdeb1141c3e7fda69769628ea", "e3b0c44298fc1c14"},
	{"plandiff/testdata/plandiff/narrow/old.hcl", "sha256:a0f42fbf205ac3fbadfb30aba2dc1ea0ffb8c842d77a6a77d32451789ad68f7f", "aa2092b8950aa69145605cdaa91c2a5f5f57feff205442f7cf9256530eb844e4", "e3b0c44298fc1c14"},
	{"plandiff/testdata/plandiff/pin/new.hcl", "sha256:80ac66c6035235b8894129207c7e51fca3ce7f318caf81302c3c76cf3e96b374", "10a0c3af3138fbe80f97a8214c06d04b393bd307cdca01522545831ee1a763b2", "e3b0c44298fc1c14"},
	{"plandiff/testdata/plandiff/pin/old.hcl", "sha256:7ee5f7b07028e069acb3a310d8be49fba438adbc966978504861dcc16ba94610", "508c4791413a8a8bc247dc443f99b734296ef45bdeb1141c3e7fda69769628ea", "e3b0c44298fc1c14"},
	{"plandiff/testdata/plandiff/widen/new.hcl", "sha256:a0f42fbf205ac3fbadfb30aba2dc1ea0ffb8c842d77a6a77d32451789ad68f7f", "aa2092b8950aa69145605cdaa91c2a5f5f57feff205442f7cf9256530eb844e4", "e3b0c44298fc1c14"},
	{"plandiff/testdata/plandiff/widen/old.hcl", "sha256:7ee5f7b07028e069acb3a310d8be49fba438adbc966978504861dcc16ba94610", "508c4791413a8a8bc247dc443f99b734296ef45bdeb1141c3e7fda69769628ea", "e3b0c44298fc1c14"},
	{"../cmd/planlock/testdata/script/plan_fmt.txtar:messy.hcl", "sha256:2776abfee754be7ffc44e803cabb6e75eb809313b4e5159e83234191f87cfa61", "invalid", "7086a092b096313c"},
	{"../cmd/planlock/testdata/script/plan_fmt.txtar:clean.hcl", "sha256:c7a16598fb676e8e8fe32d0721cd473996eb0f1dadbef3ea2ecd10acfef2c1f2", "9a4125cdeb5873ddc23400659493ef83397737eccd6016cb85c1ea322a26be1f", "e3b0c44298fc1c14"},
	{"../cmd/planlock/testdata/script/plan_fmt.txtar:sub/deep.hcl", "sha256:2776abfee754be7ffc44e803cabb6e75eb809313b4e5159e83234191f87cfa61", "invalid", "8866fa6c0f25acb9"},
	{"../cmd/planlock/testdata/script/plan_show.txtar:refund.hcl", "sha256:a1faa1fc7b664dfbdca58a78d828c257233c0a5427c273297c9a6a550e1dd43f", "c56a196f17fd8dbbecbc1fee2f98281b9f6ce7fffd0ff7ba8b1efa216fb32fe0", "e3b0c44298fc1c14"},
	{"../cmd/planlock/testdata/script/plan_show.txtar:bad.hcl", "sha256:4cb7c42d7897769223759ed85351dd69687737a446a5f6158a484211aa2abd62", "invalid", "67325a2adbdd6ba7"},
	{"../cmd/planlock/testdata/script/plan_validate.txtar:refund.hcl", "sha256:020586406ee2a312ecfd4a274ddba6d3ecb95f02cc8597e199d240b081b9c40a", "e6720388d60f16ab73ee6f4906c19965ebd5e72920edc86bb8d36d57b28773a3", "e3b0c44298fc1c14"},
	{"../cmd/planlock/testdata/script/plan_validate.txtar:broken.hcl", "sha256:4a9ee28f5970df8c9616983f8c0618f640836d6544dfbd31a8bbb979fa90f8c1", "invalid", "c8bbb29628238ea8"},
	{"../cmd/planlock/testdata/script/plan_validate.txtar:twoplans.hcl", "sha256:94d72a03776888aa5768e322ec550006a3a97a6255f64736c90e920182797826", "invalid", "7862f855a8fc01be"},
	{"../cmd/planlock/testdata/script/plan_validate.txtar:expired.hcl", "sha256:ee5a746d8f31ea6530bd408005f66337d52b9505ed24b91005c79c7df05663a7", "76787b08494de398109020a128e514def5b30cd2900d0a169ddcd4f58eaa9a43", "e3b0c44298fc1c14"},
	{"../cmd/planlock/testdata/script/plan_validate.txtar:wrongtype.hcl", "sha256:d594bbf805b5efa82bd6bb73af22a5762ba4b940832e48d6cc74c8ea78c8ae2e", "3d73830faa05d8dc81134929cd01ab0a0a6b3e7508d490b3b69ea0657ffd8493", "e3b0c44298fc1c14"},
	{"../cmd/planlock/testdata/script/proxy_holds.txtar:loose/plan.hcl", "sha256:e458ac7b69a1f4d4ed5ceb2794d809121b878ff5b81584b48239f51e05674961", "0fa9f90cd94e014e16bc6829b313142ca06109d6eb355a0e543d165c57678b9a", "e3b0c44298fc1c14"},
	{"../cmd/planlock/testdata/script/proxy_max_message.txtar:plan.hcl", "sha256:ce490c6c2585b60e9617f0b38d053bc195e7635481bc14fde30e60eb88909776", "c15b9b29144f397e5bdf389386c778e2fa127cd76dfd14f4ae6f08276e98b921", "e3b0c44298fc1c14"},
	{"../cmd/planlock/testdata/script/proxy_usage.txtar:plan.hcl", "sha256:6d04b4cc729c99014438880b0ce8c5464309f499b9273ca607c4f7d207dcd49a", "b21be5ede4f09c80ac8319674b9428829113622e3c73c5d8525a035c80c1d6be", "e3b0c44298fc1c14"},
	{"../cmd/planlock/testdata/script/proxy_usage.txtar:with-upstream.hcl", "sha256:dcb4a000e823e8440cdb349897d1ac2060f728682f504a2cad490d9345a34149", "e7f4aaf7cf125f8ea4d51a731948732afe874d23891efbc909cb8ce49b1860dd", "e3b0c44298fc1c14"},
	// Refused on purpose since upstream.env may not name planlock's own secrets.
	{"../cmd/planlock/testdata/script/proxy_usage.txtar:secret-env.hcl", "sha256:473f5ac12a22366a4072f8b27ef5e4ca5ee474fc51f862444cffa7462b5051ba", "invalid", "353910a73571fad1"},
	{"../cmd/planlock/testdata/script/proxy_usage.txtar:expired.hcl", "sha256:a7dfa07d26bc3fd832b52d78f663abbb3d6f4b9655871c2ee7e7e5c25739eb7a", "26448120afdb557e0cffe5c26339b613c3fc45fed5b3de04e0c1677b077f63bd", "e3b0c44298fc1c14"},
	{"../cmd/planlock/testdata/script/proxy_usage.txtar:bad.hcl", "sha256:75cd1eaf293513cf445d7dda7b71c8370268eb3e8788448b4944c8128c4c50d3", "invalid", "825bec3f476aec46"},
	{"../cmd/planlock/testdata/script/proxy_verify.txtar:plans/refund.hcl", "sha256:2337f532eef5b35a1ee9a02e8cf4ef4abf4329c736c21ae291549423e2d1d8d6", "282823c6547473991743d16c3c8fb111f6fe605472ad04ed8507ad7dd45bf094", "e3b0c44298fc1c14"},
	{"../cmd/planlock/testdata/script/proxy_verify.txtar:plans/tampered.hcl", "sha256:bf370b132395a7a043b9e2e72cd2a10c11df60c865b3bde2c1c3528c3d71d0e9", "63c69a3587703765a212a0efba450584e69c97cff886b932ff05907154df4323", "e3b0c44298fc1c14"},
	{"../cmd/planlock/testdata/script/proxy_verify.txtar:plans/other.hcl", "sha256:cb4479dcbd4094b7826709f8864037c72cf847fdc3e66eca6b7997d95b063098", "4b3ba7f69cf73ca72b51765eeb0e47dcbc93931a3a72ee65eebb2161e693d7d1", "e3b0c44298fc1c14"},
	{"../cmd/planlock/testdata/script/proxy_verify.txtar:plans/unsigned.hcl", "sha256:3fbd2ffa5e5964c4a30ac4ded1d40037784522640cf4fcd2d0e4025dde13e62b", "3fcf607e2137fd4a39378b4c1f08289d95bd6354c8a20300d0f5f24e5bbd8c4d", "e3b0c44298fc1c14"},
	{"../cmd/planlock/testdata/script/proxy_verify.txtar:plans/expired.hcl", "sha256:a7dfa07d26bc3fd832b52d78f663abbb3d6f4b9655871c2ee7e7e5c25739eb7a", "26448120afdb557e0cffe5c26339b613c3fc45fed5b3de04e0c1677b077f63bd", "e3b0c44298fc1c14"},
	{"../cmd/planlock/testdata/script/sign_github_env.txtar:plans/refund.hcl", "sha256:0d38bbed6b2a1cc2ffe707b25bd95ce6cc7365ecacf3200cc392c2e8d47cc907", "invalid", "36e56e9124f8a31e"},
	{"../cmd/planlock/testdata/script/sign_key.txtar:plans/refund.hcl", "sha256:2337f532eef5b35a1ee9a02e8cf4ef4abf4329c736c21ae291549423e2d1d8d6", "282823c6547473991743d16c3c8fb111f6fe605472ad04ed8507ad7dd45bf094", "e3b0c44298fc1c14"},
	{"../cmd/planlock/testdata/script/sign_key.txtar:plans/tampered.hcl", "sha256:bf370b132395a7a043b9e2e72cd2a10c11df60c865b3bde2c1c3528c3d71d0e9", "63c69a3587703765a212a0efba450584e69c97cff886b932ff05907154df4323", "e3b0c44298fc1c14"},
	{"../cmd/planlock/testdata/script/sign_key.txtar:plans/unsigned.hcl", "sha256:b7e410eff450d2cefe1273d9cafb7cd4ad7daacf8e1da4561e6823e47e10bb2c", "invalid", "7b821f3892d2f75e"},
	{"../cmd/planlock/testdata/script/sign_keyless.txtar:plans/refund.hcl", "sha256:2337f532eef5b35a1ee9a02e8cf4ef4abf4329c736c21ae291549423e2d1d8d6", "282823c6547473991743d16c3c8fb111f6fe605472ad04ed8507ad7dd45bf094", "e3b0c44298fc1c14"},
	{"../cmd/planlock/testdata/script/sign_vault.txtar:plans/refund.hcl", "sha256:2337f532eef5b35a1ee9a02e8cf4ef4abf4329c736c21ae291549423e2d1d8d6", "282823c6547473991743d16c3c8fb111f6fe605472ad04ed8507ad7dd45bf094", "e3b0c44298fc1c14"},
	{"../cmd/planlock/testdata/script/sign_vault.txtar:plans/tampered.hcl", "sha256:bf370b132395a7a043b9e2e72cd2a10c11df60c865b3bde2c1c3528c3d71d0e9", "63c69a3587703765a212a0efba450584e69c97cff886b932ff05907154df4323", "e3b0c44298fc1c14"},
	{"../cmd/planlock/testdata/script/sign_vault.txtar:plans/other.hcl", "sha256:5d8a8d4af830aed213ca63ddb840e25397a1f24315d86551490f9ae6b49ce2e7", "invalid", "112795a16cf101dd"},
}

func TestV1PlansKeepDigestAndMeaning(t *testing.T) {
	for _, g := range v1Golden {
		t.Run(g.file, func(t *testing.T) {
			src := readPlanFixture(t, g.file)
			if got := Digest(src); got != g.digest {
				t.Fatalf("file changed: digest %s, want %s", got, g.digest)
			}
			p, diags := Parse(filepath.Base(g.file), src)
			got := "invalid"
			if !diags.HasErrors() {
				j, err := JSON(p)
				if err != nil {
					t.Fatal(err)
				}
				sum := sha256.Sum256(j)
				got = hex.EncodeToString(sum[:])
				if p.Digest != g.digest {
					t.Errorf("Plan.Digest = %s, want %s", p.Digest, g.digest)
				}
			}
			if got != g.jsonSHA {
				t.Errorf("canonical JSON sha256 = %s, want %s (v1 meaning changed)", got, g.jsonSHA)
			}
			if got := diagSHA(filepath.Base(g.file), diags); got != g.diagSHA {
				t.Errorf("diagnostics changed: sha256 %s, want %s:\n%s", got, g.diagSHA, diags.Error())
			}
		})
	}
}

// diagSHA is the first 8 bytes of the sha256 of the diagnostics, one line
// each, in the form the v1 code's values were computed with.
func diagSHA(_ string, diags hcl.Diagnostics) string {
	var lines []string
	for _, d := range diags {
		r := ""
		if d.Subject != nil {
			r = d.Subject.String()
		}
		lines = append(lines, fmt.Sprintf("%d %s %s: %s", d.Severity, r, d.Summary, d.Detail))
	}
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(sum[:8])
}

// readPlanFixture reads a plan file, or "archive.txtar:member.hcl".
func readPlanFixture(t *testing.T, name string) []byte {
	t.Helper()
	file, member, inArchive := strings.Cut(name, ".txtar:")
	if !inArchive {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		return src
	}
	ar, err := txtar.ParseFile(file + ".txtar")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range ar.Files {
		if f.Name == member {
			return f.Data
		}
	}
	t.Fatalf("%s has no member %s", file, member)
	return nil
}

// A v1 plan whose constraints contradict each other stays valid, as in v1:
// the v2 check for contradictory kinds only concerns v2 constraints.
func TestV1ContradictoryConstraintsStayValid(t *testing.T) {
	src := plan("  step \"s\" {\n    tool = \"t\"\n    arg \"a\" {\n      pattern = \"x\"\n      max     = 3\n    }\n  }")
	p, diags := Parse("v1.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatalf("a valid v1 plan is now invalid: %s", diags.Error())
	}
	if err := p.Steps[0].Check(map[string]any{"a": "x"}); err == nil {
		t.Fatal("a string passed max = 3")
	}
}
