package gitapprove

import (
	"testing"
	"time"

	"github.com/planlock/planlock/internal/testkit/githubtest"
)

// A status is kept StatusCache long per hold: repeated calls inside it cost
// no request; after it GitHub is asked again.
func TestHoldStatusCache(t *testing.T) {
	f := newFixture(t, "main", nil)
	gh := githubtest.New(t, "acme", "plans", "tok")
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	holds := &Holds{Repo: openRepo(t, f.work), Forge: fakeClient(gh), Base: "main", StatusCache: 15 * time.Second, Now: func() time.Time { return now }}
	hold := sampleHold()
	if _, err := holds.Open(ctx(t), hold, nil); err != nil {
		t.Fatal(err)
	}
	asked := func() int {
		n := 0
		for _, r := range gh.Requests() {
			if r == "GET /repos/acme/plans/pulls/1" {
				n++
			}
		}
		return n
	}
	for _, step := range []struct {
		name    string
		advance time.Duration
		merge   bool
		state   HoldState
		asked   int
	}{
		{"first look", 0, false, HoldPending, 1},
		{"within the period: cached", 10 * time.Second, false, HoldPending, 1},
		{"period over: asked again", 6 * time.Second, false, HoldPending, 2},
		{"closed meanwhile, still cached", 1 * time.Second, true, HoldPending, 2},
		{"period over: the final answer", 15 * time.Second, false, HoldRejected, 3},
		{"the final answer is cached too", 0, false, HoldRejected, 3},
	} {
		now = now.Add(step.advance)
		if step.merge {
			gh.ClosePull(1)
		}
		st, err := holds.Status(ctx(t), hold, 1)
		if err != nil || st.State != step.state || asked() != step.asked {
			t.Fatalf("%s: %s, %v, asked %d times; want %s, asked %d", step.name, st.State, err, asked(), step.state, step.asked)
		}
	}
}
