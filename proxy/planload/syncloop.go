package planload

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/planlock/planlock/internal/boundedio"
	"github.com/planlock/planlock/internal/oneline"
	"github.com/planlock/planlock/sign"
)

// syncReport logs a repository copy's failures when they start (or
// change) and when they end, not on every look; RepoSync and RepoDirSync
// share it.
type syncReport struct {
	lastErr string
}

// note logs what changed in one sync's outcome (err); keeping says what
// goes on serving while it fails. It returns err.
func (r *syncReport) note(ctx context.Context, err error, log func(string), keeping string) error {
	switch {
	case err != nil && ctx.Err() != nil:
	case err != nil:
		if msg := oneline.Of(err.Error(), 0); msg != r.lastErr {
			r.lastErr = msg
			log(fmt.Sprintf("planlock: plans repository: %s; %s", msg, keeping))
		}
	case r.lastErr != "":
		r.lastErr = ""
		log("planlock: plans repository: up to date again")
	}
	return err
}

// runEvery calls step every interval (30s when not positive) until ctx
// ends.
func runEvery(ctx context.Context, interval time.Duration, step func(context.Context) error) {
	if interval <= 0 {
		interval = 30 * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_ = step(ctx)
	}
}

// writePair writes a plan file and its bundle where they differ from
// what is there (each by temp file and rename, the bundle first), and
// reports whether either changed.
func writePair(file string, plan, bundle []byte) (bool, error) {
	changed := false
	for _, f := range []struct {
		name string
		data []byte
	}{{sign.BundlePath(file), bundle}, {file, plan}} {
		if old, err := boundedio.ReadFile(f.name, boundedio.MaxHoldBytes); err == nil && string(old) == string(f.data) {
			continue
		}
		tmp := f.name + ".tmp"
		if err := os.WriteFile(tmp, f.data, 0o600); err != nil {
			return false, fmt.Errorf("plans copy: %w", err)
		}
		if err := os.Rename(tmp, f.name); err != nil {
			return false, fmt.Errorf("plans copy: %w", err)
		}
		changed = true
	}
	return changed, nil
}
