// Package approvals turns the proxy's holds into approval pull requests and
// decides, when the agent repeats a held call, whether that exact call may
// now run once.
//
// On a hold it records the hold in the state (package ledger), writes the
// hold request file, pushes it on its own branch and opens the pull request
// (package gitapprove); for a pin change the pull request also updates the
// plan's pin. The agent is answered at once: opening the pull request is
// bounded by Config.OpenWait, and when it takes longer it finishes in the
// background and the next identical call shows its URL.
//
// On the repeated identical call (same plan digest, tool and canonical
// arguments) it fetches and reads the pull request's outcome. A merged one
// counts only when the hold file's signature bundle, published by CI on the
// approvals branch, verifies against the operator's trust policy (package
// sign, kind hold) and the signed file binds to exactly this call; then the
// hold is marked approved and the proxy consumes it once (ledger.Reserve with
// HoldID). A closed pull request rejects the call for good. Git or GitHub
// being unreachable blocks the call with that reason and keeps the hold: the
// next identical call asks again.
//
// The pull request follows the hold (lifecycle.go): the proxy reports a call
// that ran (Ran), expired and superseded holds are commented, closed and
// their branches deleted (Sweep), and a closed pull request that a person
// reopens is taken over by a new hold for the same call when Decide is
// asked about the refused hold (the proxy's gate blocks a refused hold
// itself, so through the proxy a refusal stands). None of this calls back
// into the ledger from the Git side.
package approvals

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/planlock/planlock/gitapprove"
	"github.com/planlock/planlock/internal/oneline"
	"github.com/planlock/planlock/proxy/holdreq"
	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/sign"
)

// Store is the part of the durable state approvals uses; *ledger.Ledger has it.
type Store interface {
	FindHold(c ledger.Call) (ledger.Hold, bool)
	NewHold(ctx context.Context, c ledger.Call, spec ledger.HoldSpec) (ledger.Hold, error)
	UpdateHold(ctx context.Context, id string, u ledger.HoldUpdate) (ledger.Hold, error)
}

// PRBackend opens hold pull requests and reads their outcome; *gitapprove.Holds has it.
type PRBackend interface {
	Open(ctx context.Context, hold *gitapprove.HoldRequest, pin *gitapprove.PinChange) (gitapprove.HoldPR, error)
	Status(ctx context.Context, hold *gitapprove.HoldRequest, prNumber int) (gitapprove.HoldStatus, error)
}

// Verifier checks a signature bundle; *sign.Policy has it.
type Verifier interface {
	Verify(ctx context.Context, in sign.VerifyInput) (*sign.Approval, error)
}

// Config configures Approvals.
type Config struct {
	Store Store
	PRs   PRBackend
	// Policy is the operator's trust policy. Nil: no merged hold can be
	// verified, so none runs (the proxy says why).
	Policy Verifier
	// PlanPath is the plan file's path in the repository; a pin hold's pull
	// request updates the pin there. Empty: pin holds do not touch the plan.
	PlanPath string
	// OpenWait bounds how long a held call waits for its pull request to be
	// opened before answering without the URL; zero means 5s.
	OpenWait time.Duration
	// OpenTimeout bounds one attempt to open a pull request (it goes on in
	// the background after OpenWait); zero means 2 minutes.
	OpenTimeout time.Duration
	// CheckTimeout bounds the fetch and status look-up of a repeated call;
	// zero means 20s.
	CheckTimeout time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Log receives one line per background event.
	Log io.Writer
	// SweepInterval is how often expired holds' pull requests are commented,
	// closed and their branches deleted (lifecycle.go); zero means a minute,
	// negative never.
	SweepInterval time.Duration
}

// Approvals is safe for concurrent use. Close it before closing the Store.
type Approvals struct {
	cfg Config

	mu      sync.Mutex
	opening map[string]*flight // hold id → the attempt to open its pull request
	keys    map[string]*keyLock
	closed  bool
	plans   map[string]string // hold id → plan name (lifecycle.go)
	retired map[string]bool   // hold ids whose pull request was retired

	bg     sync.WaitGroup
	ctx    context.Context // background work; cancelled by Close
	cancel context.CancelFunc
}

