package gitapprove

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/planlock/planlock/internal/testkit/githubtest"
	"github.com/planlock/planlock/sign"
)

// The hold path end to end, as the proxy will drive it: Open → the reviewer
// merges with the real git → CI signs the merged bytes (key-based here; the
// workflow does it keyless) and publishes the bundle → Status → the bundle
// verifies over exactly the file Status returned, and the file parses back
// to the held call. A bundle for other bytes does not verify.
func TestHoldLoopVerifiesWithSign(t *testing.T) {
	f := newFixture(t, "main", map[string]string{"plans/refund-4711.hcl": pinPlan})
	gh := githubtest.New(t, "acme", "plans", "tok")
	holds := &Holds{Repo: openRepo(t, f.work), Forge: fakeClient(gh), Base: "main"}
	hold := sampleHold()

	opened, err := holds.Open(ctx(t), hold, &PinChange{PlanPath: "plans/refund-4711.hcl"})
	if err != nil {
		t.Fatal(err)
	}
	gh.Merge(opened.PR.Number, reviewerMerges(t, f, hold.Branch()))

	// CI: sign the bytes as merged on main, publish beside the path.
	merged, err := os.ReadFile(filepath.Join(f.reviewer, filepath.FromSlash(hold.Path())))
	if err != nil {
		t.Fatal(err)
	}
	privPEM, pubPEM, err := sign.GenerateKeyPair("ed25519")
	if err != nil {
		t.Fatal(err)
	}
	kp, err := sign.LoadSigningKey(ctx(t), "ci.key", func(string) ([]byte, error) { return privPEM, nil })
	if err != nil {
		t.Fatal(err)
	}
	signed, err := sign.Sign(ctx(t), merged, sign.Predicate{Kind: sign.KindHold, Path: hold.Path(), PullRequest: opened.PR.Number}, sign.SignOptions{Keypair: kp})
	if err != nil {
		t.Fatal(err)
	}
	publishBundle(t, f, hold.Path(), string(signed.Bundle))

	// The proxy.
	st, err := holds.Status(ctx(t), hold, opened.PR.Number)
	if err != nil || st.State != HoldMerged {
		t.Fatalf("Status: %+v, %v", st.State, err)
	}
	pub, err := sign.ParsePublicKey(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	policy, err := sign.NewPolicy(sign.PolicyOptions{PublicKey: pub})
	if err != nil {
		t.Fatal(err)
	}
	a, err := policy.Verify(ctx(t), sign.VerifyInput{Path: hold.Path(), Content: st.File, Bundle: st.Bundle, Kind: sign.KindHold})
	if err != nil {
		t.Fatalf("the published bundle does not verify over the merged hold file: %v", err)
	}
	if a.Predicate.PullRequest != opened.PR.Number {
		t.Errorf("predicate PR = %d", a.Predicate.PullRequest)
	}
	got, err := ParseHold(st.File)
	if err != nil || got.PlanDigest != hold.PlanDigest || got.Tool != hold.Tool || !bytes.Equal(got.Args, hold.Args) {
		t.Fatalf("merged hold does not bind to the call: %+v, %v", got, err)
	}
	// As a plan approval, or over other bytes, the same bundle is refused.
	if _, err := policy.Verify(ctx(t), sign.VerifyInput{Path: hold.Path(), Content: st.File, Bundle: st.Bundle, Kind: sign.KindPlan}); err == nil {
		t.Error("a hold approval verified as a plan approval")
	}
	tampered := bytes.Replace(st.File, []byte(`\"amount\":30`), []byte(`\"amount\":3000`), 1)
	if _, err := policy.Verify(ctx(t), sign.VerifyInput{Path: hold.Path(), Content: tampered, Bundle: st.Bundle, Kind: sign.KindHold}); !errors.Is(err, sign.ErrDigestMismatch) {
		t.Errorf("tampered hold: %v, want ErrDigestMismatch", err)
	}
}
