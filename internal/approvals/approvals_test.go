package approvals

// Unit tests of the decisions, with the real ledger and real signatures
// (package sign, key-based). The forge is a scripted stand-in for
// gitapprove.Holds so that each outcome (slow, failing, merged with a given
// file) can be set up exactly; test/e2e/holdloop_test.go runs the real one end to end.

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/planlock/planlock/gitapprove"
	"github.com/planlock/planlock/proxy/holdreq"
	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/sign"
)

const digest = "sha256:1111111111111111111111111111111111111111111111111111111111111111"

type scriptedForge struct {
	mu      sync.Mutex
	opens   atomic.Int32
	status  atomic.Int32
	release chan struct{} // when set, Open waits for it
	openErr []error       // consumed one per Open
	st      gitapprove.HoldStatus
	stErr   error
	lastReq *gitapprove.HoldRequest
	lastPin *gitapprove.PinChange
}

func (f *scriptedForge) Open(ctx context.Context, h *gitapprove.HoldRequest, pin *gitapprove.PinChange) (gitapprove.HoldPR, error) {
	f.opens.Add(1)
	if f.release != nil {
		select {
		case <-f.release:
		case <-ctx.Done():
			return gitapprove.HoldPR{}, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastReq, f.lastPin = h, pin
	if len(f.openErr) > 0 {
		err := f.openErr[0]
		f.openErr = f.openErr[1:]
		if err != nil {
			return gitapprove.HoldPR{}, err
		}
	}
	return gitapprove.HoldPR{Branch: h.Branch(), Path: h.Path(), PR: &gitapprove.PR{Number: 7, URL: "https://github.example/acme/plans/pull/7"}}, nil
}

func (f *scriptedForge) Status(context.Context, *gitapprove.HoldRequest, int) (gitapprove.HoldStatus, error) {
	f.status.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st, f.stErr
}

func (f *scriptedForge) setStatus(st gitapprove.HoldStatus, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st, f.stErr = st, err
}

type env struct {
	t      *testing.T
	led    *ledger.Ledger
	forge  *scriptedForge
	a      *Approvals
	priv   []byte
	policy *sign.Policy
}

func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	led, err := ledger.Open(t.Context(), ledger.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	priv, pub, err := sign.GenerateKeyPair("ed25519")
	if err != nil {
		t.Fatal(err)
	}
	pk, err := sign.ParsePublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	policy, err := sign.NewPolicy(sign.PolicyOptions{PublicKey: pk})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, led: led, forge: &scriptedForge{}, priv: priv, policy: policy}
	cfg.Store, cfg.PRs = led, e.forge
	if cfg.Policy == nil {
		cfg.Policy = policy
	}
	if cfg.OpenWait == 0 {
		cfg.OpenWait = time.Hour // deterministic: wait for the forge
	}
	e.a, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.a.Close)
	return e
}

func req(args string) holdreq.Request {
	return holdreq.Request{PlanName: "refund-4711", Reason: "step \"email\" needs a human approval for each call",
		Call:    ledger.Call{PlanDigest: digest, Step: "email", StepIndex: 1, Tool: "send_email", Args: json.RawMessage(args)},
		Expires: time.Now().Add(time.Hour)}
}

// signed is the merged status of hold h as CI would publish it, signed as
// the file at path (where the reviewed hold file was).
func (e *env) signed(h *gitapprove.HoldRequest, priv []byte, path string) gitapprove.HoldStatus {
	e.t.Helper()
	src, err := gitapprove.WriteHold(h)
	if err != nil {
		e.t.Fatal(err)
	}
	kp, err := sign.LoadSigningKey(e.t.Context(), "ci.key", func(string) ([]byte, error) { return priv, nil })
	if err != nil {
		e.t.Fatal(err)
	}
	s, err := sign.Sign(e.t.Context(), src, sign.Predicate{Kind: sign.KindHold, Path: path, PullRequest: 7, Approvers: []string{"alice", "bob"}}, sign.SignOptions{Keypair: kp})
	if err != nil {
		e.t.Fatal(err)
	}
	return gitapprove.HoldStatus{State: gitapprove.HoldMerged, PR: &gitapprove.PR{Number: 7, State: gitapprove.PRMerged}, File: src, Bundle: s.Bundle}
}

