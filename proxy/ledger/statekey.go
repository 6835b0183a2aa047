package ledger

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// The state key. The hash chain shows an edit, but anyone who can write the
// journal (or insert rows into a shared state) can compute the next
// record: an appended outcome that marks a step done, a lease return that
// gives calls back. What replay re-derives (checkpoint, segment) and what
// carries evidence (an approval) holds without a secret; the rest needs
// one. With a state key every record carries "mac": the HMAC-SHA256, under
// a 32-byte key kept outside the state, of the line's bytes before it
// (seq, prev and the fields), so a record is accepted only if it was
// written by a planlock holding the key. Since each MAC covers prev, a
// record with a good MAC vouches for every record before it.
//
// The rule (keyRule.check), the same for a journal file and a shared state:
//   - a record with a MAC needs the key, and its MAC must verify;
//   - once one record had a MAC, every later one must have one (a key once
//     used cannot be dropped, by an operator or by someone stripping MACs);
//   - records without a MAC before the first with one were written before
//     the key was configured: they are taken as before, because the first
//     MAC vouches for them. A state that has records but no MAC at all is
//     taken only once, when told (Options.AcceptUnkeyedState): without a
//     MAC nothing tells it from a state an attacker rewrote whole. Open
//     then writes a state_key record, the first with a MAC.

// StateKeySize is the length of a state key.
const StateKeySize = 32

// StateKey is a per-deployment key that authenticates the records of a
// state. Safe for concurrent use.
type StateKey struct {
	id   string
	pool sync.Pool // of hash.Hash: HMAC-SHA256 under the key
}

// ParseStateKey reads a state key: exactly 32 bytes (head -c 32
// /dev/urandom), or their 64 hex digits on one line.
func ParseStateKey(b []byte) (*StateKey, error) {
	var key []byte
	switch t := bytes.TrimSpace(b); {
	case len(b) == StateKeySize:
		key = bytes.Clone(b)
	case len(t) == 2*StateKeySize:
		k, err := hex.DecodeString(string(t))
		if err != nil {
			return nil, fmt.Errorf("a state key is %d bytes, or %d hex digits: %v", StateKeySize, 2*StateKeySize, err)
		}
		key = k
	default:
		return nil, fmt.Errorf("a state key is %d bytes, or %d hex digits; this is %d bytes (make one with: planlock keygen --state-key FILE)", StateKeySize, 2*StateKeySize, len(b))
	}
	if bytes.Count(key, key[:1]) == len(key) {
		return nil, errors.New("the state key is one byte repeated: make one with planlock keygen --state-key FILE")
	}
	k := &StateKey{}
	k.pool.New = func() any { return &macState{h: hmac.New(sha256.New, key)} }
	// The id names the key in messages and the state_key record without
	// telling anything of it.
	m := k.get()
	m.h.Write([]byte("planlock state key id"))
	k.id = hex.EncodeToString(m.h.Sum(nil)[:8])
	k.pool.Put(m)
	return k, nil
}

