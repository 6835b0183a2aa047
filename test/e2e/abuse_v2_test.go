//go:build e2e

package e2e

import (
	"path/filepath"
	"strings"
	"testing"
)

// abuseV2Plan gates echo with nested constraints and big with a CEL
// expression whose cost grows with the array it is given.
const abuseV2Plan = `plan "abuse-v2" {
  goal  = "Nested arguments and CEL under abuse"
  order = "any"

  step "echo" {
    tool      = "echo"
    max_calls = 100
    arg "message" {
      max_items = 5
      items {
        field "k" {
          max_length = 10
          pattern    = "[a-z]+"
        }
      }
    }
  }

  step "big" {
    tool      = "big"
    max_calls = 100
    arg "size" {
      expr    = "self.all(x, x > 0)"
      message = "every size must be positive"
    }
  }
}
`

func repeatJSON(item string, n int) string {
	return "[" + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + "]"
}

// TestV2AbuseCallsAreBlocked sends through the real proxy binary the calls
// that try to make the v2 checks expensive or confused: huge arrays, deep
// nesting inside items and fields, and an expression fed a list big enough
// to pass its cost limit. Each is blocked with one line, the proxy keeps
// serving, and the upstream's calls log shows none was forwarded.
func TestV2AbuseCallsAreBlocked(t *testing.T) {
	dir := t.TempDir()
	callsLog := filepath.Join(dir, "calls.jsonl")
	c := startRaw(t, "proxy", "--plan", writePlan(t, abuseV2Plan), "--insecure-skip-verify",
		"--state", filepath.Join(dir, "state"), "--", testUpstreamBin, "--calls-log", callsLog)
	tests := []struct {
		name, tool, args string
		want             string // a prefix of the answer
	}{
		{"200k-item array", "echo", `{"message":` + repeatJSON(`{"k":"a"}`, 200_000) + `}`,
			`blocked by plan "abuse-v2": step "echo": argument "message" has 200000 items`},
		{"deep nesting inside a field", "echo", `{"message":[{"k":` + nested(60, `"a"`) + `}]}`,
			`blocked by plan "abuse-v2": step "echo": argument "message"[0].k`},
		{"nesting past the decoder's depth", "echo", `{"message":[{"k":` + nested(100, `"a"`) + `}]}`,
			`blocked by plan "abuse-v2": tool "echo": arguments must be a JSON object: nested deeper than 64 levels`},
		{"undeclared field", "echo", `{"message":[{"k":"a","k2":"b"}]}`,
			`blocked by plan "abuse-v2": step "echo": argument "message"[0]`},
		{"2M-item list for an expression", "big", `{"size":` + repeatJSON(`1`, 2_000_000) + `}`,
			`blocked by plan "abuse-v2": step "big": argument "size"`},
		{"15 MiB string for an expression", "big", `{"size":["` + strings.Repeat("/", 15<<20) + `"]}`,
			`blocked by plan "abuse-v2": step "big": argument "size"[0] has 15728640 characters, more than the 10000 an expression may read`},
		{"expression refuses a value", "big", `{"size":[1,0]}`,
			`blocked by plan "abuse-v2": step "big": argument "size"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.t = t
			a := c.call(tt.tool, tt.args)
			got := a.text()
			if a.allowed() {
				t.Fatalf("allowed: %.300q", got)
			}
			t.Logf("%s → %.300s", tt.name, got)
			if strings.Contains(got, "\n") {
				t.Errorf("the reason is not one line: %.300q", got)
			}
			if !strings.HasPrefix(got, tt.want) {
				t.Fatalf("got %.300q\nwant a prefix %q", got, tt.want)
			}
		})
	}
	c.t = t
	// Still serving, and an allowed call goes through.
	if a := c.call("echo", `{"message":[{"k":"ok"}]}`); !a.allowed() {
		t.Fatalf("allowed call after the abuse: %s", a.text())
	}
	calls := loggedCalls(t, callsLog)
	if len(calls) != 1 {
		t.Fatalf("upstream received %d calls, want only the allowed one: %+v", len(calls), calls)
	}
}