func TestNewHoldOpensPRAndRepeatIsPending(t *testing.T) {
	e := newEnv(t, Config{PlanPath: "plans/refund.hcl"})
	d := e.a.Decide(t.Context(), req(`{"to":"a@example.com","body":"hi"}`))
	if d.Outcome != holdreq.Held || !strings.Contains(d.Message, "pull request https://github.example/acme/plans/pull/7") ||
		!strings.Contains(d.Message, "repeat exactly the same call") {
		t.Fatalf("first call: %v %q", d.Outcome, d.Message)
	}
	if e.forge.lastPin != nil {
		t.Error("a hold without an observed pin must not change the plan's pin")
	}
	if got := string(e.forge.lastReq.Args); got != `{"body":"hi","to":"a@example.com"}` {
		t.Errorf("hold request arguments %s, want the canonical form", got)
	}
	h, _ := e.led.GetHold(d.Hold.ID)
	if h.PRURL != "https://github.example/acme/plans/pull/7" || h.State != ledger.HoldPending {
		t.Fatalf("ledger hold %+v", h)
	}
	// The repeated call (same arguments in another spelling) asks the forge.
	e.forge.setStatus(gitapprove.HoldStatus{State: gitapprove.HoldPending}, nil)
	d2 := e.a.Decide(t.Context(), req(`{"body":"hi", "to":"a@example.com"}`))
	if d2.Outcome != holdreq.Held || d2.Hold.ID != d.Hold.ID || e.forge.opens.Load() != 1 || e.forge.status.Load() != 1 {
		t.Fatalf("repeat: %v %q opens=%d status=%d", d2.Outcome, d2.Message, e.forge.opens.Load(), e.forge.status.Load())
	}
}

func TestPinHoldUpdatesPlanPin(t *testing.T) {
	e := newEnv(t, Config{PlanPath: "plans/refund.hcl"})
	// A hold of a pinned step shows the value read, but only a pin
	// mismatch (cause "pin") proposes a new pin for the plan.
	r := req(`{"a":1}`)
	r.Cause, r.ObservedPin = "approval", "9f86d081884c7d65"
	if d := e.a.Decide(t.Context(), r); d.Outcome != holdreq.Held {
		t.Fatalf("%v %q", d.Outcome, d.Message)
	}
	if e.forge.lastPin != nil || e.forge.lastReq.ObservedPin != "9f86d081884c7d65" {
		t.Fatalf("approval hold: pin change %+v, request %+v", e.forge.lastPin, e.forge.lastReq)
	}
	r = req(`{}`)
	r.Cause, r.ObservedPin = "pin", "0c1f2e3d4b5a6978"
	if d := e.a.Decide(t.Context(), r); d.Outcome != holdreq.Held {
		t.Fatalf("%v %q", d.Outcome, d.Message)
	}
	if e.forge.lastPin == nil || e.forge.lastPin.PlanPath != "plans/refund.hcl" || e.forge.lastReq.ObservedPin != "0c1f2e3d4b5a6978" {
		t.Fatalf("pin change %+v, request %+v", e.forge.lastPin, e.forge.lastReq)
	}
}

