//go:build e2e

package e2e

import (
	"strings"
	"testing"

	"github.com/planlock/planlock/gitapprove"
)

// A hold pull request closed without merging and then reopened, through
// the whole proxy (the planlock binary, the GitHub fake, the real git): the
// call is refused while the pull request is closed, waits again once it is
// reopened (as GitHub users expect of a reopened pull request), and runs
// exactly once after it is merged and CI's reconcile run signs the hold.
func TestReopenedHoldPullRequestThroughTheProxy(t *testing.T) {
	l := newLoop(t, true)
	const prURL = "https://github.example/acme/plans/pull/1"
	args := map[string]any{"to": "customer-4711@example.com", "body": "reopened"}

	text, isErr := l.call("send_email", args)
	l.expect("held", text, isErr, "needs approval", prURL)
	oldID := holdID(t, text)
	branch := "planlock/hold/refund-4711/" + oldID

	// Closed unmerged: refused, and refused again while it stays closed.
	l.gh.ClosePull(1)
	for i := range 2 {
		text, isErr = l.call("send_email", args)
		l.expect("closed #"+string(rune('1'+i)), text, isErr, "blocked", "rejected", "do not retry", oldID)
	}

	// Reopened: the same call waits for the same pull request again, now
	// under a new hold; the refused one stays refused.
	l.gh.ReopenPull(1)
	text, isErr = l.call("send_email", args)
	l.expect("reopened", text, isErr, "needs approval", prURL, "repeat exactly the same call")
	newID := holdID(t, text)
	if newID == oldID {
		t.Fatalf("the reopened pull request still asks for the refused hold %s", oldID)
	}
	if list := l.holdsCLI("list"); !strings.Contains(list, oldID) || !strings.Contains(list, newID) {
		t.Fatalf("holds:\n%s", list)
	}
	if show := l.holdsCLI("show", oldID); !strings.Contains(show, "rejected") {
		t.Errorf("the refused hold is no longer rejected:\n%s", show)
	}
	l.waitComment(1, "It now asks for the same call again as hold `"+newID+"`")
	if l.gh.Count() != 1 {
		t.Fatalf("%d pull requests, want the reopened one only", l.gh.Count())
	}
	// Still open: the same answer.
	text, isErr = l.call("send_email", args)
	l.expect("reopened, still open", text, isErr, "needs approval", prURL, "hold "+newID)
	if n := len(l.calls("send_email")); n != 0 {
		t.Fatalf("a held call reached the upstream %d times", n)
	}

	// Merged and signed by CI's reconcile run: the call runs exactly once.
	l.gh.Merge(1, l.merge(branch))
	if out := l.ciReconcile(); !strings.Contains(out, "holds/refund-4711/"+newID+".hcl: signed hold") {
		t.Fatalf("reconcile:\n%s", out)
	}
	if text, isErr := l.call("send_email", args); isErr {
		t.Fatalf("approved call: %s", text)
	}
	text, isErr = l.call("send_email", args)
	l.expect("used up", text, isErr, "needs approval")
	if n := len(l.calls("send_email")); n != 1 {
		t.Fatalf("send_email reached the upstream %d times, want 1", n)
	}
	l.waitComment(1, "planlock ran the approved call of hold `"+newID+"` once: audit record #")
	if labels := l.gh.Labels(1); len(labels) != 1 || labels[0] != gitapprove.LabelHold {
		t.Errorf("labels: %q", labels)
	}
}
