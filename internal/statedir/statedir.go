// Package statedir places a plan's state directory under a state root by
// what was signed: the signed repository path and the trust policy
// (planload.Identity), never the plan's label, which the plan file
// chooses. A state root laid out by label (<root>/<plan label>, planlock
// before identities) is migrated once per identity, by rename, with its
// counts, holds and no-downgrade marks, and the marks of the same signed
// path found in any other directory of that layout are carried over.
package statedir

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/proxy/planload"
)

// IdentityName is the file in a state directory naming the identity it
// is kept for.
const IdentityName = "identity.json"

// identityFile is IdentityName's content.
type identityFile struct {
	Trust string `json:"trust,omitempty"` // "" for an unverified plan
	Path  string `json:"path"`
	// Carry are no-downgrade marks found in directories of the earlier
	// layout, to be recorded in the journal (see Dir.Carry); they only
	// ever refuse more.
	Carry []carried `json:"carry,omitempty"`
}

type carried struct {
	From     string    `json:"from"`
	Name     string    `json:"name"`
	SignedAt time.Time `json:"signed_at"`
}

func (f identityFile) identity() planload.Identity {
	return planload.Identity{Trust: f.Trust, Path: f.Path}
}

// Name is the directory name of an identity's state under a root: the
// signed path's file name (readable; letters, digits, . _ - only) and 16
// hex digits of the sha256 of the trust policy and the path.
func Name(id planload.Identity) string {
	sum := sha256.Sum256([]byte("planlock state\x00" + id.Trust + "\x00" + id.Path))
	base := filepath.Base(filepath.FromSlash(id.Path))
	var b strings.Builder
	for _, r := range base {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := strings.TrimLeft(b.String(), ".")
	if len(s) > 48 {
		s = s[:48]
	}
	if s == "" {
		s = "plan"
	}
	return s + "-" + hex.EncodeToString(sum[:8])
}

// Options say which state directory to prepare.
type Options struct {
	Root string
	ID   planload.Identity
	// Label is the plan's label: where the earlier layout kept this
	// plan's state (<Root>/<Label>); only read to find that directory.
	Label string
	// Log gets the one-line notice of a migration; nil discards.
	Log func(string)
}

// Dir is a prepared state directory.
type Dir struct {
	Path  string
	id    planload.Identity
	carry []carried
}

// Prepare returns the state directory of o.ID under o.Root, creating it
// when there is none: by moving the directory the earlier layout kept for
// o.Label when that directory holds this identity's state (or no signed
// state at all), else as a new directory; in both cases every mark of the
// same signed path in another directory of the earlier layout is carried
// over (Dir.Carry records them). An interrupted migration is finished.
func Prepare(ctx context.Context, o Options) (*Dir, error) {
	if o.ID.Path == "" {
		return nil, errors.New("state directory: the plan has no identity")
	}
	if err := os.MkdirAll(o.Root, 0o700); err != nil {
		return nil, fmt.Errorf("create the state root: %w", err)
	}
	path := filepath.Join(o.Root, Name(o.ID))
	if d, ok, err := existing(path, o.ID); ok || err != nil {
		return d, err
	}
	unlock, err := lockRoot(o.Root)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if d, ok, err := existing(path, o.ID); ok || err != nil {
		return d, err // made meanwhile by another process
	}
	legacy, err := scan(ctx, o.Root)
	if err != nil {
		return nil, err
	}
	var from *legacyDir
	for _, l := range legacy {
		if l.idf != nil && l.idf.identity() == o.ID {
			from = l // an interrupted migration to this identity
			break
		}
	}
	if from == nil {
		for _, l := range legacy {
			if l.err != nil && filepath.Base(l.path) == o.Label {
				// It may hold this plan's counts: fail closed.
				return nil, fmt.Errorf("%s, the state directory planlock kept for plan label %q before, cannot be read (%v); fix it (planlock audit verify) or move it out of %s", l.path, o.Label, l.err, o.Root)
			}
		}
		from = pick(legacy, o.ID, o.Label)
	}
	idf := identityFile{Trust: o.ID.Trust, Path: o.ID.Path}
	if o.ID.Signed() {
		idf.Carry = carryFrom(legacy, from, o.ID)
	}
	if from != nil {
		if from.idf != nil && len(from.idf.Carry) > 0 {
			idf.Carry = mergeCarry(from.idf.Carry, idf.Carry)
		}
		if err := writeIdentity(from.path, idf); err != nil {
			return nil, err
		}
		if err := ledger.MoveDir(ctx, from.path, path); err != nil {
			return nil, fmt.Errorf("move state directory %s to %s: %w", from.path, path, err)
		}
		if o.Log != nil {
			o.Log(fmt.Sprintf("planlock: state directory %s moved to %s: state is now kept per signed path and trust policy, not per plan label (a one-time migration)", from.path, path))
		}
		return &Dir{Path: path, id: o.ID, carry: idf.Carry}, nil
	}
	if err := create(o.Root, path, idf); err != nil {
		return nil, err
	}
	if len(idf.Carry) > 0 && o.Log != nil {
		o.Log(fmt.Sprintf("planlock: new state directory %s carries the no-downgrade mark of %s from %s (a one-time migration from state kept per plan label)", path, o.ID.Path, idf.Carry[0].From))
	}
	return &Dir{Path: path, id: o.ID, carry: idf.Carry}, nil
}

// existing reads the identity of an existing directory at path.
func existing(path string, id planload.Identity) (*Dir, bool, error) {
	idf, err := readIdentity(path)
	if errors.Is(err, os.ErrNotExist) {
		if _, serr := os.Lstat(path); errors.Is(serr, os.ErrNotExist) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("state directory %s has no %s: it was not made by this planlock; move it away", path, IdentityName)
	}
	if err != nil {
		return nil, false, err
	}
	if idf.identity() != id {
		return nil, false, fmt.Errorf("state directory %s is kept for %s, not for %s", path, idf.identity(), id)
	}
	return &Dir{Path: path, id: id, carry: idf.Carry}, true, nil
}

// Carry records in the opened state the marks a migration carried over,
// then forgets them: a crash in between records them again, which changes
// nothing (a mark only rises).
func (d *Dir) Carry(ctx context.Context, a planload.Admitter) error {
	if len(d.carry) == 0 {
		return nil
	}
	for _, c := range d.carry {
		err := a.LoadPlan(ctx, ledger.PlanLoad{Name: c.Name, SignedAt: c.SignedAt, Path: d.id.Path, Trust: d.id.Trust,
			Note: "no-downgrade mark carried over from " + c.From + " (state kept per plan label before)"})
		if err != nil && !errors.Is(err, ledger.ErrDowngrade) {
			return fmt.Errorf("carry the no-downgrade mark of %s: %w", c.From, err)
		}
	}
	if err := writeIdentity(d.Path, identityFile{Trust: d.id.Trust, Path: d.id.Path}); err != nil {
		return err
	}
	d.carry = nil
	return nil
}

// legacyDir is a directory under the root not named for its identity: the
// earlier layout's (idf nil), or one an interrupted migration named.
type legacyDir struct {
	path    string
	idf     *identityFile
	journal bool
	snap    *ledger.Snapshot // nil without a journal
	err     error            // why the journal cannot be read
}

// fits reports whether the earlier layout's directory may become id's:
// it holds no mark of another signed path, and for an unverified plan no
// mark at all.
func (l *legacyDir) fits(id planload.Identity) bool {
	if l.snap == nil {
		return true
	}
	paths := l.snap.SignedPaths()
	if !id.Signed() {
		return len(paths) == 0 && !l.snap.HasMarks()
	}
	for _, p := range paths {
		if p != id.Path {
			return false
		}
	}
	return true
}

// pick chooses the directory of the earlier layout that becomes id's:
// among those that fit, the one holding the newest mark of id's signed
// path (its counts are the newest plan's; an older plan's counts do not
// matter, since the mark refuses it), else the one named by the label.
func pick(legacy []*legacyDir, id planload.Identity, label string) *legacyDir {
	var from *legacyDir
	var best time.Time
	for _, l := range legacy {
		if l.idf != nil || l.snap == nil || !id.Signed() || !l.fits(id) {
			continue
		}
		if t, ok := l.snap.Mark(ledger.PlanLoad{Path: id.Path, Trust: id.Trust}); ok && (from == nil || t.After(best)) {
			from, best = l, t
		}
	}
	if from != nil {
		return from
	}
	for _, l := range legacy {
		if l.idf == nil && l.err == nil && filepath.Base(l.path) == label && l.fits(id) {
			return l
		}
	}
	return nil
}

// scan lists the directories under root that are not named for their
// identity, reading the state of those with a journal.
func scan(ctx context.Context, root string) ([]*legacyDir, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("read the state root: %w", err)
	}
	var out []*legacyDir
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") || e.Name() == "repo" {
			continue
		}
		p := filepath.Join(root, e.Name())
		l := &legacyDir{path: p}
		idf, err := readIdentity(p)
		switch {
		case err == nil:
			if Name(idf.identity()) == e.Name() {
				continue // migrated or new: not earlier layout
			}
			l.idf = &idf
		case !errors.Is(err, os.ErrNotExist):
			continue // not ours to read
		}
		if _, err := os.Stat(filepath.Join(p, "audit.jsonl")); err == nil {
			l.journal = true
		} else if _, err := os.Stat(filepath.Join(p, "ledger.json")); err == nil {
			l.journal = true // bound to a journal elsewhere
		}
		if l.journal {
			snap, err := ledger.Inspect(ctx, ledger.Options{Dir: p})
			if err != nil && l.idf == nil {
				l.err = err // unreadable: neither moved nor trusted for marks
			}
			// An interrupted move cannot be read: its binding names the
			// target already.
			l.snap = snap
		}
		out = append(out, l)
	}
	return out, nil
}

