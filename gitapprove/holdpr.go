package gitapprove

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/planlock/planlock/hclplan"
	"github.com/zclconf/go-cty/cty"
)

// DefaultApprovalsBranch is where CI publishes signature bundles, beside
// each file's path. It is only transport: trust comes from the signature.
const DefaultApprovalsBranch = "planlock/approvals"

// BundleSuffix is appended to a file's path to name its signature bundle.
const BundleSuffix = ".sigstore.json"

// Holds opens hold pull requests and reads back their outcome.
type Holds struct {
	Repo *Repo
	// Forge is nil when there is no token or the remote is not on GitHub:
	// then only Git is used (merged = the hold file is on the base branch,
	// rejected = the hold branch was deleted without merging).
	Forge Forge
	// Base is the protected branch holds are merged into.
	Base string
	// Approvals is the branch with the bundles; DefaultApprovalsBranch when empty.
	Approvals string
	// StatusCache keeps a pending answer of Status this long per hold, so
	// that an agent repeating a held call costs one fetch and one API
	// request per period, not one per call. Zero: no cache.
	StatusCache time.Duration
	// Now is the clock of the cache; time.Now when nil.
	Now func() time.Time

	mu    sync.Mutex
	cache map[string]cachedStatus
}

type cachedStatus struct {
	at time.Time
	st HoldStatus
}

func (h *Holds) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// HoldPR is an opened hold pull request.
type HoldPR struct {
	Branch string
	Path   string
	PR     *PR    // nil without a forge
	Next   string // what a person does when no PR could be opened
	// Warning: the PR is open, but something after it failed (labelling).
	Warning string
}

// URL is where a person approves the hold: the PR, else the instructions.
func (p HoldPR) URL() string {
	if p.PR != nil {
		return p.PR.URL
	}
	return p.Next
}

// PinChange asks the hold PR to also update the plan's pin to the observed
// value, so merging it approves the new value for later calls too.
type PinChange struct {
	PlanPath string // the plan file's path in the repository
	// ToolPin, when set, also updates a tool_pin to a changed definition.
	ToolPin *ToolPinChange
}

// Open writes the hold file on branch planlock/hold/<plan>/<id>, pushes it
// and opens the pull request. Git or forge failures wrap ErrUnavailable.
func (h *Holds) Open(ctx context.Context, hold *HoldRequest, pin *PinChange) (HoldPR, error) {
	return h.open(ctx, hold, pin, hold.Branch(), nil)
}

// open proposes hold's file on branch, removing the files of replaced.
func (h *Holds) open(ctx context.Context, hold *HoldRequest, pin *PinChange, branch string, replaced *HoldRequest) (HoldPR, error) {
	src, err := WriteHold(hold)
	if err != nil {
		return HoldPR{}, err
	}
	files := map[string][]byte{hold.Path(): src}
	if replaced != nil && replaced.Path() != hold.Path() {
		files[replaced.Path()] = nil
	}
	base, err := h.base(ctx)
	if err != nil {
		return HoldPR{}, err
	}
	if pin != nil && hold.ObservedPin != "" {
		if err := h.Repo.Fetch(ctx); err != nil {
			return HoldPR{}, err
		}
		plan, ok, err := h.Repo.ReadFile(base, pin.PlanPath)
		if err != nil {
			return HoldPR{}, err
		}
		if !ok {
			return HoldPR{}, fmt.Errorf("plan %s not found on %s", pin.PlanPath, base)
		}
		updated, err := updatePin(plan, hold.Step, hold.ObservedPin)
		if err != nil {
			return HoldPR{}, fmt.Errorf("update pin in %s: %w", pin.PlanPath, err)
		}
		files[pin.PlanPath] = updated
	}
	if pin != nil && pin.ToolPin != nil {
		plan, ok := files[pin.PlanPath]
		if !ok {
			if err := h.Repo.Fetch(ctx); err != nil {
				return HoldPR{}, err
			}
			var err error
			if plan, ok, err = h.Repo.ReadFile(base, pin.PlanPath); err != nil {
				return HoldPR{}, err
			}
			if !ok {
				return HoldPR{}, fmt.Errorf("plan %s not found on %s", pin.PlanPath, base)
			}
		}
		updated, err := updateToolPin(plan, pin.ToolPin.Tool, pin.ToolPin.NewDigest, pin.ToolPin.NewDescription, pin.ToolPin.Definition)
		if err != nil {
			return HoldPR{}, fmt.Errorf("update tool_pin in %s: %w", pin.PlanPath, err)
		}
		files[pin.PlanPath] = updated
	}
	title := fmt.Sprintf("planlock hold: %s / %s calls %s", hold.PlanName, hold.Step, hold.Tool)
	p, err := Propose(ctx, h.Repo, h.Forge, Proposal{
		Branch: branch, Base: base, Files: files,
		Message: title + "\n\n" + hold.Reason,
		Title:   title,
		Body:    holdBody(hold, pin),
		Labels:  []string{LabelHold},
	})
	if err != nil {
		return HoldPR{}, err
	}
	return HoldPR{Branch: p.Branch, Path: hold.Path(), PR: p.PR, Next: p.Next, Warning: p.Warning}, nil
}

