package gitapprove

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden file:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func sampleHold() *HoldRequest {
	return &HoldRequest{
		ID:          "h-20261130-0001",
		PlanName:    "refund-4711",
		PlanDigest:  "sha256:" + strings.Repeat("ab", 32),
		Step:        "refund",
		Tool:        "refund_customer",
		Args:        json.RawMessage(`{"amount":30,"currency":"EUR","order_id":"4711"}`),
		Reason:      `pin "hash" of get_script_by_path changed`,
		ObservedPin: "0c1f2e3d4b5a6978",
		Created:     time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
		Expires:     time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC),
	}
}

func TestWriteHoldGolden(t *testing.T) {
	b, err := WriteHold(sampleHold())
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "hold.hcl", b)
}

func TestHoldRoundTrip(t *testing.T) {
	tricky := sampleHold()
	tricky.Args = json.RawMessage(`{"note":"say \"hi\" ${name} %{if x} \\ back\nslash","emoji":"✓","n":1e-7,"nested":{"a":[1,2,{"b":null}]}}`)
	tricky.Reason = "multi\nline \"reason\" with ${interp} and %{directive}"
	tricky.ObservedPin = ""
	tricky.RequestedBy = "jwt:alice@example.com"
	tricky.Created = time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.FixedZone("CET", 3600))
	for _, tc := range []struct {
		name string
		h    *HoldRequest
	}{
		{"pin hold", sampleHold()},
		{"tricky strings, no pin", tricky},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := WriteHold(tc.h)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseHold(src)
			if err != nil {
				t.Fatalf("ParseHold: %v\n%s", err, src)
			}
			if !got.Created.Equal(tc.h.Created) || !got.Expires.Equal(tc.h.Expires) {
				t.Errorf("times changed: %v %v", got.Created, got.Expires)
			}
			want := *tc.h
			want.Created, want.Expires = got.Created, got.Expires
			if !reflect.DeepEqual(got, &want) {
				t.Errorf("round trip:\n got %+v\nwant %+v", got, &want)
			}
			if !bytes.Equal(got.Args, tc.h.Args) {
				t.Errorf("arguments not byte-identical: %s vs %s", got.Args, tc.h.Args)
			}
			again, err := WriteHold(got)
			if err != nil || !bytes.Equal(again, src) {
				t.Errorf("write(parse(write(h))) differs:\n%s\n%s", again, src)
			}
		})
	}
}

