package planload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/oneline"
)

// Reloader watches the plan file and its bundle and loads the plan again
// when either changes. A new plan that verifies, is not expired, is accepted
// by Accept and is not a downgrade is handed to Swap; anything else leaves
// the running plan in place and logs one line saying why.
type Reloader struct {
	Source Source
	// State applies the no-downgrade rule (see Admit).
	State Admitter
	// Interval between two looks at the files; zero means one second. A
	// change is acted on once the files look the same on two looks in a
	// row, so that a plan and its bundle replaced one after the other are
	// verified together.
	Interval time.Duration
	// Now is the clock for expiry; nil means time.Now.
	Now func() time.Time
	// Accept may refuse a verified plan the running proxy cannot take (for
	// example one naming another upstream); nil accepts all.
	Accept func(*hclplan.Plan) error
	// Swap installs the new plan; an error keeps the old one.
	Swap func(*Loaded) error
	// Log receives one line per event; nil discards.
	Log func(string)

	beforeRead func() // tests: a write between the stable look and the read
}

// fileState is what a look at one file sees. The content hash is what
// decides; size, modification time and inode make most looks cheap.
type fileState struct {
	exists bool
	size   int64
	mtime  int64 // UnixNano: comparable with ==
	inode  uint64
	sum    [sha256.Size]byte
}

// filesState is a look at the plan file and its bundle.
type filesState struct{ plan, bundle fileState }

// rehashEvery bounds how many looks may trust the metadata alone: a file
// rewritten within the file system's timestamp resolution at the same size
// is still seen after this many looks.
const rehashEvery = 10

// look stats path and hashes it when the metadata changed or rehash is set.
func look(path string, prev fileState, rehash bool) fileState {
	fi, err := os.Stat(path)
	if err != nil {
		// Missing or unreadable: a state of its own, so that the file
		// coming back is a change.
		return fileState{}
	}
	st := fileState{exists: true, size: fi.Size(), mtime: fi.ModTime().UnixNano(), inode: inodeOf(fi)}
	if !rehash && prev.exists && st.size == prev.size && st.mtime == prev.mtime && st.inode == prev.inode {
		st.sum = prev.sum
		return st
	}
	f, err := os.Open(path)
	if err != nil {
		return fileState{}
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, 64<<20)); err != nil {
		return fileState{}
	}
	copy(st.sum[:], h.Sum(nil))
	return st
}

func (r *Reloader) look(prev filesState, rehash bool) filesState {
	return filesState{plan: look(r.Source.File, prev.plan, rehash), bundle: look(r.Source.BundleFile(), prev.bundle, rehash)}
}

func (r *Reloader) log(s string) {
	if r.Log != nil {
		r.Log(s)
	}
}

// Run watches until ctx ends. current is the plan being served; the files
// are compared with what it was loaded from, so a change made while the
// proxy was starting is not missed.
func (r *Reloader) Run(ctx context.Context, current *Loaded) {
	interval := r.Interval
	if interval <= 0 {
		interval = time.Second
	}
	applied := r.look(filesState{}, true)
	if applied.plan.sum != digestSum(current.Plan.Digest) {
		applied.plan.exists = false // differs from what is served: act on the next stable look
	}
	prev := applied
	t := time.NewTicker(interval)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cur := r.look(prev, n%rehashEvery == 0)
		if cur == prev && cur != applied {
			if l, settled := r.reload(ctx, current, cur); settled {
				applied = cur
				if l != nil {
					current = l
				}
			}
		}
		prev = cur
	}
}

// reload loads the plan again from the files seen stable as seen; it returns
// the new plan when it is served. settled is false when the files changed
// between that look and the read: what was read may be a write in progress,
// so it is neither acted on nor reported, and the next stable look decides.
func (r *Reloader) reload(ctx context.Context, current *Loaded, seen filesState) (_ *Loaded, settled bool) {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	keep := func(why error) (*Loaded, bool) {
		r.log(fmt.Sprintf("planlock: %s changed on disk but was NOT loaded; still serving %s: %s",
			r.Source.File, current.short(), oneline.Of(why.Error(), 0)))
		return nil, true
	}
	if r.beforeRead != nil {
		r.beforeRead()
	}
	l, err := r.Source.Read(ctx, now())
	if r.look(seen, true) != seen || (err == nil && digestSum(l.Plan.Digest) != seen.plan.sum) {
		return nil, false
	}
	if err != nil {
		return keep(err)
	}
	if l.Plan.Digest == current.Plan.Digest {
		return nil, true // same bytes (touched, or re-signed): nothing to change
	}
	if r.Source.Policy == nil {
		r.log(InsecureWarning(r.Source.File))
	}
	// Signing times have a resolution of one second, and the ledger takes
	// an equal time for a restart of the same plan. Replacing the plan being
	// served needs a strictly newer one from the same signed path and
	// trust policy, whatever its plan label.
	if a, c := l.Approval, current.Approval; a != nil && c != nil &&
		l.Identity() == current.Identity() && !a.SignedAt.After(c.SignedAt) {
		return keep(fmt.Errorf("plan %q signed at %s is not newer than the plan being served (signed at %s); refusing to replace it",
			l.Plan.Name, a.SignedAt.UTC().Format(time.RFC3339), c.SignedAt.UTC().Format(time.RFC3339)))
	}
	if r.Accept != nil {
		if err := r.Accept(l.Plan); err != nil {
			return keep(err)
		}
	}
	if err := Admit(ctx, r.State, l); err != nil {
		return keep(err)
	}
	if r.Swap == nil {
		return keep(errors.New("the proxy cannot swap plans"))
	}
	if err := r.Swap(l); err != nil {
		return keep(err)
	}
	r.log(fmt.Sprintf("planlock: reloaded %s: now serving %s; it replaces %s, whose counts do not carry over", r.Source.File, l.Describe(), current.short()))
	return l, true
}

// digestSum is the hash in a "sha256:<hex>" digest (zero when malformed).
func digestSum(d string) [sha256.Size]byte {
	var s [sha256.Size]byte
	b, err := hex.DecodeString(strings.TrimPrefix(d, "sha256:"))
	if err == nil && len(b) == sha256.Size {
		copy(s[:], b)
	}
	return s
}
