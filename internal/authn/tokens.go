package authn

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/planlock/planlock/internal/boundedio"
	"github.com/planlock/planlock/internal/stablefile"
)

// Tokens authenticates static bearer tokens listed in a file by their
// SHA-256 hash, so the file holds no secret. One line per token:
//
//	# comment
//	sha256:<64 hex>  <subject>  <plan>[,<plan>...]
//
// The subject names the caller in audit records as "token:<subject>"; "*"
// as a plan binds the token to every plan. The file is read again when it
// changes (Run); a file that does not parse keeps the tokens read before.
type Tokens struct {
	path string
	file *stablefile.File // what Reload reads: only a stable file is acted on

	mu     sync.RWMutex
	byHash map[[sha256.Size]byte]Identity
	sum    [sha256.Size]byte // of the file content last seen, good or bad
}

// maxTokenFile bounds what is read of a token file.
const maxTokenFile = 1 << 20

var (
	subjectRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$`)
	planRE    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
)

// HashToken is the line prefix a token is stored under: "sha256:<hex>".
func HashToken(token string) string {
	s := sha256.Sum256([]byte(token))
	return "sha256:" + hex.EncodeToString(s[:])
}

// LoadTokens reads the token file; it fails when the file cannot be read
// or does not parse.
func LoadTokens(path string) (*Tokens, error) {
	t := &Tokens{path: path, file: stablefile.New(path, maxTokenFile)}
	b, err := readTokenFile(path)
	if err != nil {
		return nil, err
	}
	m, err := ParseTokens(b)
	if err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	t.byHash, t.sum = m, sha256.Sum256(b)
	return t, nil
}

func readTokenFile(path string) ([]byte, error) {
	b, err := boundedio.ReadFile(path, maxTokenFile)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	return b, nil
}

// ParseTokens parses a token file's content. Errors name the line.
func ParseTokens(b []byte) (map[[sha256.Size]byte]Identity, error) {
	m := map[[sha256.Size]byte]Identity{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), maxTokenFile)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("line %d: want \"sha256:<hex> SUBJECT PLAN[,PLAN...]\", got %d fields", n, len(f))
		}
		hexSum, ok := strings.CutPrefix(f[0], "sha256:")
		raw, err := hex.DecodeString(hexSum)
		if !ok || err != nil || len(raw) != sha256.Size {
			return nil, fmt.Errorf("line %d: the token hash must be sha256:<64 hex digits> (the hash of the token, never the token)", n)
		}
		if !subjectRE.MatchString(f[1]) {
			return nil, fmt.Errorf("line %d: subject %q: use letters, digits and . _ @ + - (at most 128)", n, f[1])
		}
		var plans []string
		for _, p := range strings.Split(f[2], ",") {
			if p != "*" && !planRE.MatchString(p) {
				return nil, fmt.Errorf("line %d: plan %q is not a plan name (or *)", n, p)
			}
			plans = append(plans, p)
		}
		var key [sha256.Size]byte
		copy(key[:], raw)
		if _, dup := m[key]; dup {
			return nil, fmt.Errorf("line %d: the same token hash is listed twice", n)
		}
		m[key] = Identity{Subject: "token:" + f[1], Plans: plans}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

// Authenticate finds the identity of a request's bearer token. A request
// without a bearer token, or with one this file does not list, is
// ErrNoCredentials: another Authenticator (JWT) may know it, and the
// gateway answers 401 when none does.
func (t *Tokens) Authenticate(r *http.Request) (Identity, error) {
	tok, ok := BearerToken(r)
	if !ok {
		return Identity{}, ErrNoCredentials
	}
	// Looked up by hash: the map's timing tells nothing about the token.
	key := sha256.Sum256([]byte(tok))
	t.mu.RLock()
	id, ok := t.byHash[key]
	t.mu.RUnlock()
	if !ok {
		return Identity{}, ErrNoCredentials
	}
	return id, nil
}

// BearerToken is the request's "Authorization: Bearer <token>" value.
func BearerToken(r *http.Request) (string, bool) {
	h := r.Header.Values("Authorization")
	if len(h) != 1 {
		return "", false
	}
	scheme, tok, ok := strings.Cut(h[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// Len is the number of tokens loaded.
func (t *Tokens) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.byHash)
}

// Reload reads the file again. It returns changed when new tokens are in
// use; a file that cannot be read or parsed keeps the old tokens and
// returns the error (once per distinct content, so a poller logs one line).
// New content is acted on only once it is stable (the same, whole, on two
// reloads in a row): a file rewritten in place is never used half written.
func (t *Tokens) Reload() (changed bool, err error) {
	b, stable, err := t.file.Look()
	if err != nil {
		return false, fmt.Errorf("token file: %w", err)
	}
	if !stable {
		return false, nil // changing: look again next time
	}
	sum := sha256.Sum256(b)
	t.mu.RLock()
	same := sum == t.sum
	t.mu.RUnlock()
	if same {
		return false, nil
	}
	m, perr := ParseTokens(b)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sum = sum
	if perr != nil {
		return false, fmt.Errorf("token file %s: %w; keeping the %d tokens read before", t.path, perr, len(t.byHash))
	}
	t.byHash = m
	return true, nil
}

// Run reloads the file every interval until ctx ends, logging one line per
// change and per refused content.
func (t *Tokens) Run(ctx context.Context, interval time.Duration, log func(string)) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var lastErr string
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		changed, err := t.Reload()
		switch {
		case err != nil && err.Error() != lastErr:
			lastErr = err.Error()
			log(lastErr)
		case changed:
			lastErr = ""
			log(fmt.Sprintf("token file %s reloaded: %d tokens", t.path, t.Len()))
		}
	}
}
