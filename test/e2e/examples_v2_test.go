//go:build e2e

package e2e

import (
	"os/exec"
	"strings"
	"testing"
)

// The v2 example plans validate with the CLI.
func TestV2ExamplesValidate(t *testing.T) {
	for _, f := range []string{"../../examples/github-triage/labels.hcl", "../../examples/everything/everything.hcl"} {
		out, err := exec.Command(planlockBin, "plan", "validate", f).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "valid") {
			t.Errorf("plan validate %s: %v\n%s", f, err, out)
		}
	}
}
