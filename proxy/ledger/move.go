package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// MoveDir renames state directory from to to, which must not exist, as one
// crash-safe step: with from's lock held (a directory in use is refused,
// ErrLocked), the binding is made to name the journal under its new path
// when the journal is in the directory (a journal elsewhere stays where
// it is), the checkpoint (a cache naming the old path) is removed, the
// directory is renamed and both parents are synced. A crash before the
// rename leaves from bound to a journal under to, which no proxy opens
// (ErrBinding): calling MoveDir again finishes the move. Counts, holds and
// marks move with the journal unchanged.
func MoveDir(ctx context.Context, from, to string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var err error
	if from, err = filepath.Abs(from); err != nil {
		return err
	}
	if to, err = filepath.Abs(to); err != nil {
		return err
	}
	if _, err := os.Lstat(to); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("move state directory %s to %s: the target exists", from, to)
	}
	fi, err := os.Lstat(from)
	if err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	if err := checkMode("state directory", from, fi, true); err != nil {
		return err
	}
	f, err := openState("lock file", filepath.Join(from, lockName), os.O_RDWR|os.O_CREATE)
	if err != nil {
		return fmt.Errorf("open lock file: %w", err)
	}
	defer f.Close() // the lock goes with the file, after the rename
	ok, err := tryLock(f)
	if err != nil {
		return fmt.Errorf("lock %s: %w", from, err)
	}
	if !ok {
		return fmt.Errorf("%w: state directory %s is in use by another planlock proxy; stop it to let this one move it to %s", ErrLocked, from, to)
	}
	b, bound, err := readBinding(from)
	if err != nil {
		return err
	}
	if bound {
		if rel, err := filepath.Rel(from, b.Audit); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel) {
			data, _ := json.Marshal(binding{Audit: filepath.Join(to, rel)})
			if err := tracer(nil).writeStateAtomic("state binding", from, bindingName, append(data, '\n')); err != nil {
				return fmt.Errorf("write %s: %w", bindingName, err)
			}
		}
	}
	if err := os.Remove(filepath.Join(from, checkpointName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove the checkpoint of %s: %w", from, err)
	}
	if err := syncDir(from); err != nil {
		return fmt.Errorf("sync %s: %w", from, err)
	}
	if err := os.Rename(from, to); err != nil {
		return fmt.Errorf("move state directory: %w", err)
	}
	if err := syncDir(filepath.Dir(to)); err != nil {
		return fmt.Errorf("sync %s: %w", filepath.Dir(to), err)
	}
	if filepath.Dir(from) != filepath.Dir(to) {
		if err := syncDir(filepath.Dir(from)); err != nil {
			return fmt.Errorf("sync %s: %w", filepath.Dir(from), err)
		}
	}
	return nil
}