// A slow forge does not hold the call: it is answered without the URL, the
// opening finishes in the background and records the URL, and the next
// identical call shows it.
func TestSlowOpenAnswersAtOnceAndFinishesInBackground(t *testing.T) {
	e := newEnv(t, Config{OpenWait: time.Nanosecond})
	e.forge.release = make(chan struct{})
	d := e.a.Decide(t.Context(), req(`{"n":1}`))
	if d.Outcome != holdreq.Held || !strings.Contains(d.Message, "still being opened") || !strings.Contains(d.Message, "planlock holds show "+d.Hold.ID) {
		t.Fatalf("slow open: %v %q", d.Outcome, d.Message)
	}
	e.a.mu.Lock()
	f := e.a.opening[d.Hold.ID]
	e.a.mu.Unlock()
	if f == nil {
		t.Fatal("no opening in the background")
	}
	close(e.forge.release)
	<-f.done
	h, _ := e.led.GetHold(d.Hold.ID)
	if h.PRURL == "" {
		t.Fatal("the background opening did not record the pull request")
	}
	e.forge.setStatus(gitapprove.HoldStatus{State: gitapprove.HoldPending}, nil)
	if d := e.a.Decide(t.Context(), req(`{"n":1}`)); d.Outcome != holdreq.Held || !strings.Contains(d.Message, h.PRURL) {
		t.Fatalf("next call: %v %q", d.Outcome, d.Message)
	}
	if n := e.forge.opens.Load(); n != 1 {
		t.Fatalf("%d openings, want 1", n)
	}
}

func TestConcurrentIdenticalCallsOpenOnePR(t *testing.T) {
	e := newEnv(t, Config{})
	var wg sync.WaitGroup
	ids := make([]string, 20)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i] = e.a.Decide(context.Background(), req(`{"n":2}`)).Hold.ID
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("different holds for one call: %v", ids)
		}
	}
	if n := e.forge.opens.Load(); n != 1 {
		t.Fatalf("%d openings, want 1", n)
	}
}

func TestUnavailableKeepsHoldAndRetries(t *testing.T) {
	e := newEnv(t, Config{})
	down := &gitapprove.UnavailableError{Op: "push", Err: errors.New("connection refused")}
	e.forge.openErr = []error{down, nil}
	d := e.a.Decide(t.Context(), req(`{"n":3}`))
	if d.Outcome != holdreq.Refused || !strings.Contains(d.Message, "could not be opened") || !strings.Contains(d.Message, "connection refused") || strings.Contains(d.Message, "do not retry") {
		t.Fatalf("open failed: %v %q", d.Outcome, d.Message)
	}
	if h, ok := e.led.GetHold(d.Hold.ID); !ok || h.State != ledger.HoldPending {
		t.Fatalf("hold not kept: %+v", h)
	}
	d2 := e.a.Decide(t.Context(), req(`{"n":3}`))
	if d2.Outcome != holdreq.Held || d2.Hold.ID != d.Hold.ID || !strings.Contains(d2.Message, "/pull/7") {
		t.Fatalf("retry: %v %q", d2.Outcome, d2.Message)
	}
	// Unreachable while checking: blocked, still pending.
	e.forge.setStatus(gitapprove.HoldStatus{}, down)
	d3 := e.a.Decide(t.Context(), req(`{"n":3}`))
	if d3.Outcome != holdreq.Refused || !strings.Contains(d3.Message, "could not be checked") || !strings.Contains(d3.Message, "hold is kept") {
		t.Fatalf("check failed: %v %q", d3.Outcome, d3.Message)
	}
	if h, _ := e.led.GetHold(d.Hold.ID); h.State != ledger.HoldPending {
		t.Fatalf("hold state %s after an unreachable check", h.State)
	}
}

func TestRejectedIsFinal(t *testing.T) {
	e := newEnv(t, Config{})
	d := e.a.Decide(t.Context(), req(`{"n":4}`))
	e.forge.setStatus(gitapprove.HoldStatus{State: gitapprove.HoldRejected}, nil)
	for i := 0; i < 2; i++ {
		d2 := e.a.Decide(t.Context(), req(`{"n":4}`))
		if d2.Outcome != holdreq.Refused || !strings.Contains(d2.Message, "do not retry") || !strings.Contains(d2.Message, "closed without merging") {
			t.Fatalf("rejected: %v %q", d2.Outcome, d2.Message)
		}
	}
	if n := e.forge.status.Load(); n != 1 {
		t.Errorf("a rejected hold was looked up %d times, want 1 (the state decides)", n)
	}
	if h, _ := e.led.GetHold(d.Hold.ID); h.State != ledger.HoldRejected {
		t.Fatalf("ledger state %s", h.State)
	}
}