// ReadStateKey reads a state key file. It must not be in (or under) any of
// the state directories given: whoever can write the state must not be
// able to read the key. A file that users other than its owner may read or
// write is refused too.
func ReadStateKey(path string, stateDirs ...string) (*StateKey, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("state key %s: %w", path, err)
	}
	real := abs
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		real = r
	}
	for _, d := range stateDirs {
		if d == "" {
			continue
		}
		for _, dir := range dirForms(d) {
			if insideDir(abs, dir) || insideDir(real, dir) {
				return nil, fmt.Errorf("state key %s is inside the state directory %s: keep it where whoever can write the state cannot read it", path, d)
			}
		}
	}
	f, err := os.Open(abs)
	if err != nil {
		return nil, fmt.Errorf("state key: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("state key: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("state key %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 && runtime.GOOS != "windows" {
		return nil, fmt.Errorf("state key %s has mode %04o: other users may read or change it; chmod 600 %s", path, perm, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, 4*StateKeySize))
	if err != nil {
		return nil, fmt.Errorf("state key %s: %w", path, err)
	}
	k, err := ParseStateKey(b)
	if err != nil {
		return nil, fmt.Errorf("state key %s: %w", path, err)
	}
	return k, nil
}

// dirForms are a directory's absolute path and, when it exists, the path
// with its symbolic links resolved.
func dirForms(d string) []string {
	abs, err := filepath.Abs(d)
	if err != nil {
		return nil
	}
	out := []string{abs}
	if r, err := filepath.EvalSymlinks(abs); err == nil && r != abs {
		out = append(out, r)
	}
	return out
}

func insideDir(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// ID names the key (8 bytes of an HMAC under it, hex).
func (k *StateKey) ID() string { return k.id }

// macState is one HMAC under the key and the buffer of its sum, pooled:
// a record's MAC allocates nothing.
type macState struct {
	h   hash.Hash
	sum [sha256.Size]byte
}

func (k *StateKey) get() *macState {
	m := k.pool.Get().(*macState)
	m.h.Reset()
	return m
}

// appendMAC appends the hex MAC of prefix to dst.
func (k *StateKey) appendMAC(dst, prefix []byte) []byte {
	m := k.get()
	m.h.Write(prefix)
	sum := m.h.Sum(m.sum[:0])
	n := len(dst)
	dst = append(dst, make([]byte, 2*sha256.Size)...)
	hex.Encode(dst[n:], sum)
	k.pool.Put(m)
	return dst
}

// verify reports whether mac (hex) is the MAC of prefix.
func (k *StateKey) verify(prefix, mac []byte) bool {
	var buf [2 * sha256.Size]byte
	return hmac.Equal(k.appendMAC(buf[:0], prefix), mac)
}

// macField is what a keyed line has between its fields and its hash.
const macField = `,"mac":"`

// macSuffixLen is len(`,"mac":"` + 64 hex + `"`).
const macSuffixLen = len(macField) + 64 + 1

// splitMAC splits the part of a line before its hash into the bytes the
// MAC covers and the MAC (nil when the record has none). No field's value
// can end a record this way: a quote inside a string is escaped.
func splitMAC(body []byte) (prefix, mac []byte) {
	n := len(body)
	if n < macSuffixLen || body[n-1] != '"' || string(body[n-macSuffixLen:n-macSuffixLen+len(macField)]) != macField {
		return body, nil
	}
	return body[:n-macSuffixLen], body[n-65 : n-1]
}

// keyRule is the state key's rule over one chain of records (see the top
// of this file). A nil *keyRule checks no MAC: a reader that decides
// nothing (planlock holds list, audit verify without the key).
type keyRule struct {
	key *StateKey // nil: no key configured, so a record with a MAC is refused
	// keyed is the seq of the first record read with a MAC (0: none yet).
	keyed uint64
	// unkeyed counts the records read without one.
	unkeyed int
}

// newKeyRule is the rule of a reader that decides (Open, a replica, audit
// verify with the key).
func newKeyRule(k *StateKey) *keyRule { return &keyRule{key: k} }

// check applies the rule to the record seq, whose bytes before the hash
// are body; it returns why the record is refused ("" to take it).
func (r *keyRule) check(seq uint64, body []byte) string {
	if r == nil {
		return ""
	}
	prefix, mac := splitMAC(body)
	switch {
	case mac == nil && r.key != nil && r.keyed != 0:
		return fmt.Sprintf("record %d has no state MAC, but record %d before it has: it was not written by planlock with the state key (forged, or its MAC stripped)", seq, r.keyed)
	case mac == nil:
		r.unkeyed++
	case r.key == nil:
		return fmt.Sprintf("record %d carries a state MAC but no state key is given: this state is kept with a state key, which cannot be dropped (give --state-key)", seq)
	case !r.key.verify(prefix, mac):
		return fmt.Sprintf("record %d: its state MAC does not verify with state key %s: it was not written by planlock with this key (forged or edited, or another key)", seq, r.key.ID())
	case r.keyed == 0:
		r.keyed = seq
	}
	return ""
}

// ErrUnkeyed: a state key is given, but the state has records and none
// carries a MAC.
var ErrUnkeyed = errors.New("state not kept with the state key")

// finish is the rule at the end of a replay that decides: a state key is
// given but no record has a MAC. accept takes the records as written
// before the key was configured.
func (r *keyRule) finish(where string, accept bool) error {
	if r == nil || r.key == nil || r.keyed != 0 || r.unkeyed == 0 || accept {
		return nil
	}
	return fmt.Errorf("%w: %s has %d records and none carries a MAC of state key %s; if this state was written before the key was configured, and you trust it, start once with --accept-unkeyed-state (from then on every record carries a MAC); refusing to start",
		ErrUnkeyed, where, r.unkeyed, r.key.ID())
}

// needsSwitch reports whether a keyed writer must write the state_key
// record: no record read had a MAC.
func (r *keyRule) needsSwitch() bool { return r != nil && r.key != nil && r.keyed == 0 }

// typeStateKey is the first record written with a state key's MAC.
const typeStateKey = "state_key"

// stateKeyNote is the note of that record.
func stateKeyNote(k *StateKey, unkeyed int) string {
	if unkeyed == 0 {
		return "state key " + k.ID() + ": every record carries its MAC"
	}
	return fmt.Sprintf("state key %s: every record from here on carries its MAC; the %d records before were written without one", k.ID(), unkeyed)
}

// ruleFor is the rule of a check with key; nil (no MAC checked) without one.
func ruleFor(key *StateKey) *keyRule {
	if key == nil {
		return nil
	}
	return newKeyRule(key)
}

// clone copies the rule's progress, for a scan that starts where r stands.
func (r *keyRule) clone() *keyRule {
	if r == nil {
		return nil
	}
	c := *r
	return &c
}

// finishVerify is finish for audit verify: with a key, a chain that has
// records must have a MAC.
func (r *keyRule) finishVerify(res VerifyResult) error {
	if r == nil || r.key == nil || r.keyed != 0 || res.Records == 0 {
		return nil
	}
	return &VerifyError{Line: res.Records, Reason: fmt.Sprintf("no record carries a MAC of state key %s: this state was not kept with the key (or every MAC was stripped)", r.key.ID())}
}

// Derive is a 32-byte key for another purpose (label), derived from the
// state key (HMAC-SHA256 of the label under it): every process holding
// the state key derives the same one, and it tells nothing of the state
// key.
func (k *StateKey) Derive(label string) []byte {
	m := k.get()
	defer k.pool.Put(m)
	m.h.Write([]byte("planlock derived key\x00" + label))
	return m.h.Sum(nil)
}
