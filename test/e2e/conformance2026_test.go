//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/planlock/planlock/internal/testkit/peers"
)

// conformance2026Plan allows every tool of the test upstream's conformance
// set, so that a scenario through planlock fails only where planlock
// changes what the upstream does.
const conformance2026Plan = `
plan "conformance" {
  goal  = "the tools the conformance scenarios call"
  order = "any"
  step "simple" {
    tool      = "test_simple_text"
    max_calls = 1000
  }
  step "image" {
    tool      = "test_image_content"
    max_calls = 1000
  }
  step "audio" {
    tool      = "test_audio_content"
    max_calls = 1000
  }
  step "embedded" {
    tool      = "test_embedded_resource"
    max_calls = 1000
  }
  step "mixed" {
    tool      = "test_multiple_content_types"
    max_calls = 1000
  }
  step "error" {
    tool      = "test_error_handling"
    max_calls = 1000
  }
  step "progress" {
    tool      = "test_tool_with_progress"
    max_calls = 1000
  }
  step "logging" {
    tool      = "test_tool_with_logging"
    max_calls = 1000
  }
  step "mrtr-elicitation" {
    tool      = "test_input_required_result_elicitation"
    max_calls = 1000
    input {
      elicitation {
        field "name" {
          type       = "string"
          max_length = 100
        }
      }
    }
  }
  step "mrtr-sampling" {
    tool      = "test_input_required_result_sampling"
    max_calls = 1000
    input {
      sampling { max_tokens = 100 }
    }
  }
  step "mrtr-roots" {
    tool      = "test_input_required_result_list_roots"
    max_calls = 1000
    input { roots = true }
  }
  step "mrtr-state" {
    tool      = "test_input_required_result_request_state"
    max_calls = 1000
    input {
      elicitation {
        field "ok" { type = "boolean" }
      }
    }
  }
  step "mrtr-multiple" {
    tool      = "test_input_required_result_multiple_inputs"
    max_calls = 1000
    input {
      elicitation {
        field "name" {
          type       = "string"
          max_length = 100
        }
      }
      sampling { max_tokens = 50 }
      roots = true
    }
  }
  step "mrtr-rounds" {
    tool      = "test_input_required_result_multi_round"
    max_calls = 1000
    input {
      max_rounds = 2
      elicitation {
        field "name" {
          type       = "string"
          max_length = 100
          optional   = true
        }
        field "color" {
          type       = "string"
          max_length = 100
          optional   = true
        }
      }
    }
  }
  step "mrtr-tampered" {
    tool      = "test_input_required_result_tampered_state"
    max_calls = 1000
    input {
      elicitation {
        field "ok" { type = "boolean" }
      }
    }
  }
  step "mrtr-capabilities" {
    tool      = "test_input_required_result_capabilities"
    max_calls = 1000
    input {
      elicitation {
        field "name" {
          type       = "string"
          max_length = 100
        }
      }
      sampling { max_tokens = 100 }
    }
  }
  prompt "test_input_required_result_prompt" {
    max_calls = 1000
    input {
      elicitation {
        field "context" {
          type       = "string"
          max_length = 100
        }
      }
    }
  }
}
`

// sameModuloRacy reports whether got and want name the same scenarios
// once the racy ones, which may pass or fail on either side, are left out.
func sameModuloRacy(got, want, racy []string) bool {
	drop := func(s []string) []string {
		return slices.DeleteFunc(slices.Clone(s), func(n string) bool { return slices.Contains(racy, n) })
	}
	return slices.Equal(drop(got), drop(want))
}

// TestConformance2026 runs the scenarios MCP 2026-07-28 requires against
// the test upstream directly (they must be the committed baseline) and
// through planlock proxy's HTTP front, with the upstream over HTTP and over
// stdio: through planlock, exactly the same scenarios pass, except those
// the baseline lists under refused_through, which must fail through it (each
// with its reason there).
func TestConformance2026(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(peers.Root(t), "test", "peers", "conformance-2026-baseline.json"))
	if err != nil {
		t.Fatal(err)
	}
	var bl struct {
		Revision       string               `json:"revision"`
		TestUpstream   peers.ConformanceSet `json:"testupstream"`
		RefusedThrough map[string]string    `json:"refused_through"`
	}
	if err := json.Unmarshal(b, &bl); err != nil {
		t.Fatal(err)
	}
	if bl.Revision != peers.Revision2026 {
		t.Fatalf("baseline for %q, the suite runs %q", bl.Revision, peers.Revision2026)
	}
	racy := bl.TestUpstream.Racy
	direct := peers.StartHTTP(t, testUpstreamBin, "--conformance")
	res := peers.Conformance2026(t, direct)
	if got := peers.PassingScenarios(res); !sameModuloRacy(got, bl.TestUpstream.Passing, racy) {
		for _, sc := range res {
			if !sc.OK() {
				t.Logf("fails directly: %s", sc)
			}
		}
		t.Fatalf("directly, the passing scenarios are\n  %v\nthe baseline says\n  %v\n(update test/peers/conformance-2026-baseline.json if the suite or the upstream changed)", got, bl.TestUpstream.Passing)
	}
	want := slices.DeleteFunc(peers.PassingScenarios(res), func(n string) bool { return bl.RefusedThrough[n] != "" })
	plan := writePlan(t, conformance2026Plan)
	fronts := []struct {
		name     string
		upstream []string
	}{
		{"HTTP upstream", []string{"--upstream-url", direct}},
		{"stdio upstream", []string{"--", testUpstreamBin, "--conformance"}},
	}
	for _, f := range fronts {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"proxy", "--plan", plan, "--insecure-skip-verify", "--state", filepath.Join(t.TempDir(), "state"),
				"--listen", "127.0.0.1:0"}, f.upstream...)
			url := startLogged(t, nil, `on (http://\S+/mcp)`, planlockBin, args...)
			through := peers.Conformance2026(t, url)
			for name, why := range bl.RefusedThrough {
				if through[name].OK() {
					t.Errorf("%s passes through planlock, but the baseline says it does not (%s): update refused_through", name, why)
				}
			}
			if got := peers.PassingScenarios(through); !sameModuloRacy(got, want, racy) {
				for _, name := range want {
					if !through[name].OK() {
						t.Logf("fails through planlock: %s", through[name])
					}
				}
				t.Errorf("through planlock the passing scenarios are\n  %v\ndirectly\n  %v", got, want)
			}
		})
	}
}