func TestMergedApprovalMustVerifyAndBind(t *testing.T) {
	otherPriv, _, err := sign.GenerateKeyPair("ed25519")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		edit   func(h *gitapprove.HoldRequest)
		key    []byte // nil: the trusted key
		bundle func(st *gitapprove.HoldStatus)
		// ownPath signs the edited file under its own path, not the held one's.
		ownPath bool
		want    string // "" means approved
	}{
		{name: "exact call", want: ""},
		{name: "same arguments, other spelling", edit: func(h *gitapprove.HoldRequest) { h.Args = json.RawMessage(`{"n":5.0}`) }, want: ""},
		{name: "other arguments", edit: func(h *gitapprove.HoldRequest) { h.Args = json.RawMessage(`{"n":6}`) }, want: `arguments {"n":6}, not {"n":5}`},
		{name: "other tool", edit: func(h *gitapprove.HoldRequest) { h.Tool = "refund_customer" }, want: `tool "refund_customer"`},
		{name: "other plan digest", edit: func(h *gitapprove.HoldRequest) { h.PlanDigest = "sha256:" + strings.Repeat("2", 64) }, want: "plan sha256:2222"},
		{name: "other hold", edit: func(h *gitapprove.HoldRequest) { h.ID = "0000000000000000" }, want: "hold 0000000000000000"},
		{name: "other plan name", edit: func(h *gitapprove.HoldRequest) { h.PlanName = "other" }, want: `plan name "other"`},
		{name: "expired file", edit: func(h *gitapprove.HoldRequest) {
			h.Created, h.Expires = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)
		}, want: "it expired"},
		{name: "another hold's approval", edit: func(h *gitapprove.HoldRequest) { h.ID = "0000000000000000" }, ownPath: true, want: "approval names another file"},
		{name: "untrusted key", key: otherPriv, want: "does not verify"},
		{name: "bundle over other bytes", bundle: func(st *gitapprove.HoldStatus) { st.File = append(st.File, '\n') }, want: "does not verify"},
		{name: "missing bundle", bundle: func(st *gitapprove.HoldStatus) { st.Bundle = nil }, want: "does not verify"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			d := e.a.Decide(t.Context(), req(`{"n":5}`))
			hr := *e.forge.lastReq
			if tc.edit != nil {
				tc.edit(&hr)
			}
			key := e.priv
			if tc.key != nil {
				key = tc.key
			}
			path := e.forge.lastReq.Path()
			if tc.ownPath {
				path = hr.Path()
			}
			st := e.signed(&hr, key, path)
			if tc.bundle != nil {
				tc.bundle(&st)
			}
			e.forge.setStatus(st, nil)
			got := e.a.Decide(t.Context(), req(`{"n":5}`))
			h, _ := e.led.GetHold(d.Hold.ID)
			if tc.want == "" {
				if got.Outcome != holdreq.Approved || got.Hold.ID != d.Hold.ID || h.State != ledger.HoldApproved {
					t.Fatalf("want approved: %v %q (ledger %s)", got.Outcome, got.Message, h.State)
				}
				// The audit log records who approved, from the signed approval.
				audit, err := os.ReadFile(filepath.Join(e.led.Dir(), "audit.jsonl"))
				if err != nil || !strings.Contains(string(audit), "approved by alice, bob") {
					t.Errorf("audit log lacks the approvers (%v):\n%s", err, audit)
				}
				return
			}
			if got.Outcome != holdreq.Refused || !strings.Contains(got.Message, tc.want) || !strings.Contains(got.Message, "not forwarded") {
				t.Fatalf("want refused with %q: %v %q", tc.want, got.Outcome, got.Message)
			}
			if h.State != ledger.HoldPending {
				t.Fatalf("a refused approval changed the hold to %s", h.State)
			}
		})
	}
}

