package gitapprove

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

// A hold pull request may add its own hold and set one pin; each case is a
// real branch on a real repository, diffed as GitHub shows it.
func TestCheckPR(t *testing.T) {
	planSrc, err := os.ReadFile(filepath.Join("..", "examples", "refund", "refund.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	hold := sampleHold()
	holdSrc, _ := WriteHold(hold)
	pinned, err := updatePin(planSrc, hold.Step, hold.ObservedPin)
	if err != nil {
		t.Fatal(err)
	}
	other := *hold
	other.ID = "h-20261130-0002"
	otherSrc, _ := WriteHold(&other)
	const planPath = "plans/refund.hcl"

	for _, tc := range []struct {
		name   string
		branch string
		files  map[string]string // path → content ("" deletes)
		err    string            // "" passes
	}{
		{"hold only", hold.Branch(), map[string]string{hold.Path(): string(holdSrc)}, ""},
		{"hold and its pin", hold.Branch(), map[string]string{hold.Path(): string(holdSrc), planPath: string(pinned)}, ""},
		{"pin and a wider limit", hold.Branch(), map[string]string{hold.Path(): string(holdSrc), planPath: strings.Replace(string(pinned), "max = 30", "max = 30000", 1)}, "beyond the pin"},
		{"plan widened, pin untouched", hold.Branch(), map[string]string{hold.Path(): string(holdSrc), planPath: strings.Replace(string(planSrc), "max = 30", "max = 30000", 1)}, "beyond the pin"},
		{"hold and another file", hold.Branch(), map[string]string{hold.Path(): string(holdSrc), ".github/workflows/planlock.yml": "x"}, "may change only its hold and one pin"},
		{"hold and two plans", hold.Branch(), map[string]string{hold.Path(): string(holdSrc), planPath: string(pinned), "plans/new.hcl": "x"}, "changes 2 other files"},
		{"another hold's file", hold.Branch(), map[string]string{other.Path(): string(otherSrc)}, "does not add its hold file"},
		{"hold file for another id", hold.Branch(), map[string]string{hold.Path(): string(otherSrc)}, `hold "h-20261130-0002"`},
		{"not a hold file", hold.Branch(), map[string]string{hold.Path(): "plan \"x\" {}\n"}, "hold pull request"},
		{"bad hold branch", "planlock/hold/only-plan", map[string]string{hold.Path(): string(holdSrc)}, "is not planlock/hold/<plan>/<id>"},
		{"plan pull request", "planlock/approve/refund-4711", map[string]string{planPath: strings.Replace(string(planSrc), "max = 30", "max = 40", 1)}, ""},
		{"plan pull request adding a hold", "feature", map[string]string{planPath: string(pinned), hold.Path(): string(holdSrc)}, "hold files come only from hold pull requests"},
		{"deleting a hold", "cleanup", map[string]string{"holds/refund-4711/h-old.hcl": ""}, "hold files come only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "main", map[string]string{planPath: string(planSrc), "holds/refund-4711/h-old.hcl": string(otherSrc)})
			w := f.work
			base := rgit(t, w, "rev-parse", "HEAD")
			rgit(t, w, "checkout", "-q", "-b", "pr")
			for p, c := range tc.files {
				if c == "" {
					rgit(t, w, "rm", "-q", p)
					continue
				}
				writeFile(t, filepath.Join(w, p), c)
			}
			rgit(t, w, "add", "-A")
			rgit(t, w, "commit", "-q", "-m", "pr")
			head := rgit(t, w, "rev-parse", "HEAD")
			repo := openRepo(t, w)
			changes, err := repo.PRChanges(plumbing.NewHash(base), plumbing.NewHash(head))
			if err != nil {
				t.Fatal(err)
			}
			err = CheckPR(tc.branch, changes, "plans/**/*.hcl", "holds/**/*.hcl")
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want %q", err, tc.err)
			}
		})
	}
}

// The hold pull request of a changed tool definition may update the
// tool_pin of its tool, exactly as planlock writes it and to a definition
// the plan records; nothing else.
func TestCheckPRToolPin(t *testing.T) {
	hold := sampleHold()
	hold.Tool, hold.Step, hold.ObservedPin = "refund", "a", ""
	hold.Reason = "tool definition changed"
	holdSrc, err := WriteHold(hold)
	if err != nil {
		t.Fatal(err)
	}
	desc := "Refund an order, then mail the list."
	def, digest := newDefinition(t, "refund", desc)
	updated, err := updateToolPin([]byte(toolPinPlanSrc), "refund", digest, desc, def)
	if err != nil {
		t.Fatal(err)
	}
	lookupDef, lookupDigest := newDefinition(t, "lookup", desc)
	otherTool, err := updateToolPin([]byte(toolPinPlanSrc), "lookup", lookupDigest, desc, lookupDef)
	if err != nil {
		t.Fatal(err)
	}
	digestOnly, err := updateToolPin([]byte(toolPinPlanSrc), "refund", digest, desc, nil)
	if err != nil {
		t.Fatal(err)
	}
	hand := strings.Replace(string(updated), "        {\n          \"_meta\"", "        {  \"_meta\"", 2)
	for _, tc := range []struct {
		name, after, err string
	}{
		{"the tool_pin as planlock writes it", string(updated), ""},
		{"and a wider plan", strings.Replace(string(updated), `order        = "any"`, `order        = "sequential"`, 1), `beyond the pin of step "a" and the tool_pin of tool "refund"`},
		{"another tool's pin", string(otherTool), `its hold observed no pin value`},
		{"a digest without its definition", string(digestOnly), `records no definition`},
		{"the definition laid out by hand", hand, `beyond the pin`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changes := []PRChange{
				{Path: hold.Path(), After: holdSrc, Added: true},
				{Path: "plans/p.hcl", Before: []byte(toolPinPlanSrc), After: []byte(tc.after)},
			}
			err := CheckPR(hold.Branch(), changes, "plans/**/*.hcl", "holds/**/*.hcl")
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want %q", err, tc.err)
			}
		})
	}
}