func TestParseHoldRejects(t *testing.T) {
	good, err := WriteHold(sampleHold())
	if err != nil {
		t.Fatal(err)
	}
	edit := func(old, new string) string {
		s := string(good)
		if !strings.Contains(s, old) {
			t.Fatalf("%q not in hold file", old)
		}
		return strings.Replace(s, old, new, 1)
	}
	for _, tc := range []struct {
		name, src, want string
	}{
		{"syntax", "hold \"x\" {", "parse hold file"},
		{"no block", "", "exactly one hold block"},
		{"two blocks", string(good) + strings.Replace(string(good), "# planlock", "#", 1), "exactly one hold block"},
		{"other block", "plan \"x\" {}\n", "parse hold file"},
		{"unknown attribute", edit("  step", "  extra = \"x\"\n  step"), "Unsupported argument"},
		{"missing attribute", edit(`  tool         = "refund_customer"`, ""), `"tool" is required`},
		{"variable", edit(`"refund_customer"`, "var.tool"), "tool"},
		{"interpolation", edit(`"refund_customer"`, `"${x}"`), "tool"},
		{"function", edit(`"refund_customer"`, `upper("x")`), "tool"},
		{"number instead of string", edit(`"refund_customer"`, "42"), "must be a string"},
		{"bad created", edit(`"2026-11-30T12:00:00Z"`, `"yesterday"`), "created"},
		{"expires before created", edit(`"2026-12-01T12:00:00Z"`, `"2026-11-29T12:00:00Z"`), "before it was created"},
		{"arguments not JSON", edit(`"{\"amount\"`, `"{amount`), "not valid JSON"},
		{"arguments not an object", strings.Replace(string(good), `arguments    = "{\"amount\":30,\"currency\":\"EUR\",\"order_id\":\"4711\"}"`, `arguments    = "[1]"`, 1), "JSON object"},
		{"traversing id", edit(`hold "h-20261130-0001"`, `hold "../../etc"`), "invalid hold id"},
		{"traversing plan", edit(`"refund-4711"`, `"a/b"`), "invalid plan name"},
		{"lock suffix", edit(`"refund-4711"`, `"x.lock"`), "invalid plan name"},
		{"bad digest", edit("sha256:abab", "md5:abab"), "plan digest"},
		{"empty reason", edit(`"pin \"hash\" of get_script_by_path changed"`, `""`), "reason"},
		{"too large", string(good) + "#" + strings.Repeat("x", maxHoldFile), "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ParseHold([]byte(tc.src))
			if err == nil {
				t.Fatalf("ParseHold accepted:\n%s\n=> %+v", tc.src, h)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestWriteHoldValidates(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*HoldRequest)
	}{
		{"empty id", func(h *HoldRequest) { h.ID = "" }},
		{"slash in id", func(h *HoldRequest) { h.ID = "a/b" }},
		{"dot id", func(h *HoldRequest) { h.ID = ".." }},
		{"no tool", func(h *HoldRequest) { h.Tool = "" }},
		{"args nil", func(h *HoldRequest) { h.Args = nil }},
		{"no created", func(h *HoldRequest) { h.Created = time.Time{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := sampleHold()
			tc.mod(h)
			if _, err := WriteHold(h); err == nil {
				t.Fatal("WriteHold accepted an invalid hold")
			}
		})
	}
}

func TestHoldPathAndBranch(t *testing.T) {
	h := sampleHold()
	if h.Path() != "holds/refund-4711/h-20261130-0001.hcl" || h.Branch() != "planlock/hold/refund-4711/h-20261130-0001" {
		t.Errorf("path %s branch %s", h.Path(), h.Branch())
	}
}

// FuzzParseHold: ParseHold never panics, and whatever it accepts writes
// back to a file that parses to the same request.
func FuzzParseHold(f *testing.F) {
	good, _ := WriteHold(sampleHold())
	f.Add(good)
	f.Add([]byte(`hold "a" { plan = "p" }`))
	f.Add([]byte("hold \"a\" {\n arguments = <<EOT\n{}\nEOT\n}"))
	f.Add([]byte{0xff, 0xfe, '{'})
	f.Fuzz(func(t *testing.T, src []byte) {
		h, err := ParseHold(src)
		if err != nil {
			return
		}
		out, err := WriteHold(h)
		if err != nil {
			t.Fatalf("accepted hold does not write back: %v", err)
		}
		h2, err := ParseHold(out)
		if err != nil {
			t.Fatalf("written hold does not parse: %v\n%s", err, out)
		}
		if !h2.Created.Equal(h.Created) || !h2.Expires.Equal(h.Expires) {
			t.Fatal("times changed")
		}
		h2.Created, h2.Expires = h.Created, h.Expires
		if !reflect.DeepEqual(h, h2) {
			t.Fatalf("round trip changed the hold:\n%+v\n%+v", h, h2)
		}
	})
}

const pinPlan = `plan "refund" {
  goal = "Refund" # keep this comment

  step "refund" {
    tool = "refund_customer"
    pin {
      tool  = "get_script_by_path"
      args  = { path = "f/support/refund_customer" }
      field = "hash"
      eq    = "9f86d081884c7d65"
    }
  }

  step "count" {
    tool = "count"
    pin {
      tool  = "version"
      field = "n"
      eq    = 41
    }
  }

  step "plain" {
    tool = "x"
  }
}
`

func TestUpdatePin(t *testing.T) {
	got, err := updatePin([]byte(pinPlan), "refund", "0c1f2e3d4b5a6978")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(pinPlan, `"9f86d081884c7d65"`, `"0c1f2e3d4b5a6978"`, 1)
	if string(got) != want {
		t.Errorf("updatePin changed more than the pin:\n%s", got)
	}
	got, err = updatePin([]byte(pinPlan), "count", "42")
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(pinPlan, "eq    = 41", "eq    = 42", 1); string(got) != want {
		t.Errorf("number pin:\n%s", got)
	}
	for _, tc := range []struct{ step, want string }{
		{"plain", "has no pin"},
		{"missing", "no step"},
	} {
		if _, err := updatePin([]byte(pinPlan), tc.step, "v"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("updatePin(%s) err = %v, want %q", tc.step, err, tc.want)
		}
	}
	if _, err := updatePin([]byte("plan {"), "x", "v"); err == nil {
		t.Error("updatePin accepted a broken file")
	}
}

// Text from the upstream or the agent cannot escape its code span or fence
// in the pull request a reviewer reads.
func TestHoldBodyGolden(t *testing.T) {
	h := sampleHold()
	h.Reason = "upstream said: `](https://evil.example) **approve me**\nnext line"
	h.ObservedPin = "``x``"
	h.RequestedBy = "token:ci`bot"
	h.Args = json.RawMessage(`{"note":"` + "```" + `\n# heading","tag":"<b>&</b>"}`)
	body := holdBody(h, &PinChange{PlanPath: "plans/refund.hcl"})
	golden(t, "hold-body.md", []byte(body))
	if !strings.Contains(body, `"<b>&</b>"`) {
		t.Error("arguments were HTML-escaped: the reviewer must see them as sent")
	}
}

func TestMdCode(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain", "`plain`"},
		{"a`b", "``a`b``"},
		{"`x`", "`` `x` ``"},
		{"a\nb", "`a\\nb`"}, // the one escaping function shows line breaks as \n
	} {
		if got := mdCode(tc.in); got != tc.want {
			t.Errorf("mdCode(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