func TestNoTrustPolicyRunsNothing(t *testing.T) {
	e := newEnv(t, Config{})
	e.a.cfg.Policy = nil
	d := e.a.Decide(t.Context(), req(`{"n":8}`))
	e.forge.setStatus(e.signed(e.forge.lastReq, e.priv, e.forge.lastReq.Path()), nil)
	got := e.a.Decide(t.Context(), req(`{"n":8}`))
	if got.Outcome != holdreq.Refused || !strings.Contains(got.Message, "no trust policy") {
		t.Fatalf("%v %q", got.Outcome, got.Message)
	}
	if h, _ := e.led.GetHold(d.Hold.ID); h.State != ledger.HoldPending {
		t.Fatalf("state %s", h.State)
	}
}

// After the approved hold is consumed, the same call needs a new approval.
func TestConsumedHoldOpensANewOne(t *testing.T) {
	e := newEnv(t, Config{})
	d := e.a.Decide(t.Context(), req(`{"n":9}`))
	e.forge.setStatus(e.signed(e.forge.lastReq, e.priv, e.forge.lastReq.Path()), nil)
	if got := e.a.Decide(t.Context(), req(`{"n":9}`)); got.Outcome != holdreq.Approved {
		t.Fatalf("%v %q", got.Outcome, got.Message)
	}
	c := req(`{"n":9}`).Call
	if _, err := e.led.Reserve(t.Context(), ledger.Reservation{Call: c, MaxCalls: 5, HoldID: d.Hold.ID}); err != nil {
		t.Fatal(err)
	}
	got := e.a.Decide(t.Context(), req(`{"n":9}`))
	if got.Outcome != holdreq.Held || got.Hold.ID == d.Hold.ID || e.forge.opens.Load() != 2 {
		t.Fatalf("after consumption: %v %q opens=%d", got.Outcome, got.Message, e.forge.opens.Load())
	}
}

// An approved hold counts only for what it was made for: a call that now
// also needs past max_calls gets a new hold and pull request, and the
// approved one is left unspent.
func TestApprovedHoldCountsOnlyForItsCause(t *testing.T) {
	e := newEnv(t, Config{})
	r := req(`{"n":12}`)
	r.Cause = "approval"
	d := e.a.Decide(t.Context(), r)
	e.forge.setStatus(e.signed(e.forge.lastReq, e.priv, e.forge.lastReq.Path()), nil)
	if got := e.a.Decide(t.Context(), r); got.Outcome != holdreq.Approved || got.Hold.ID != d.Hold.ID {
		t.Fatalf("approval: %v %q", got.Outcome, got.Message)
	}
	r.Cause = "violation:max_calls,approval"
	got := e.a.Decide(t.Context(), r)
	if got.Outcome != holdreq.Held || got.Hold.ID == d.Hold.ID || got.Hold.Cause != r.Cause || e.forge.opens.Load() != 2 {
		t.Fatalf("past max_calls: %v %+v opens=%d", got.Outcome, got.Hold, e.forge.opens.Load())
	}
	if h, _ := e.led.GetHold(d.Hold.ID); h.State != ledger.HoldApproved {
		t.Fatalf("the first approval changed: %s", h.State)
	}
}

// A signed hold file binds to the pin value the hold observed: an approval
// of another value does not count.
func TestSignedHoldBindsTheObservedPin(t *testing.T) {
	e := newEnv(t, Config{})
	r := req(`{"n":13}`)
	r.Cause, r.ObservedPin = "pin", "0c1f2e3d4b5a6978"
	e.a.Decide(t.Context(), r)
	other := *e.forge.lastReq
	other.ObservedPin = "1111111111111111"
	e.forge.setStatus(e.signed(&other, e.priv, other.Path()), nil)
	got := e.a.Decide(t.Context(), r)
	if got.Outcome != holdreq.Refused || !strings.Contains(got.Message, `observed pin "1111111111111111", not "0c1f2e3d4b5a6978"`) {
		t.Fatalf("%v %q", got.Outcome, got.Message)
	}
}

