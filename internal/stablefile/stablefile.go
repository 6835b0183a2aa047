// Package stablefile reads a file planlock reloads while it runs (a token
// file, a claim-to-plans mapping) so that a write in progress is never
// acted on: new content is given out only once it was read whole twice in
// a row, on two looks, with the same bytes, size, modification time and
// inode. A file rewritten in place is read half-written at some look; that
// half never reaches the caller unless it stays as it is until the next
// look. Writers should still write a new file and rename it over the old
// one, which no reader can see half done.
package stablefile

import (
	"bytes"
	"os"

	"github.com/planlock/planlock/internal/boundedio"
)

// File is one watched file. It is not safe for concurrent use.
type File struct {
	path string
	max  int64
	prev *look // what the previous look read, nil when it was unstable
}

type look struct {
	fi os.FileInfo
	b  []byte
}

// New watches path, whose content may be at most max bytes.
func New(path string, max int64) *File { return &File{path: path, max: max} }

// Path is the watched file.
func (f *File) Path() string { return f.path }

// Look reads the file. ok is true when the content returned is stable: the
// previous Look read exactly these bytes from the same, unchanged file. On
// the first sight of new content, and while the file changes under a read,
// ok is false (look again later). A read error is returned as is.
func (f *File) Look() (content []byte, ok bool, err error) {
	cur, err := read(f.path, f.max)
	if err != nil {
		f.prev = nil
		return nil, false, err
	}
	prev := f.prev
	f.prev = cur
	if cur == nil || prev == nil {
		return nil, false, nil
	}
	return cur.b, sameFile(prev.fi, cur.fi) && bytes.Equal(prev.b, cur.b), nil
}

// read reads path whole; nil (no error) when it changed during the read.
func read(path string, max int64) (*look, error) {
	before, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	b, err := boundedio.ReadFile(path, max)
	if err != nil {
		return nil, err
	}
	after, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !sameFile(before, after) || int64(len(b)) != after.Size() {
		return nil, nil
	}
	return &look{fi: after, b: b}, nil
}

func sameFile(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime()) && a.Mode() == b.Mode()
}