// flight is one attempt to open a hold's pull request.
type flight struct {
	done   chan struct{}
	url    string
	number int // 0: no pull request (pushed as a branch only)
	err    error
}

type keyLock struct {
	mu   sync.Mutex
	refs int
}

// New checks cfg and returns Approvals.
func New(cfg Config) (*Approvals, error) {
	if cfg.Store == nil || cfg.PRs == nil {
		return nil, errors.New("approvals: a store and a pull request backend are required")
	}
	if cfg.OpenWait <= 0 {
		cfg.OpenWait = 5 * time.Second
	}
	if cfg.OpenTimeout <= 0 {
		cfg.OpenTimeout = 2 * time.Minute
	}
	if cfg.CheckTimeout <= 0 {
		cfg.CheckTimeout = 20 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &Approvals{cfg: cfg, opening: map[string]*flight{}, keys: map[string]*keyLock{}, ctx: ctx, cancel: cancel}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = time.Minute
		a.cfg.SweepInterval = cfg.SweepInterval
	}
	_, lists := cfg.Store.(holdLister)
	_, lc := cfg.PRs.(Lifecycle)
	if cfg.SweepInterval > 0 && lists && lc {
		a.bg.Add(1)
		go a.sweepLoop(cfg.SweepInterval)
	}
	return a, nil
}

// Close stops background openings and waits for them.
func (a *Approvals) Close() {
	a.mu.Lock()
	a.closed = true // no background work starts after this
	a.mu.Unlock()
	a.cancel()
	a.bg.Wait()
}

// decision is a holdreq.Decision and what the review found that the
// state must record.
type decision struct {
	Outcome holdreq.Outcome
	Hold    ledger.Hold
	Message string
	// record is what the review found that the state must record
	// (approved or rejected); decide writes it.
	record *ledger.HoldUpdate
}

// Decide handles a held call; *Approvals is the proxy's HoldApprover.
func (a *Approvals) Decide(ctx context.Context, r holdreq.Request) holdreq.Decision {
	d := a.decide(ctx, r)
	return holdreq.Decision{Outcome: d.Outcome, Hold: d.Hold, Message: d.Message}
}

// decide handles a held call, top to bottom: find the call's hold in the
// state (or record a new one), review it on the forge (open its pull
// request, or read its outcome and verify the signed approval: no state
// is touched there), then record what the review found.
func (a *Approvals) decide(ctx context.Context, r holdreq.Request) decision {
	canon, err := ledger.CanonicalArgs(r.Call.Args)
	if err != nil {
		return decision{Outcome: holdreq.Refused, Message: fmt.Sprintf("held: %s; but the arguments cannot be put in canonical form: %v", r.Reason, err)}
	}
	r.Call.Args = canon
	// One decision at a time per exact call: a burst of identical calls
	// fetches and verifies once.
	unlock := a.lockKey(r.Call.PlanDigest + "\x00" + r.Call.Tool + "\x00" + string(canon))
	defer unlock()

	spec := ledger.HoldSpec{Reason: r.Reason, Cause: r.Cause, ObservedPin: r.ObservedPin, Expires: r.Expires}
	h0, found := a.cfg.Store.FindHold(r.Call)
	var previous *ledger.Hold // superseded when a new hold replaces it (lifecycle.go)
	if found {
		previous = &h0
		a.notePlan(h0.ID, r.PlanName)
	}
	// The call's hold counts only when it stands for everything this call
	// needs: an approval spends only what it approved.
	if h := h0; found && ledger.CauseCovers(h.Cause, r.Cause) && h.ObservedPin == r.ObservedPin {
		switch h.State {
		case ledger.HoldApproved:
			return decision{Outcome: holdreq.Approved, Hold: h}
		case ledger.HoldRejected:
			if d, ok := a.reopened(ctx, r, h); ok { // lifecycle.go
				return d
			}
			return rejected(h)
		case ledger.HoldPending:
			var d decision
			if h.PRURL == "" {
				d = a.open(ctx, r, h)
			} else {
				d = a.record(ctx, r, a.check(ctx, r, h))
			}
			if d.Outcome == holdreq.Held {
				// A repeated call that stays held is a decision of its
				// own: the ledger audits it against the existing hold.
				_, _ = a.cfg.Store.NewHold(context.WithoutCancel(ctx), r.Call, spec)
			}
			return d
		}
		// Consumed or expired: this call needs a new approval.
	}
	h, err := a.cfg.Store.NewHold(context.WithoutCancel(ctx), r.Call, spec)
	if err != nil {
		return decision{Outcome: holdreq.Refused, Message: fmt.Sprintf("held: %s; but planlock could not record the hold (%v); the call was not forwarded", r.Reason, oneline.Of(err.Error(), 300))}
	}
	a.notePlan(h.ID, r.PlanName)
	if previous != nil && previous.ID != h.ID {
		a.supersede(*previous, r.PlanName, h.ID)
	}
	switch {
	case h.State == ledger.HoldApproved:
		return decision{Outcome: holdreq.Approved, Hold: h}
	case h.PRURL != "":
		return a.record(ctx, r, a.check(ctx, r, h))
	}
	return a.open(ctx, r, h)
}

