package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// Snapshot is a read-only view of a state directory, read from its journal
// without taking the lock, so it works while a proxy runs.
type Snapshot struct {
	st        *state
	now       time.Time
	auditPath string
	// Records is the number of complete records read.
	Records int
	// TornTail is true when the journal ended in a partial line (a write in
	// progress, or a crash not yet repaired by Open); it was ignored.
	TornTail bool
}

// Inspect reads the state of a state directory (Options.Dir, AuditPath as for
// Open; AuditPath defaults to the journal the directory is bound to). It
// never writes.
func Inspect(ctx context.Context, o Options) (*Snapshot, error) {
	dir, audit, err := resolvePaths(o)
	if err != nil {
		return nil, err
	}
	if o.AuditPath == "" {
		b, ok, err := readBinding(dir)
		if err != nil {
			return nil, err
		}
		if ok {
			audit = b.Audit
		}
	}
	// A rotation that renames the journal while it is read here can make
	// the anchor, the checkpoint and the file disagree for a moment: read
	// again when the journal's name now stands for another file.
	for try := 0; ; try++ {
		s, opened, err := inspect(ctx, o, dir, audit)
		if err == nil || try == 4 {
			return s, err
		}
		if errors.Is(err, errEarlierSegment) || errors.Is(err, ErrUnsafe) {
			// The anchor read first is older than the file, or the file
			// was renamed while it was opened: read both again (a state
			// file that is really unsafe stays so, and is reported).
			continue
		}
		if opened == nil {
			return s, err
		}
		if fi, serr := os.Stat(audit); serr != nil || os.SameFile(fi, opened) {
			return s, err
		}
	}
}

// inspect is one read of Inspect; it also returns the journal file's
// identity (nil when it was not opened).
func inspect(ctx context.Context, o Options, dir, audit string) (*Snapshot, os.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	// The anchor first: the journal read after it is never shorter, even
	// while a proxy writes both.
	ah, _, anchored, err := readAnchor(dir)
	if err != nil {
		return nil, nil, err
	}
	f, err := openState("audit log", audit, os.O_RDONLY)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("no state in %s: audit log %s does not exist", dir, audit)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("open audit log: %w", err)
	}
	defer f.Close()
	opened, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("audit log: %w", err)
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	at := ^uint64(0)
	if anchored {
		at = ah.Seq
	}
	rp, err := replayFile(dir, audit, f, at, nil) // reads only: no MAC checked
	s := &Snapshot{st: rp.st, now: now().UTC(), auditPath: audit}
	var ve *VerifyError
	switch {
	case errors.As(err, &ve) && ve.Torn:
		s.TornTail = true
	case errors.Is(err, ErrCheckpoint), errors.Is(err, ErrUnsafe):
		return nil, opened, err
	case err != nil:
		return nil, opened, fmt.Errorf("%s: %w", audit, err)
	}
	if anchored {
		if err := rp.checkAnchor(f, ah); err != nil {
			return nil, opened, fmt.Errorf("%s: %w", audit, err)
		}
	}
	res := rp.res
	s.Records = res.Records
	return s, opened, nil
}

// AuditPath is the journal the snapshot was read from.
func (s *Snapshot) AuditPath() string { return s.auditPath }

// ListHolds returns all holds in creation order.
func (s *Snapshot) ListHolds() []Hold { return s.st.listHolds(s.now) }

// GetHold returns a hold by id.
func (s *Snapshot) GetHold(id string) (Hold, bool) {
	h := s.st.holds[id]
	if h == nil {
		return Hold{}, false
	}
	return view(h, s.now), true
}

// Progress returns the plan's order state and counts.
func (s *Snapshot) Progress(planDigest string) Progress { return s.st.progress(planDigest) }

// Newest returns the newest signing time loaded for a plan name.
func (s *Snapshot) Newest(planName string) (time.Time, bool) {
	t, ok := s.st.newest[planName]
	return t, ok
}

// Mark returns the no-downgrade mark that binds a load (see PlanLoad).
func (s *Snapshot) Mark(p PlanLoad) (time.Time, bool) { return s.st.mark(p) }

// SignedPaths are the repository paths the state holds a no-downgrade mark
// for, under any trust policy, sorted.
func (s *Snapshot) SignedPaths() []string { return s.st.signedPaths() }

// HasMarks reports whether the state holds any no-downgrade mark (a
// verified plan was loaded).
func (s *Snapshot) HasMarks() bool { return len(s.st.newest) > 0 }