// carryFrom collects the newest mark binding id in the directories other
// than from.
func carryFrom(legacy []*legacyDir, from *legacyDir, id planload.Identity) []carried {
	var best *carried
	for _, l := range legacy {
		if l == from || l.snap == nil {
			continue
		}
		t, ok := l.snap.Mark(ledger.PlanLoad{Path: id.Path, Trust: id.Trust})
		if ok && (best == nil || t.After(best.SignedAt)) {
			best = &carried{From: l.path, Name: filepath.Base(l.path), SignedAt: t}
		}
	}
	if best == nil {
		return nil
	}
	return []carried{*best}
}

func mergeCarry(a, b []carried) []carried { return append(append([]carried(nil), a...), b...) }

func readIdentity(dir string) (identityFile, error) {
	var idf identityFile
	f, err := os.Open(filepath.Join(dir, IdentityName))
	if err != nil {
		return idf, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return idf, fmt.Errorf("read %s: %w", filepath.Join(dir, IdentityName), err)
	}
	if err := json.Unmarshal(data, &idf); err != nil || idf.Path == "" {
		return idf, fmt.Errorf("%s is not valid: it names the signed path and trust policy the state directory is kept for", filepath.Join(dir, IdentityName))
	}
	return idf, nil
}

// writeIdentity replaces dir's identity file: written whole, synced,
// renamed over the old one, the directory synced.
func writeIdentity(dir string, idf identityFile) error {
	data, _ := json.MarshalIndent(idf, "", "  ")
	tmp := filepath.Join(dir, IdentityName+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", IdentityName, err)
	}
	_, werr := f.Write(append(data, '\n'))
	if werr == nil {
		werr = f.Sync()
	}
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr == nil {
		werr = os.Rename(tmp, filepath.Join(dir, IdentityName))
	}
	if werr == nil {
		werr = syncDir(dir)
	}
	if werr != nil {
		return fmt.Errorf("write %s in %s: %w", IdentityName, dir, werr)
	}
	return nil
}

// create makes a new state directory at path, whole or not at all: a
// temporary directory with the identity file, renamed into place.
func create(root, path string, idf identityFile) error {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(root, ".new-"+hex.EncodeToString(rnd[:]))
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return fmt.Errorf("create state directory: %w", err)
	}
	if err := writeIdentity(tmp, idf); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("create state directory: %w", err)
	}
	if err := syncDir(root); err != nil {
		return fmt.Errorf("sync %s: %w", root, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