func (a *Approvals) lockKey(k string) func() {
	a.mu.Lock()
	l := a.keys[k]
	if l == nil {
		l = &keyLock{}
		a.keys[k] = l
	}
	l.refs++
	a.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		a.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(a.keys, k)
		}
		a.mu.Unlock()
	}
}

// request is the hold file for h. Its fields come from the durable hold, so
// a retry writes the same bytes and updates the same branch.
func request(r holdreq.Request, h ledger.Hold) *gitapprove.HoldRequest {
	args := h.Args
	if len(args) == 0 {
		args = r.Call.Args // redacted state: the call itself is canonical
	}
	pin := h.ObservedPin
	if pin == "" {
		pin = r.ObservedPin // a hold recorded before observed pins were
	}
	return &gitapprove.HoldRequest{
		ID: h.ID, PlanName: r.PlanName, PlanDigest: h.PlanDigest, Step: h.Step, Tool: h.Tool,
		Args: args, Reason: h.Reason, ObservedPin: pin, RequestedBy: h.RequestedBy, Created: h.Created, Expires: h.Expires,
	}
}

// open starts (or joins) the attempt to open h's pull request and waits for
// it at most OpenWait.
func (a *Approvals) open(ctx context.Context, r holdreq.Request, h ledger.Hold) decision {
	hr := request(r, h)
	if err := hr.Validate(); err != nil {
		return decision{Outcome: holdreq.Refused, Hold: h, Message: fmt.Sprintf("held: %s; hold %s cannot become a pull request: %v", h.Reason, h.ID, err)}
	}
	var pin *gitapprove.PinChange
	if pinCause(h.Cause) && hr.ObservedPin != "" && a.cfg.PlanPath != "" {
		pin = &gitapprove.PinChange{PlanPath: a.cfg.PlanPath}
	}
	if tc := r.ToolChange; tc != nil && a.cfg.PlanPath != "" {
		// Merging the hold approves the new definition: the pull request
		// shows it against the pin and updates the pin.
		if pin == nil {
			pin = &gitapprove.PinChange{PlanPath: a.cfg.PlanPath}
		}
		pin.ToolPin = &gitapprove.ToolPinChange{Tool: tc.Tool, OldDigest: tc.PinnedDigest, OldDescription: tc.PinnedDescription,
			NewDigest: tc.Digest, NewDescription: tc.Description, Definition: tc.Definition, OldDefinition: tc.PinnedDefinition}
	}
	f := a.startOpen(hr, pin)
	wait := time.NewTimer(a.cfg.OpenWait)
	defer wait.Stop()
	select {
	case <-f.done:
	case <-wait.C:
		return decision{Outcome: holdreq.Held, Hold: h, Message: fmt.Sprintf(
			"held: %s; needs approval (hold %s, expires %s). The approval pull request is still being opened: ask the user to approve it (planlock holds show %s shows its URL), then repeat exactly the same call.",
			h.Reason, h.ID, stamp(h.Expires), h.ID)}
	case <-ctx.Done():
		return decision{Outcome: holdreq.Held, Hold: h, Message: fmt.Sprintf("held: %s; needs approval (hold %s); the client cancelled the call", h.Reason, h.ID)}
	}
	if f.err != nil {
		return decision{Outcome: holdreq.Refused, Hold: h, Message: fmt.Sprintf(
			"held: %s; needs approval, but the approval pull request for hold %s could not be opened (%s). The hold is kept; repeat exactly the same call later to try again.",
			h.Reason, h.ID, oneline.Of(f.err.Error(), 300))}
	}
	h.PRURL, h.PR = f.url, f.number
	return pending(h, false)
}

