package planload

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/sign"
)

// reloadRig runs a Reloader on a plan in a temporary directory, with a real
// ledger; what it swaps in and logs arrives on channels.
type reloadRig struct {
	t       *testing.T
	k       keys
	file    string
	swapped chan *Loaded
	logs    chan string
	ledger  *ledger.Ledger
}

func newReloadRig(t *testing.T, accept func(*hclplan.Plan) error) (*reloadRig, *Loaded) {
	dir := t.TempDir()
	r := &reloadRig{t: t, k: opensslKeys(t, dir, "release"), file: filepath.Join(dir, "refund.hcl"),
		swapped: make(chan *Loaded, 8), logs: make(chan string, 64)}
	r.write(planV1, t0)
	src := Source{File: r.file, Path: "plans/refund.hcl", Policy: r.k.policy}
	cur, err := src.Read(context.Background(), t0)
	if err != nil {
		t.Fatal(err)
	}
	l := openLedger(t, filepath.Join(dir, "state"))
	r.ledger = l
	if err := Admit(context.Background(), l, cur); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	rl := &Reloader{Source: src, State: l, Interval: 5 * time.Millisecond, Now: func() time.Time { return t0.Add(2 * time.Hour) },
		Accept: accept,
		Swap:   func(n *Loaded) error { r.swapped <- n; return nil },
		Log:    func(s string) { r.logs <- s }}
	go func() { defer close(done); rl.Run(ctx, cur) }()
	t.Cleanup(func() { cancel(); <-done })
	return r, cur
}

// write replaces the plan and then its bundle (signed at `at`), each
// atomically, as a deployment copying two files does.
func (r *reloadRig) write(plan string, at time.Time) {
	replace(r.t, r.file, []byte(plan))
	replace(r.t, sign.BundlePath(r.file), r.k.signBytes(r.t, []byte(plan), "plans/refund.hcl", at))
}

// wait is a bound on waiting for the watcher, not a timing assertion.
const wait = 30 * time.Second

func (r *reloadRig) nextLog() string {
	r.t.Helper()
	select {
	case s := <-r.logs:
		return s
	case <-time.After(wait):
		r.t.Fatal("no log line from the reloader")
	}
	return ""
}

// logUntil returns the first log line containing want. Lines before it may
// only be refusals: the plan and its bundle are replaced one after the
// other, and the watcher may see the new plan with the old bundle.
func (r *reloadRig) logUntil(want string) string {
	r.t.Helper()
	for {
		line := r.nextLog()
		if strings.Contains(line, want) {
			return line
		}
		if !strings.Contains(line, "changed on disk but was NOT loaded") {
			r.t.Fatalf("log %q while waiting for %q", line, want)
		}
	}
}

func (r *reloadRig) nextSwap() *Loaded {
	r.t.Helper()
	select {
	case l := <-r.swapped:
		return l
	case <-time.After(wait):
		r.t.Fatal("the reloader did not swap the plan")
	}
	return nil
}

func (r *reloadRig) noSwap() {
	r.t.Helper()
	select {
	case l := <-r.swapped:
		r.t.Fatalf("swapped in %s", l.Describe())
	default:
	}
}

func TestReloaderSwapsAVerifiedNewPlan(t *testing.T) {
	r, v1 := newReloadRig(t, nil)
	r.write(planV2, t0.Add(time.Hour))
	got := r.nextSwap()
	if got.Plan.Digest != "sha256:"+sign.Digest([]byte(planV2)) || len(got.Plan.Steps) != 2 {
		t.Fatalf("swapped in %s", got.Describe())
	}
	line := r.logUntil("reloaded")
	if !strings.HasPrefix(line, "planlock: reloaded "+r.file+": now serving "+got.Describe()+"; it replaces "+v1.short()+", whose counts do not carry over") {
		t.Fatalf("log: %q", line)
	}
}

func TestReloaderKeepsServingWhenTheNewPlanFails(t *testing.T) {
	var refuseUpstream atomic.Bool
	r, v1 := newReloadRig(t, func(p *hclplan.Plan) error {
		if refuseUpstream.Load() {
			return errors.New("plan names another upstream")
		}
		return nil
	})
	still := "changed on disk but was NOT loaded; still serving " + v1.short() + ": "
	cases := []struct {
		name   string
		change func()
		want   string
	}{
		{"plan edited, bundle not", func() { replace(t, r.file, []byte(strings.Replace(planV1, "max_calls = 1", "max_calls = 9", 1))) },
			"refused: plans/refund.hcl: digest mismatch"},
		{"bundle removed", func() {
			replace(t, r.file, []byte(planV1+"\n"))
			if err := os.Remove(sign.BundlePath(r.file)); err != nil {
				t.Fatal(err)
			}
		}, "refused: plans/refund.hcl: bundle missing"},
		{"signed by another key", func() {
			other := opensslKeys(t, t.TempDir(), "other")
			replace(t, r.file, []byte(planV2))
			replace(t, sign.BundlePath(r.file), other.signBytes(t, []byte(planV2), "plans/refund.hcl", t0.Add(time.Hour)))
		}, "key mismatch"},
		{"older than the plan served", func() { r.write(planV2, t0.Add(-time.Hour)) }, "is not newer than the plan being served"},
		{"signed in the same second as the plan served", func() { r.write(planV2, t0) }, `plan "refund" signed at 2026-11-01T10:00:00Z is not newer than the plan being served (signed at 2026-11-01T10:00:00Z); refusing to replace it`},
		{"expired", func() {
			r.write(strings.Replace(planV2, "goal  =", "expires = \"2026-11-01T11:00:00Z\"\n  goal  =", 1), t0.Add(time.Hour))
		}, "expired at 2026-11-01T11:00:00Z"},
		{"another plan label, older than the signed path's newest", func() {
			// A plan labelled "elsewhere" was run from the same signed path,
			// signed at t0+3h.
			if err := r.ledger.LoadPlan(context.Background(), ledger.PlanLoad{Name: "elsewhere", Digest: "sha256:00", SignedAt: t0.Add(3 * time.Hour),
				Path: "plans/refund.hcl", Trust: v1.Trust}); err != nil {
				t.Fatal(err)
			}
			r.write(strings.Replace(planV2, `plan "refund"`, `plan "renamed"`, 1), t0.Add(time.Hour))
		}, `plan "renamed" (signed path plans/refund.hcl) signed at 2026-11-01T11:00:00Z is older than a plan already loaded from the same path (signed at 2026-11-01T13:00:00Z); refusing a downgrade`},
		{"older than the plan served, under another label", func() {
			r.write(strings.Replace(planV2, `plan "refund"`, `plan "refund-old"`, 1), t0.Add(-time.Hour))
		}, `plan "refund-old" signed at 2026-11-01T09:00:00Z is not newer than the plan being served (signed at 2026-11-01T10:00:00Z); refusing to replace it`},
		{"refused by the proxy", func() { refuseUpstream.Store(true); r.write(planV2, t0.Add(time.Hour)) }, "plan names another upstream"},
	}
	for _, c := range cases {
		c.change()
		line := r.logUntil(c.want)
		if !strings.HasPrefix(line, "planlock: "+r.file+" "+still) || !strings.Contains(line, c.want) || strings.Contains(line, "\n") {
			t.Fatalf("%s: log %q, want one line %q ... %q", c.name, line, still, c.want)
		}
		r.noSwap()
	}
}

