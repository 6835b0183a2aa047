package gitapprove

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/oneline"
)

// holdBranchPrefix starts the branch of every hold pull request.
const holdBranchPrefix = "planlock/hold/"

// PRChange is one file a pull request changes.
type PRChange struct {
	Path           string
	Before, After  []byte
	Added, Deleted bool
}

// PRChanges lists what head changes compared with its merge base with
// base: what GitHub shows as the pull request's diff.
func (r *Repo) PRChanges(base, head plumbing.Hash) ([]PRChange, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	bc, err := r.repo.CommitObject(base)
	if err != nil {
		return nil, fmt.Errorf("base commit %s: %w", base, err)
	}
	hc, err := r.repo.CommitObject(head)
	if err != nil {
		return nil, fmt.Errorf("head commit %s: %w", head, err)
	}
	mb, err := bc.MergeBase(hc)
	if err != nil || len(mb) == 0 {
		return nil, fmt.Errorf("no merge base of %s and %s: %v", base, head, err)
	}
	bt, err := mb[0].Tree()
	if err != nil {
		return nil, fmt.Errorf("tree of %s: %w", mb[0].Hash, err)
	}
	ht, err := hc.Tree()
	if err != nil {
		return nil, fmt.Errorf("tree of %s: %w", head, err)
	}
	changes, err := object.DiffTree(bt, ht)
	if err != nil {
		return nil, fmt.Errorf("diff %s..%s: %w", mb[0].Hash, head, err)
	}
	var out []PRChange
	for _, ch := range changes {
		from, to, err := ch.Files()
		if err != nil {
			return nil, fmt.Errorf("diff %s..%s: %w", mb[0].Hash, head, err)
		}
		c := PRChange{Path: ch.To.Name, Added: from == nil, Deleted: to == nil}
		if c.Path == "" {
			c.Path = ch.From.Name
		}
		for _, x := range []struct {
			f   *object.File
			dst *[]byte
		}{{from, &c.Before}, {to, &c.After}} {
			if x.f == nil {
				continue
			}
			if !x.f.Mode.IsRegular() {
				return nil, fmt.Errorf("%s is not a regular file (mode %s)", x.f.Name, x.f.Mode)
			}
			s, err := x.f.Contents()
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", x.f.Name, err)
			}
			*x.dst = []byte(s)
		}
		out = append(out, c)
	}
	return out, nil
}

// CheckPR decides whether a pull request from branch headRef with these
// changes may be merged as planlock approves things:
//
//   - a hold pull request (branch planlock/hold/<plan>/<id>) adds exactly its
//     own hold file, a valid hold request for that plan and id, and at most
//     changes one plan file, only by setting the hold's step pin to the
//     observed value and the tool_pin of the hold's tool to a definition
//     the plan records (byte for byte what planlock itself would write);
//   - any other pull request leaves hold files alone: they arrive only
//     through hold pull requests.
//
// It returns nil when the pull request passes, else why not.
func CheckPR(headRef string, changes []PRChange, plansGlob, holdsGlob string) error {
	if !strings.HasPrefix(headRef, holdBranchPrefix) {
		for _, c := range changes {
			if globMatch(holdsGlob, c.Path) || strings.HasPrefix(c.Path, "holds/") {
				return fmt.Errorf("%s changes hold file %s: hold files come only from hold pull requests (branches %s…)", headRef, c.Path, holdBranchPrefix)
			}
		}
		return nil
	}
	rest := strings.TrimPrefix(headRef, holdBranchPrefix)
	plan, id, ok := strings.Cut(rest, "/")
	if !ok || plan == "" || id == "" || strings.Contains(id, "/") {
		return fmt.Errorf("hold branch %s is not %s<plan>/<id>", headRef, holdBranchPrefix)
	}
	want := "holds/" + plan + "/" + id + ".hcl"
	var hold *HoldRequest
	var others []PRChange
	for _, c := range changes {
		if c.Path != want {
			others = append(others, c)
			continue
		}
		if !c.Added {
			return fmt.Errorf("hold pull request %s must add %s, not change or delete it", headRef, want)
		}
		h, err := ParseHold(c.After)
		if err != nil {
			return fmt.Errorf("hold pull request %s: %s: %w", headRef, want, err)
		}
		if h.PlanName != plan || h.ID != id {
			return fmt.Errorf("hold pull request %s: %s is for plan %q, hold %q", headRef, want, h.PlanName, h.ID)
		}
		hold = h
	}
	if hold == nil {
		return fmt.Errorf("hold pull request %s does not add its hold file %s", headRef, want)
	}
	switch {
	case len(others) == 0:
		return nil
	case len(others) > 1:
		return fmt.Errorf("hold pull request %s changes %d other files (%s, …): it may change only its hold and one pin", headRef, len(others), others[0].Path)
	}
	c := others[0]
	if !globMatch(plansGlob, c.Path) || c.Added || c.Deleted {
		return fmt.Errorf("hold pull request %s changes %s: it may change only its hold and one pin of an existing plan", headRef, c.Path)
	}
	expect := c.Before
	if hold.ObservedPin != "" {
		var err error
		if expect, err = updatePin(c.Before, hold.Step, hold.ObservedPin); err != nil {
			return fmt.Errorf("hold pull request %s changes plan %s: %w", headRef, c.Path, err)
		}
	}
	if bytes.Equal(expect, c.After) {
		return nil
	}
	// A hold for a changed tool definition updates the tool_pin of its
	// tool: to a definition the plan records (parsing checks it against the
	// digest, so the reviewer reads what merging approves), written exactly
	// as planlock writes it.
	tp, err := recordedToolPin(c.After, hold.Tool)
	if err != nil {
		if hold.ObservedPin == "" {
			return fmt.Errorf("hold pull request %s changes plan %s but its hold observed no pin value, and %v", headRef, c.Path, err)
		}
		return fmt.Errorf("hold pull request %s changes plan %s beyond the pin of step %q", headRef, c.Path, hold.Step)
	}
	expect, err = updateToolPin(expect, hold.Tool, tp.Digest, *tp.Description, tp.Definition)
	if err != nil {
		return fmt.Errorf("hold pull request %s changes plan %s: %w", headRef, c.Path, err)
	}
	if !bytes.Equal(expect, c.After) {
		return fmt.Errorf("hold pull request %s changes plan %s beyond the pin of step %q and the tool_pin of tool %q", headRef, c.Path, hold.Step, hold.Tool)
	}
	return nil
}

// recordedToolPin is the tool_pin of tool in plan src when it records the
// definition and description it pins.
func recordedToolPin(src []byte, tool string) (*hclplan.ToolPin, error) {
	p, diags := hclplan.Parse("plan.hcl", src)
	if diags.HasErrors() {
		return nil, fmt.Errorf("the changed plan does not parse: %s", oneline.Of(diags.Error(), 300))
	}
	tp := p.ToolPin(tool)
	if tp == nil || tp.Definition == nil || tp.Description == nil {
		return nil, fmt.Errorf("the changed plan's tool_pin of %q records no definition", tool)
	}
	return tp, nil
}
