package ledger

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/planlock/planlock/internal/atomicfile"
)

// Every file-system operation a guarantee of the ledger depends on goes
// through the helpers here, which make it durable, file and directory: a
// created, renamed, linked or removed name is followed by an fsync of its
// directory, and a new directory by an fsync of its parent (in the POSIX
// model only that makes a name survive a power loss). They also tell the
// tracer (tests: the crash-state explorer, crashstate_test.go) each
// operation once it succeeded, so that the states a power loss could leave
// can be rebuilt from the trace.

// opKind is what an fsOp did.
type opKind uint8

const (
	opMkdir    opKind = iota + 1 // path: a new directory
	opCreate                     // path: a new, empty file
	opWrite                      // path: data at off
	opTruncate                   // path: cut (or grown) to off
	opSync                       // path: fsync or fdatasync of the file
	opRename                     // path renamed to path2 (replacing it)
	opLink                       // path linked as path2
	opRemove                     // path unlinked
	opSyncDir                    // path: fsync of the directory
	opMark                       // not a file operation: a test's event (note)
)

// fsOp is one traced operation.
type fsOp struct {
	kind  opKind
	path  string
	path2 string
	off   int64
	data  []byte
	note  string
}

// tracer receives the traced operations (nil: none). It is called on the
// goroutine that made the operation, right after it returned, except for a
// sync, which is traced as it starts: a write traced after it may have
// missed it, and the trace must not claim that the sync covered it.
type tracer func(fsOp)

func (t tracer) emit(o fsOp) {
	if t != nil {
		t(o)
	}
}

// wrote traces a write of data at off; the caller made it.
func (t tracer) wrote(path string, off int64, data []byte) {
	if t != nil {
		t(fsOp{kind: opWrite, path: path, off: off, data: append([]byte(nil), data...)})
	}
}

func (t tracer) truncated(path string, size int64) {
	t.emit(fsOp{kind: opTruncate, path: path, off: size})
}

// syncing traces a sync of path about to start.
func (t tracer) syncing(path string) { t.emit(fsOp{kind: opSync, path: path}) }

// syncDir makes dir's entries durable.
func (t tracer) syncDir(dir string) error {
	t.emit(fsOp{kind: opSyncDir, path: dir})
	return syncDir(dir)
}

// mkdirAll creates dir and its missing parents (perm 0700), each one
// durable: its parent is synced after it was made.
func (t tracer) mkdirAll(dir string) error {
	return atomicfile.MkdirAllFunc(dir, 0o700, func(made string) error {
		t.emit(fsOp{kind: opMkdir, path: made})
		parent := filepath.Dir(made)
		if err := t.syncDir(parent); err != nil {
			return fmt.Errorf("sync %s: %w", parent, err)
		}
		return nil
	})
}

// create opens path through openState with flags that include O_CREATE
// and traces the file's creation, or its cut under O_TRUNC. The caller
// syncs its directory (or renames it, then syncs).
func (t tracer) create(what, path string, flags int) (*os.File, error) {
	_, statErr := os.Lstat(path)
	f, err := openState(what, path, flags)
	if err != nil {
		return nil, err
	}
	switch {
	case errors.Is(statErr, fs.ErrNotExist):
		t.emit(fsOp{kind: opCreate, path: path})
	case flags&os.O_TRUNC != 0:
		t.truncated(path, 0)
	}
	return f, nil
}

func (t tracer) rename(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return err
	}
	t.emit(fsOp{kind: opRename, path: from, path2: to})
	return nil
}

func (t tracer) link(from, to string) error {
	if err := os.Link(from, to); err != nil {
		return err
	}
	t.emit(fsOp{kind: opLink, path: from, path2: to})
	return nil
}

// remove unlinks path; a missing one is not an error (nothing to trace).
func (t tracer) remove(path string) error {
	err := os.Remove(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	t.emit(fsOp{kind: opRemove, path: path})
	return nil
}