// holdBody is the pull request text a reviewer reads. The reason, pin value
// and arguments may come from the upstream or the agent, so they are shown
// only inside code spans and fences they cannot break out of. GitHub refuses
// a body over maxPRBody characters (422), so arguments too long for it are
// left to the hold file, which holds them exactly, and long strings are cut.
func holdBody(hold *HoldRequest, pin *PinChange) string {
	var b strings.Builder
	fmt.Fprintf(&b, "An agent running plan %s asks to make one call that needs a human.\n\n", mdCode(clip(hold.PlanName, 200)))
	fmt.Fprintf(&b, "- **Why:** %s\n", mdCode(clip(hold.Reason, 2000)))
	if hold.RequestedBy != "" {
		fmt.Fprintf(&b, "- **Requested by:** %s\n", mdCode(clip(hold.RequestedBy, 200)))
	}
	fmt.Fprintf(&b, "- **Step:** %s, tool %s\n", mdCode(clip(hold.Step, 200)), mdCode(clip(hold.Tool, 200)))
	fmt.Fprintf(&b, "- **Plan digest:** %s\n", mdCode(hold.PlanDigest))
	fmt.Fprintf(&b, "- **Expires:** %s\n", hold.Expires.UTC().Format(time.RFC3339))
	if hold.ObservedPin != "" {
		fmt.Fprintf(&b, "- **Observed pin value:** %s\n", mdCode(clip(hold.ObservedPin, 2000)))
		if pin != nil {
			fmt.Fprintf(&b, "- Merging also updates the pin in %s to this value.\n", mdCode(pin.PlanPath))
		}
	}
	if pin != nil && pin.ToolPin != nil {
		b.WriteString(toolPinSection(pin.ToolPin, pin.PlanPath))
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, hold.Args, "", "  "); err != nil {
		pretty.Reset()
		pretty.Write(hold.Args)
	}
	fence := strings.Repeat("`", max(3, longestRun(pretty.String(), '`')+1))
	args := fmt.Sprintf("\nArguments, exactly as the call will be made:\n\n%sjson\n%s\n%s\n", fence, pretty.String(), fence)
	tail := "\nMerge to approve this single call; close without merging to refuse it.\n"
	if pin != nil && pin.ToolPin != nil {
		tail = "\nMerge to approve the new tool definition (the plan's tool_pin is updated; the call is repeated under the new plan); close without merging to refuse it.\n"
	}
	if runes(b.String())+runes(args)+runes(tail) > maxPRBody {
		args = fmt.Sprintf("\nThe arguments (%d bytes) are too long for a pull request description: read them in %s in this pull request's changes, exactly as the call will be made (the `arguments` attribute).\n",
			len(hold.Args), mdCode(hold.Path()))
	}
	b.WriteString(args)
	b.WriteString(tail)
	return b.String()
}

// maxPRBody is GitHub's limit for a pull request or comment body, in characters.
const maxPRBody = 65536

func runes(s string) int { return utf8.RuneCountInString(s) }

// clip shortens s to n characters, marking the cut.
func clip(s string, n int) string {
	if runes(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// fitBody keeps a body within maxPRBody, saying where it was cut.
func fitBody(body string) string {
	if runes(body) <= maxPRBody {
		return body
	}
	const note = "\n\n… (cut: GitHub allows 65536 characters; the full text is in the files of this pull request)\n"
	r := []rune(body)[:maxPRBody-runes(note)]
	return string(r) + note
}

// mdCode renders s with the one escaping function for PR text.
func mdCode(s string) string { return hclplan.MarkdownCode(s) }

func longestRun(s string, c byte) int {
	longest, n := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			n++
			longest = max(longest, n)
		} else {
			n = 0
		}
	}
	return longest
}

// HoldState is a hold pull request's outcome.
type HoldState string

const (
	HoldPending  HoldState = "pending"  // PR open (or merged, bundle not yet published)
	HoldMerged   HoldState = "merged"   // merged; File and Bundle are set
	HoldRejected HoldState = "rejected" // closed without merge
)

// HoldStatus is what Status found.
type HoldStatus struct {
	State HoldState
	PR    *PR
	// File is the hold file as merged into the base branch, Bundle its
	// signature bundle from the approvals branch. The caller verifies the
	// bundle over File and that File binds to the call.
	File   []byte
	Bundle []byte
	// AwaitingSignature is true when merged but CI has not published the bundle yet.
	AwaitingSignature bool
}