// startOpen returns the running attempt for the hold, or starts one. The
// attempt records the URL in the state itself, so it counts even when no
// call waits for it any more.
func (a *Approvals) startOpen(hr *gitapprove.HoldRequest, pin *gitapprove.PinChange) *flight {
	a.mu.Lock()
	defer a.mu.Unlock()
	if f := a.opening[hr.ID]; f != nil {
		return f
	}
	f := &flight{done: make(chan struct{})}
	if a.closed {
		f.err = errors.New("the proxy is shutting down")
		close(f.done)
		return f
	}
	a.opening[hr.ID] = f
	a.bg.Add(1)
	go func() {
		defer a.bg.Done()
		defer func() {
			a.mu.Lock()
			delete(a.opening, hr.ID)
			a.mu.Unlock()
			close(f.done)
		}()
		ctx, cancel := context.WithTimeout(a.ctx, a.cfg.OpenTimeout)
		defer cancel()
		pr, err := a.cfg.PRs.Open(ctx, hr, pin)
		if err != nil {
			f.err = err
			fmt.Fprintf(a.cfg.Log, "planlock proxy: hold %s: opening the approval pull request: %s (the hold is kept; the next identical call tries again)\n", hr.ID, oneline.Of(err.Error(), 300))
			return
		}
		f.url = pr.URL()
		if pr.PR != nil {
			f.number = pr.PR.Number
		}
		if _, err := a.cfg.Store.UpdateHold(context.WithoutCancel(ctx), hr.ID, ledger.HoldUpdate{PRURL: f.url, PR: f.number, Note: "approval pull request opened on branch " + pr.Branch}); err != nil {
			f.err = fmt.Errorf("pull request %s opened, but recording it failed: %w", f.url, err)
			fmt.Fprintf(a.cfg.Log, "planlock proxy: hold %s: %s\n", hr.ID, oneline.Of(f.err.Error(), 300))
		}
	}()
	return f
}

// check reads the outcome of h's pull request for a repeated call.
func (a *Approvals) check(ctx context.Context, r holdreq.Request, h ledger.Hold) decision {
	hr := request(r, h)
	cctx, cancel := context.WithTimeout(ctx, a.cfg.CheckTimeout)
	defer cancel()
	st, err := a.cfg.PRs.Status(cctx, hr, h.PR)
	if err != nil {
		why := oneline.Of(err.Error(), 300)
		if errors.Is(cctx.Err(), context.DeadlineExceeded) {
			why = fmt.Sprintf("no answer within %s", a.cfg.CheckTimeout)
		}
		return decision{Outcome: holdreq.Refused, Hold: h, Message: fmt.Sprintf(
			"hold %s (%s) could not be checked: %s. The hold is kept; repeat exactly the same call later.", h.ID, h.PRURL, why)}
	}
	switch st.State {
	case gitapprove.HoldRejected:
		note := "pull request closed without merging"
		if st.PR == nil {
			note = "hold branch deleted without merging"
		}
		return decision{Outcome: holdreq.Refused, Hold: h, record: &ledger.HoldUpdate{State: ledger.HoldRejected, Note: note}}
	case gitapprove.HoldMerged:
		return a.approve(ctx, r, h, hr, st)
	}
	return pending(h, st.AwaitingSignature)
}

