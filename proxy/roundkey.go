package proxy

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/planlock/planlock/proxy/ledger"
)

// RoundKeyFile is the file of a state directory that holds the key of
// multi-round requestStates when no state key is configured.
const RoundKeyFile = "request-state.key"

// RoundKey is the key for Config.RoundKey. With a state key it is derived
// from it, so every process that shares the state (the replicas of a
// PostgreSQL state, a restart) verifies the requestStates any of them
// issued. Without one it is the 32 random bytes of dir's RoundKeyFile,
// made (mode 0600) on first use: a restart keeps it, another machine does
// not have it, so a retry that lands there is refused. An empty dir gives
// nil: a key of this process alone.
func RoundKey(stateKey *ledger.StateKey, dir string) ([]byte, error) {
	if stateKey != nil {
		return stateKey.Derive("multi-round request state"), nil
	}
	if dir == "" {
		return nil, nil
	}
	path := filepath.Join(dir, RoundKeyFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if len(b) != 32 || bytes.Count(b, b[:1]) == len(b) {
			return nil, fmt.Errorf("%s: not a 32-byte key; remove it to make a new one (open multi-round calls then fail)", path)
		}
		return b, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("read the multi-round key: %w", err)
	}
	b = make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("make the multi-round key: %w", err)
	}
	// Written aside and linked into place: a process that reads it finds
	// the whole key or none, and of two that make one, one wins.
	f, err := os.CreateTemp(dir, RoundKeyFile+".*")
	if err != nil {
		return nil, fmt.Errorf("make the multi-round key: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err = f.Write(b); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("write the multi-round key: %w", err)
	}
	if err := os.Link(f.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return RoundKey(nil, dir)
		}
		return nil, fmt.Errorf("make the multi-round key: %w", err)
	}
	return b, nil
}
