package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/planlock/planlock/proxy/ledger"
)

// stateKeyOptions are the flags of a command that decides on a state:
// the per-deployment key that authenticates every record (ledger.StateKey),
// kept outside the state.
type stateKeyOptions struct {
	StateKey           string
	AcceptUnkeyedState bool
}

func (o *stateKeyOptions) flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "state-key", Usage: "authenticate every state record with the 32-byte key in `FILE` (planlock keygen --state-key FILE), kept outside the state; the state then refuses any record written without it", TakesFile: true, Destination: &o.StateKey},
		&cli.BoolFlag{Name: "accept-unkeyed-state", Usage: "with --state-key, take a state whose records were written before the key was configured (once: from then on every record carries a MAC)", Destination: &o.AcceptUnkeyedState},
	}
}

// key reads --state-key (nil when not given), refusing a key file inside
// any of the state directories given.
func (o *stateKeyOptions) key(stateDirs ...string) (*ledger.StateKey, error) {
	if o.StateKey == "" {
		if o.AcceptUnkeyedState {
			return nil, usageErrorf("--accept-unkeyed-state applies only with --state-key")
		}
		return nil, nil
	}
	k, err := ledger.ReadStateKey(o.StateKey, stateDirs...)
	if err != nil {
		return nil, failf("--state-key: %v", err)
	}
	return k, nil
}

// writeStateKey writes a new state key (32 random bytes, mode 0600) to
// path; an existing file is kept unless force.
func writeStateKey(path string, force bool) (*ledger.StateKey, error) {
	b := make([]byte, ledger.StateKeySize)
	if _, err := rand.Read(b); err != nil {
		return nil, failf("keygen: %v", err)
	}
	k, err := ledger.ParseStateKey(b)
	if err != nil {
		return nil, failf("keygen: %v", err)
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil, failf("keygen: %s exists; a state key replaced makes the state it keeps unreadable (use --force to overwrite)", path)
	}
	if err != nil {
		return nil, failf("keygen: %v", err)
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, failf("keygen: %v", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, failf("keygen: %v", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, failf("keygen: %v", err)
	}
	if err := f.Close(); err != nil {
		return nil, failf("keygen: %v", err)
	}
	return k, nil
}

// stateKeyLine is what keygen prints for a state key.
func stateKeyLine(path string, k *ledger.StateKey) string {
	return fmt.Sprintf("wrote state key %s (id %s); keep it outside the state directory, give it with --state-key", path, k.ID())
}
