package approvals

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/planlock/planlock/gitapprove"
	"github.com/planlock/planlock/internal/atomicfile"
	"github.com/planlock/planlock/sign"
)

// LocalPR is what a hold approved in the state directory (no Git) records
// as its pull request URL.
const LocalPR = "local"

// Local is the PRBackend of a proxy without a Git remote: a hold's request file
// is written to <state>/approvals/<id>.hcl, and `planlock holds approve`
// signs exactly those bytes as a hold approval, next to it as
// <id>.hcl.sigstore.json, or `planlock holds reject` writes <id>.rejected.
// The proxy verifies the approval with the operator's trust policy exactly
// as one from CI (kind hold, path holds/<plan>/<id>.hcl), so a file written
// into the state directory by anyone else approves nothing.
type Local struct {
	// StateDir is the proxy's state directory.
	StateDir string
}

// LocalDir is the directory of local hold requests and approvals.
func LocalDir(stateDir string) string { return filepath.Join(stateDir, "approvals") }

// LocalRequestPath is the hold request file the proxy wrote for hold id.
func LocalRequestPath(stateDir, id string) string {
	return filepath.Join(LocalDir(stateDir), id+".hcl")
}

// LocalRejectionPath is the file that marks hold id rejected.
func LocalRejectionPath(stateDir, id string) string {
	return filepath.Join(LocalDir(stateDir), id+".rejected")
}

// Open writes the hold request file; the pin change, which needs the plans
// repository, is not made: the approval covers the one held call.
func (l *Local) Open(_ context.Context, hold *gitapprove.HoldRequest, _ *gitapprove.PinChange) (gitapprove.HoldPR, error) {
	data, err := gitapprove.WriteHold(hold)
	if err != nil {
		return gitapprove.HoldPR{}, err
	}
	path := LocalRequestPath(l.StateDir, hold.ID)
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return gitapprove.HoldPR{Path: path, Next: LocalPR}, nil
	}
	if err := WriteFileAtomic(path, data); err != nil {
		return gitapprove.HoldPR{}, fmt.Errorf("write the hold request: %w", err)
	}
	return gitapprove.HoldPR{Path: path, Next: LocalPR}, nil
}

// Status reads the hold's outcome from the state directory. The caller
// verifies the bundle over File and that File binds to the call.
func (l *Local) Status(_ context.Context, hold *gitapprove.HoldRequest, _ int) (gitapprove.HoldStatus, error) {
	if _, err := os.Stat(LocalRejectionPath(l.StateDir, hold.ID)); err == nil {
		return gitapprove.HoldStatus{State: gitapprove.HoldRejected}, nil
	}
	path := LocalRequestPath(l.StateDir, hold.ID)
	bundle, err := os.ReadFile(sign.BundlePath(path))
	if errors.Is(err, fs.ErrNotExist) {
		return gitapprove.HoldStatus{State: gitapprove.HoldPending}, nil
	}
	if err != nil {
		return gitapprove.HoldStatus{}, err
	}
	file, err := os.ReadFile(path)
	if err != nil {
		return gitapprove.HoldStatus{}, err
	}
	return gitapprove.HoldStatus{State: gitapprove.HoldMerged, File: file, Bundle: bundle}, nil
}

// WriteFileAtomic writes data to path (0600, its directory made 0700)
// through a temporary file and a rename, so a reader sees the old file or
// the whole new one; the file and any new directory are durable on return.
func WriteFileAtomic(path string, data []byte) error {
	if err := atomicfile.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(path, data, 0o600)
}