// approve verifies the merged hold's signature and its binding to the call.
func (a *Approvals) approve(ctx context.Context, r holdreq.Request, h ledger.Hold, hr *gitapprove.HoldRequest, st gitapprove.HoldStatus) decision {
	refuse := func(format string, args ...any) decision {
		return decision{Outcome: holdreq.Refused, Hold: h, Message: fmt.Sprintf("hold %s was merged, but ", h.ID) + fmt.Sprintf(format, args...) + "; the call was not forwarded"}
	}
	if a.cfg.Policy == nil {
		return refuse("the proxy has no trust policy to verify its approval signature (start it with --key or --certificate-identity and --certificate-oidc-issuer)")
	}
	appr, err := a.cfg.Policy.Verify(ctx, sign.VerifyInput{Path: hr.Path(), Content: st.File, Bundle: st.Bundle, Kind: sign.KindHold})
	if err != nil {
		return refuse("its approval signature does not verify: %s", oneline.Of(err.Error(), 300))
	}
	got, err := gitapprove.ParseHold(st.File)
	if err != nil {
		return refuse("the signed hold file is not valid: %s", oneline.Of(err.Error(), 300))
	}
	if why := binds(got, r, h, a.cfg.Now()); why != "" {
		return refuse("the signed approval is for another call (%s)", why)
	}
	note := fmt.Sprintf("approval verified: signed by %s", appr.Signer.Identity)
	if st.PR != nil {
		note += fmt.Sprintf(", pull request #%d merged as %s", st.PR.Number, st.PR.MergeCommit)
	}
	// Who approved, as the signed approval records it (the reviews of the
	// merged pull request): the audit log keeps it with the approval.
	if len(appr.Predicate.Approvers) > 0 {
		note += ", approved by " + strings.Join(appr.Predicate.Approvers, ", ")
	}
	// The digest of the bundle is the approval's evidence in the journal.
	// An approval read back from the journal (after a restart, or another
	// replica's) is never used on its word: the ledger shows it as pending
	// until this runs again and records it once more.
	sum := sha256.Sum256(st.Bundle)
	return decision{Outcome: holdreq.Approved, Hold: h, record: &ledger.HoldUpdate{State: ledger.HoldApproved, Note: note, Evidence: hex.EncodeToString(sum[:])}}
}

// record writes what the forge said about the hold (merged and verified,
// or closed) into the state. It is the only place a review's result
// reaches the state; open, check and approve only read Git and GitHub.
func (a *Approvals) record(ctx context.Context, r holdreq.Request, d decision) decision {
	u := d.record
	if u == nil {
		return d
	}
	h := d.Hold
	nh, err := a.cfg.Store.UpdateHold(context.WithoutCancel(ctx), h.ID, *u)
	switch {
	case u.State == ledger.HoldRejected:
		if err != nil && !errors.Is(err, ledger.ErrHoldState) {
			return decision{Outcome: holdreq.Refused, Hold: h, Message: fmt.Sprintf("hold %s was rejected (%s), and recording that failed: %v; do not retry this call", h.ID, u.Note, oneline.Of(err.Error(), 300))}
		}
		if err == nil {
			h = nh
		}
		return rejected(h)
	case err != nil:
		// Another call may have approved it meanwhile; trust only the state.
		if cur, ok := a.cfg.Store.FindHold(r.Call); ok && cur.ID == h.ID && cur.State == ledger.HoldApproved {
			return decision{Outcome: holdreq.Approved, Hold: cur}
		}
		return decision{Outcome: holdreq.Refused, Hold: h, Message: fmt.Sprintf("hold %s was merged, but recording the approval failed: %s; the call was not forwarded", h.ID, oneline.Of(err.Error(), 300))}
	}
	return decision{Outcome: holdreq.Approved, Hold: nh}
}