func TestReloaderWarnsOnEveryUnverifiedReload(t *testing.T) {
	file := filepath.Join(t.TempDir(), "refund.hcl")
	writeFile(t, file, []byte(planV1))
	src := Source{File: file}
	cur, err := src.Read(context.Background(), t0)
	if err != nil {
		t.Fatal(err)
	}
	logs := make(chan string, 16)
	swapped := make(chan *Loaded, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	rl := &Reloader{Source: src, Interval: 5 * time.Millisecond, Swap: func(l *Loaded) error { swapped <- l; return nil },
		Log: func(s string) { logs <- s }}
	go func() { defer close(done); rl.Run(ctx, cur) }()
	defer func() { cancel(); <-done }()
	replace(t, file, []byte(planV2)) // no bundle at all
	r := &reloadRig{t: t, logs: logs, swapped: swapped}
	if l := r.nextSwap(); l.Approval != nil || len(l.Plan.Steps) != 2 {
		t.Fatalf("swapped in %s", l.Describe())
	}
	if line := r.nextLog(); line != InsecureWarning(file) {
		t.Fatalf("first line %q, want the warning", line)
	}
	if line := r.nextLog(); !strings.Contains(line, "reloaded") || !strings.Contains(line, "NOT verified") {
		t.Fatalf("second line %q", line)
	}
}

func TestLookSeesContentChangesMetadataHides(t *testing.T) {
	file := filepath.Join(t.TempDir(), "refund.hcl")
	writeFile(t, file, []byte(planV1))
	first := look(file, fileState{}, true)
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	// Same size, same modification time, same inode, other bytes: what a
	// rewrite within the file system's timestamp resolution looks like.
	f, err := os.OpenFile(file, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("P"), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(file, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if cheap := look(file, first, false); cheap != first {
		t.Fatalf("a metadata-only look rehashed: %+v", cheap)
	}
	if full := look(file, first, true); full.sum == first.sum || !full.exists {
		t.Fatal("the periodic rehash did not see the new content")
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if gone := look(file, first, false); gone.exists {
		t.Fatal("a removed file still exists")
	}
}

// A write that lands between the look that found the files stable and the
// read is not acted on: without a signature a half-written plan can still
// parse, and only a plan seen stable may replace the running one.
func TestReloaderIgnoresAWriteDuringTheRead(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "refund.hcl")
	replace(t, file, []byte(planV1))
	src := Source{File: file}
	cur, err := src.Read(context.Background(), t0)
	if err != nil {
		t.Fatal(err)
	}
	// What a writer has written so far: valid on its own, wider than the
	// plan being written.
	partial := strings.Replace(planV2, "max_calls = 3", "max_calls = 300", 1)
	if partial == planV2 {
		t.Fatal("the partial plan is the plan")
	}
	var reads atomic.Int32
	type swap struct {
		l     *Loaded
		reads int32
	}
	swapped := make(chan swap, 8)
	rl := &Reloader{Source: src, State: openLedger(t, filepath.Join(dir, "state")), Interval: 5 * time.Millisecond,
		Swap: func(n *Loaded) error { swapped <- swap{n, reads.Load()}; return nil },
		Log:  func(string) {},
		beforeRead: func() {
			if reads.Add(1) == 1 {
				replace(t, file, []byte(partial))
			}
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); rl.Run(ctx, cur) }()
	t.Cleanup(func() { cancel(); <-done })
	replace(t, file, []byte(planV2))
	select {
	case s := <-swapped:
		// The partial plan is on disk now and stays: it is served, but
		// only from a read after a look that saw it stable.
		if s.l.Plan.Digest != "sha256:"+sign.Digest([]byte(partial)) {
			t.Fatalf("swapped in %s, want the plan on disk", s.l.Describe())
		}
		if s.reads < 2 {
			t.Fatalf("swapped in what the read of the first stable look found: a write in progress was acted on")
		}
	case <-time.After(wait):
		t.Fatal("the reloader did not swap the plan")
	}
}