// Status fetches and reports the hold's outcome. prNumber is the number
// Open returned (0 without a forge). An answer is kept StatusCache long.
func (h *Holds) Status(ctx context.Context, hold *HoldRequest, prNumber int) (HoldStatus, error) {
	key := hold.ID + "\x00" + strconv.Itoa(prNumber)
	// The cache spares GitHub's rate limit; with Git alone a look is one
	// fetch, and a reviewer who just merged expects the next call to see it.
	if h.StatusCache > 0 && h.Forge != nil {
		h.mu.Lock()
		c, ok := h.cache[key]
		h.mu.Unlock()
		if ok && h.now().Sub(c.at) < h.StatusCache && h.now().Sub(c.at) >= 0 {
			return c.st, nil
		}
	}
	st, err := h.status(ctx, hold, prNumber)
	if err == nil && h.StatusCache > 0 && h.Forge != nil {
		h.mu.Lock()
		if h.cache == nil {
			h.cache = map[string]cachedStatus{}
		}
		for k, c := range h.cache { // drop what is stale, so the map stays small
			if h.now().Sub(c.at) >= h.StatusCache {
				delete(h.cache, k)
			}
		}
		h.cache[key] = cachedStatus{at: h.now(), st: st}
		h.mu.Unlock()
	}
	return st, err
}

func (h *Holds) status(ctx context.Context, hold *HoldRequest, prNumber int) (HoldStatus, error) {
	if err := checkSafeName("hold id", hold.ID); err != nil {
		return HoldStatus{}, err
	}
	if err := checkSafeName("plan name", hold.PlanName); err != nil {
		return HoldStatus{}, err
	}
	base, err := h.base(ctx)
	if err != nil {
		return HoldStatus{}, err
	}
	if err := h.Repo.Fetch(ctx); err != nil {
		return HoldStatus{}, err
	}
	var st HoldStatus
	file, onBase, err := h.Repo.ReadFile(base, hold.Path())
	if err != nil {
		return HoldStatus{}, err
	}
	merged := onBase
	if h.Forge != nil && prNumber > 0 {
		pr, err := h.Forge.GetPR(ctx, prNumber)
		if err != nil {
			return HoldStatus{}, err
		}
		st.PR = &pr
		switch pr.State {
		case PROpen:
			return HoldStatus{State: HoldPending, PR: &pr}, nil
		case PRClosed:
			return HoldStatus{State: HoldRejected, PR: &pr}, nil
		}
		merged = true
	} else if !onBase {
		if _, ok, err := h.Repo.RemoteBranchHash(hold.Branch()); err != nil {
			return HoldStatus{}, err
		} else if !ok {
			// The branch is gone and its file never reached the base branch.
			return HoldStatus{State: HoldRejected}, nil
		}
		return HoldStatus{State: HoldPending}, nil
	}
	if merged && !onBase {
		// Merged on the forge but the fetched base lacks the file: the base
		// moved on (reverted) or the fetch raced the merge. Not approved yet.
		st.State = HoldPending
		st.AwaitingSignature = true
		return st, nil
	}
	st.File = file
	bundle, ok, err := h.Repo.ReadFile(h.approvals(), hold.Path()+BundleSuffix)
	if err != nil {
		return HoldStatus{}, err
	}
	if !ok {
		st.State = HoldPending
		st.AwaitingSignature = true
		return st, nil
	}
	st.State = HoldMerged
	st.Bundle = bundle
	return st, nil
}

// base is the configured base branch, else the remote's default branch.
func (h *Holds) base(ctx context.Context) (string, error) {
	if h.Base != "" {
		return h.Base, nil
	}
	return h.Repo.DefaultBranch(ctx)
}

func (h *Holds) approvals() string {
	if h.Approvals != "" {
		return h.Approvals
	}
	return DefaultApprovalsBranch
}

// updatePin sets the eq of the pin of step in a plan file to value, keeping
// the rest of the file as written. A pin that was a number stays a number
// when value is one.
func updatePin(src []byte, step, value string) ([]byte, error) {
	f, diags := hclwrite.ParseConfig(src, "plan.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		return nil, fmt.Errorf("parse plan: %w", diags)
	}
	for _, pb := range f.Body().Blocks() {
		if pb.Type() != "plan" {
			continue
		}
		for _, sb := range pb.Body().Blocks() {
			if sb.Type() != "step" || len(sb.Labels()) != 1 || sb.Labels()[0] != step {
				continue
			}
			for _, pin := range sb.Body().Blocks() {
				if pin.Type() != "pin" {
					continue
				}
				v := cty.StringVal(value)
				if a := pin.Body().GetAttribute("eq"); a != nil && isNumberLiteral(a.Expr().BuildTokens(nil).Bytes()) {
					if n, ok := new(big.Float).SetString(value); ok {
						v = cty.NumberVal(n)
					}
				}
				pin.Body().SetAttributeValue("eq", v)
				return f.Bytes(), nil
			}
			return nil, fmt.Errorf("step %q has no pin", step)
		}
		return nil, fmt.Errorf("plan has no step %q", step)
	}
	return nil, fmt.Errorf("no plan block")
}

func isNumberLiteral(expr []byte) bool {
	e, diags := hclsyntax.ParseExpression(expr, "eq", hcl.InitialPos)
	if diags.HasErrors() {
		return false
	}
	lit, ok := e.(*hclsyntax.LiteralValueExpr)
	return ok && lit.Val.Type() == cty.Number
}