// binds says why the signed hold file got does not approve this call ("" when it does).
func binds(got *gitapprove.HoldRequest, r holdreq.Request, h ledger.Hold, now time.Time) string {
	canon, err := ledger.CanonicalArgs(got.Args)
	switch {
	case got.ID != h.ID:
		return fmt.Sprintf("hold %s, not %s", got.ID, h.ID)
	case got.PlanDigest != r.Call.PlanDigest:
		return fmt.Sprintf("plan %s, not %s", got.PlanDigest, r.Call.PlanDigest)
	case got.Tool != r.Call.Tool:
		return fmt.Sprintf("tool %q, not %q", got.Tool, r.Call.Tool)
	case err != nil:
		return fmt.Sprintf("its arguments are not valid: %v", err)
	case !bytes.Equal(canon, r.Call.Args):
		return fmt.Sprintf("arguments %s, not %s", canon, r.Call.Args)
	case got.PlanName != r.PlanName:
		return fmt.Sprintf("plan name %q, not %q", got.PlanName, r.PlanName)
	case got.ObservedPin != h.ObservedPin && h.ObservedPin != "":
		return fmt.Sprintf("observed pin %q, not %q", got.ObservedPin, h.ObservedPin)
	case !now.Before(got.Expires):
		return fmt.Sprintf("it expired at %s", stamp(got.Expires))
	}
	return ""
}

// pinCause reports whether a hold's cause includes a pin mismatch: only
// then does its pull request also update the plan's pin.
func pinCause(cause string) bool {
	return slices.Contains(strings.Split(cause, ","), "pin")
}

func pending(h ledger.Hold, signing bool) decision {
	state := "Ask the user to review and merge it"
	if signing {
		state = "It was merged; its approval signature is not published yet (CI signs merged holds), so wait for that"
	}
	where := "pull request " + h.PRURL
	if h.PR == 0 {
		where = h.PRURL // no forge: how to open the pull request by hand
	}
	return decision{Outcome: holdreq.Held, Hold: h, Message: fmt.Sprintf(
		"held: %s; needs approval: %s (hold %s, expires %s). %s, then repeat exactly the same call.",
		h.Reason, where, h.ID, stamp(h.Expires), state)}
}

func rejected(h ledger.Hold) decision {
	where := ""
	switch {
	case h.PR > 0:
		where = " (" + h.PRURL + " was closed without merging)"
	case h.PRURL != "":
		where = " (its branch was deleted without merging)"
	}
	return decision{Outcome: holdreq.Refused, Hold: h, Message: fmt.Sprintf("rejected: hold %s for exactly this call was refused%s; do not retry this call", h.ID, where)}
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// Lazy is a PRBackend made on first use, and again after a failed attempt, so
// that a proxy starts (and holds are kept) while Git is unreachable.
func Lazy(open func(ctx context.Context) (PRBackend, error)) PRBackend {
	return &lazy{open: open}
}

type lazy struct {
	mu   sync.Mutex
	open func(ctx context.Context) (PRBackend, error)
	f    PRBackend
}

func (l *lazy) get(ctx context.Context) (PRBackend, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		f, err := l.open(ctx)
		if err != nil {
			return nil, err
		}
		l.f = f
	}
	return l.f, nil
}

func (l *lazy) Open(ctx context.Context, hold *gitapprove.HoldRequest, pin *gitapprove.PinChange) (gitapprove.HoldPR, error) {
	f, err := l.get(ctx)
	if err != nil {
		return gitapprove.HoldPR{}, err
	}
	return f.Open(ctx, hold, pin)
}

func (l *lazy) Status(ctx context.Context, hold *gitapprove.HoldRequest, prNumber int) (gitapprove.HoldStatus, error) {
	f, err := l.get(ctx)
	if err != nil {
		return gitapprove.HoldStatus{}, err
	}
	return f.Status(ctx, hold, prNumber)
}
