package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// draftTemplate is the loose plan the operator observes with: every tool
// the agent needs, refunds up to 1000 EUR, any order. It is never signed.
const draftTemplate = `plan "refund-4711" {
  goal    = "Refund order 4711, email the customer, close the ticket"
  expires = %s
  order   = "any"

  upstream {
    command = [%s, "--hash-file", %s, "--calls-log", %s]
  }

  step "lookup" {
    tool      = "get_order"
    max_calls = 10
    arg "order_id" { any = true }
  }

  step "refund" {
    tool      = "refund_customer"
    max_calls = 10
    arg "order_id" { any = true }
    arg "amount" {
      min = 1
      max = 1000
    }
    arg "currency" { any = true }
  }

  step "email" {
    tool      = "send_email"
    max_calls = 10
    arg "to" { any = true }
    arg "body" { any = true }
  }

  step "close" {
    tool = "close_ticket"
    arg "ticket_id" { any = true }
    arg "comment" { any = true }
  }
}
`

// planTests are the tests of the approved plan that go into its approval
// pull request: the observed session replayed under it. The suggested tests
// test the suggested plan; the approved plan also pins the refund script
// and asks a human for each email, so the same calls end in a hold there.
const planTests = `# The observed session, replayed under the approved plan.

test "the observed session" {
  pin {
    step  = "refund"
    value = "9f86d081884c7d65"
  }
  call {
    tool   = "get_order"
    args   = { order_id = "4711" }
    expect = "allow"
  }
  call {
    tool   = "refund_customer"
    args   = { order_id = "4711", amount = 30, currency = "EUR" }
    expect = "allow"
  }
  call {
    tool        = "send_email"
    args        = { to = "customer-4711@example.com", body = "Your refund of 30 EUR is on its way." }
    expect      = "hold"
    reason_step = "email"
  }
}
`

// observedCalls are the agent's typical calls, as act 0 watches them.
var observedCalls = []attempt{
	{what: "get_order 4711", tool: "get_order", args: map[string]any{"order_id": "4711"}, want: "forwarded"},
	{what: "refund_customer 30 EUR on order 4711", tool: "refund_customer", args: map[string]any{"order_id": "4711", "amount": 30.0, "currency": "EUR"}, want: "forwarded"},
	{what: "send_email to the customer", tool: "send_email", args: map[string]any{"to": "customer-4711@example.com", "body": "Your refund of 30 EUR is on its way."}, want: "forwarded"},
	{what: "close_ticket T-4711", tool: "close_ticket", args: map[string]any{"ticket_id": "T-4711", "comment": "Refunded 30 EUR."}, want: "forwarded"},
}

// observeFirst is part 0: a loose draft plan, observed in front of a
// throwaway refund server (its calls are real), then the tightest plan
// suggested from the audit log, with tests.
func (w *world) observeFirst(ctx context.Context, s *story) error {
	s.section("0. Observe first: the agent's real calls, then a suggested plan")
	dir := filepath.Join(w.dir, "observe")
	// A refund server of its own: act 4 checks the real one's calls log.
	calls := filepath.Join(dir, "refund-system", "calls.jsonl")
	audit := filepath.Join(dir, "state", "audit.jsonl")
	if err := os.MkdirAll(filepath.Dir(calls), 0o755); err != nil {
		return err
	}
	expires := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	draft := fmt.Sprintf(draftTemplate, strconv.Quote(expires), strconv.Quote(w.server), strconv.Quote(w.hashFile), strconv.Quote(calls))
	if err := os.WriteFile(filepath.Join(dir, "refund-draft.hcl"), []byte(draft), 0o644); err != nil {
		return err
	}
	a, err := w.startProxy(ctx, dir, filepath.Join(dir, "proxy.log"), []string{"proxy", "--mode", "observe", "--insecure-skip-verify",
		"--plan", "refund-draft.hcl", "--state", "state", "--audit", audit})
	if err != nil {
		return err
	}
	closed := false
	defer func() {
		if !closed {
			a.stop()
		}
	}()
	log, _ := os.ReadFile(filepath.Join(dir, "proxy.log"))
	s.step(strings.Contains(string(log), "observe mode"),
		"operator: planlock proxy --mode observe --insecure-skip-verify --plan refund-draft.hcl --state (fresh) (a loose draft: refunds up to 1000 EUR, any order; not signed yet, hence --insecure-skip-verify, which observe mode still needs; a refund server of its own)",
		"it warns: nothing is enforced, every would-be decision is audited")
	for _, at := range observedCalls {
		if _, err := w.try(ctx, s, a, at); err != nil {
			return err
		}
	}
	closed = true
	if err := a.stop(); err != nil {
		return fmt.Errorf("stop the observing proxy: %w", err)
	}

	got, err := w.cmd(ctx, "Operator", dir, w.planlock, "audit", "verify", audit)
	s.step(err == nil, "operator: planlock audit verify observe/state/audit.jsonl", strings.ReplaceAll(got, "\n", ", "))
	observed, err := readObserved(audit)
	want := "would_allow get_order, would_allow refund_customer, would_allow send_email, would_allow close_ticket"
	answer := strings.Join(observed, ", ")
	if err != nil {
		answer = err.Error()
	}
	s.step(err == nil && answer == want, "operator: the audit log records what the draft would have decided, nothing blocked", answer)
	seen, _, err := readCalls(calls)
	answer = fmt.Sprintf("%d calls went through", len(seen))
	if err != nil {
		answer = err.Error()
	}
	s.step(err == nil && len(seen) == len(observedCalls), "throwaway refund system: its calls log shows the observed calls really ran", answer)

	_, err = w.cmd(ctx, "Operator", dir, w.planlock, "plan", "suggest", "--from-audit", audit, "--plan", "refund-draft.hcl")
	_, serr := os.Stat(filepath.Join(dir, "refund-draft.suggested_test.hcl"))
	s.step(err == nil && serr == nil, "operator: planlock plan suggest --from-audit observe/state/audit.jsonl --plan refund-draft.hcl",
		"wrote refund-draft.suggested.hcl and refund-draft.suggested_test.hcl")
	if err != nil {
		return err
	}
	got, err = w.cmd(ctx, "Operator", dir, w.planlock, "plan", "test", "refund-draft.suggested.hcl")
	s.step(err == nil, "operator: planlock plan test refund-draft.suggested.hcl", lastLine(got))
	if err != nil {
		return err
	}

	// Alice keeps her plan (act 1): the suggestion is tighter (exactly
	// 30 EUR, one refund) and looser (no pin, no approval of emails) than
	// what the story needs. Its lesson goes into the plan's tests.
	review := filepath.Join(dir, "review")
	if err := os.MkdirAll(filepath.Join(review, "plans"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(review, planPath), []byte(w.plan()), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(review, testsPath), []byte(planTests), 0o644); err != nil {
		return err
	}
	got, err = w.cmd(ctx, "Alice", review, w.planlock, "plan", "test", planPath)
	s.step(err == nil, "alice: reviews the suggestion, keeps her own plan (act 1) and writes the observed session as its test, "+testsPath+" (it goes into the approval pull request): planlock plan test "+planPath, lastLine(got))
	return err
}

// readObserved lists the audit log's observe records as "decision tool"
// (and any enforced decision, which observe mode must not have made).
func readObserved(path string) ([]string, error) {
	recs, err := readAudit(path)
	var out []string
	for _, rec := range recs {
		switch rec.Type {
		case "observe":
			out = append(out, rec.Decision+" "+rec.Tool)
		case "decision":
			out = append(out, "enforced "+rec.Decision+" "+rec.Tool)
		}
	}
	return out, err
}