func TestLazyRetriesAfterFailure(t *testing.T) {
	calls := 0
	inner := &scriptedForge{}
	f := Lazy(func(context.Context) (PRBackend, error) {
		calls++
		if calls == 1 {
			return nil, &gitapprove.UnavailableError{Op: "clone", Err: errors.New("unreachable")}
		}
		return inner, nil
	})
	if _, err := f.Status(t.Context(), nil, 0); !errors.Is(err, gitapprove.ErrUnavailable) {
		t.Fatalf("first use: %v", err)
	}
	if _, err := f.Status(t.Context(), nil, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Status(t.Context(), nil, 0); err != nil || calls != 2 {
		t.Fatalf("opened %d times, want 2: %v", calls, err)
	}
}

// An expired hold is checked again: the identical call gets a new hold and
// a new pull request; the expired one is not asked about.
func TestExpiredHoldOpensANewOne(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	led, err := ledger.Open(t.Context(), ledger.Options{Dir: t.TempDir(), Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	forge := &scriptedForge{}
	a, err := New(Config{Store: led, PRs: forge, OpenWait: time.Hour, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	r := req(`{"n":10}`)
	r.Expires = now.Add(time.Hour)
	first := a.Decide(t.Context(), r)
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	r.Expires = clock().Add(time.Hour)
	second := a.Decide(t.Context(), r)
	if second.Outcome != holdreq.Held || second.Hold.ID == first.Hold.ID || forge.opens.Load() != 2 || forge.status.Load() != 0 {
		t.Fatalf("after expiry: %v %q opens=%d status=%d", second.Outcome, second.Message, forge.opens.Load(), forge.status.Load())
	}
	if h, _ := led.GetHold(first.Hold.ID); h.State != ledger.HoldExpired {
		t.Fatalf("first hold is %s, want expired", h.State)
	}
}

func TestDecideAfterCloseStartsNothing(t *testing.T) {
	e := newEnv(t, Config{})
	e.a.Close()
	d := e.a.Decide(t.Context(), req(`{"n":11}`))
	if d.Outcome != holdreq.Refused || !strings.Contains(d.Message, "shutting down") || !strings.Contains(d.Message, "hold is kept") || e.forge.opens.Load() != 0 {
		t.Fatalf("%v %q opens=%d", d.Outcome, d.Message, e.forge.opens.Load())
	}
}

// A hold for a changed tool definition proposes the new definition's pin
// in the plan, with the pinned and the listed definition for the PR.
func TestToolDefinitionHoldUpdatesTheToolPin(t *testing.T) {
	e := newEnv(t, Config{PlanPath: "plans/refund.hcl"})
	old := "Refund an order."
	r := req(`{"a":1}`)
	r.Cause = "violation:tool_definition"
	r.ToolChange = &holdreq.ToolChange{Tool: "refund_customer", PinnedDigest: "sha256:" + strings.Repeat("1", 64), PinnedDescription: &old,
		Digest: "sha256:" + strings.Repeat("2", 64), Description: "Refund an order, then mail the list.", Definition: []byte(`{"name":"refund_customer"}`),
		PinnedDefinition: []byte(`{"description":"Refund an order.","name":"refund_customer"}`)}
	if d := e.a.Decide(t.Context(), r); d.Outcome != holdreq.Held {
		t.Fatalf("%v %q", d.Outcome, d.Message)
	}
	tp := e.forge.lastPin
	if tp == nil || tp.PlanPath != "plans/refund.hcl" || tp.ToolPin == nil || tp.ToolPin.NewDigest != r.ToolChange.Digest ||
		tp.ToolPin.OldDigest != r.ToolChange.PinnedDigest || *tp.ToolPin.OldDescription != old || string(tp.ToolPin.Definition) != `{"name":"refund_customer"}` ||
		string(tp.ToolPin.OldDefinition) != string(r.ToolChange.PinnedDefinition) {
		t.Fatalf("pin change %+v", tp)
	}
}
