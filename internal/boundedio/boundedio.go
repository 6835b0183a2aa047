// Package boundedio reads files and streams with a size limit, so that a
// huge or endless input (/dev/zero, a growing file) ends with a one-line
// error instead of exhausting memory.
package boundedio

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// Limits of the files planlock reads whole. Each is far above what a real
// file of its kind needs.
const (
	MaxPlanBytes   = 4 << 20  // a plan (HCL)
	MaxBundleBytes = 4 << 20  // a sigstore bundle (a few kilobytes in practice)
	MaxHoldBytes   = 64 << 20 // a hold request: quotes a call's arguments (up to --max-message-bytes, 16 MiB by default)
	MaxToolsBytes  = 64 << 20 // a tools/list result (plan validate --tools)
	MaxKeyBytes    = 1 << 20  // a PEM key
	MaxConfigBytes = 1 << 20  // a configuration file planlock writes and compares (the GitHub workflow)
	MaxEventBytes  = 64 << 20 // a GitHub Actions event payload (GitHub caps them at 25 MB)
	MaxLineBytes   = 64 << 20 // one audit log record: the call's arguments and a little more
)

// ErrTooLarge is what a *TooLargeError is.
var ErrTooLarge = errors.New("input too large")

// TooLargeError says which input passed which limit.
type TooLargeError struct {
	Name  string // the file, or what was read
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than %d bytes", e.Name, e.Limit)
}

func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// ReadFile reads the file at path whole, refusing one larger than max bytes.
// A regular file's size is checked before anything is read; any other file
// (a device, a pipe, a file still growing) is read through a limit of max+1
// bytes, so at most that much is ever held.
func ReadFile(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > max {
		return nil, &TooLargeError{Name: path, Limit: max}
	}
	// A read error is an *fs.PathError: it names the file already.
	return ReadAll(f, path, max)
}

// ReadAll reads r to its end, refusing more than max bytes; name says what
// r is in the error.
func ReadAll(r io.Reader, name string, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, &TooLargeError{Name: name, Limit: max}
	}
	return b, nil
}

// LineLimit passes r through, failing the read that finds a line (bytes
// between newlines) longer than max bytes: a reader of lines then never
// gathers more than max bytes of one.
func LineLimit(r io.Reader, name string, max int64) io.Reader {
	return &lineLimit{r: r, name: name, max: max, line: 1}
}

type lineLimit struct {
	r    io.Reader
	name string
	max  int64
	cur  int64 // bytes of the current line so far
	line int
}

func (l *lineLimit) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	for i, c := range p[:n] {
		if c == '\n' {
			l.cur, l.line = 0, l.line+1
			continue
		}
		if l.cur++; l.cur > l.max {
			// Hand on what came before the long line's excess, then fail.
			return i, &LineTooLongError{Name: l.name, Line: l.line, Limit: l.max}
		}
	}
	return n, err
}

// LineTooLongError says which line of which input passed the limit.
type LineTooLongError struct {
	Name  string
	Line  int
	Limit int64
}

func (e *LineTooLongError) Error() string {
	return fmt.Sprintf("%s: line %d is longer than %d bytes", e.Name, e.Line, e.Limit)
}

func (e *LineTooLongError) Is(target error) bool { return target == ErrTooLarge }
