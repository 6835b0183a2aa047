package sign

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"time"
)

// PredicateType is the in-toto predicate type of a planlock approval. The
// version is part of the URI so a future format can never be mistaken for it.
const PredicateType = "https://planlock.dev/approval/v1"

// Media types of the statement and its DSSE envelope.
const (
	StatementType      = "https://in-toto.io/Statement/v1"
	InTotoPayloadType  = "application/vnd.in-toto+json"
	bundleSuffix       = ".sigstore.json"
	sha256DigestPrefix = "sha256:"
)

// Kind says what an approval approves.
type Kind string

const (
	// KindPlan approves a plan file.
	KindPlan Kind = "plan"
	// KindHold approves a hold request file (one exact held call).
	KindHold Kind = "hold"
)

// ParseKind accepts "plan" or "hold".
func ParseKind(s string) (Kind, error) {
	switch Kind(s) {
	case KindPlan, KindHold:
		return Kind(s), nil
	}
	return "", fmt.Errorf("unknown approval kind %q (want plan or hold)", s)
}

// Predicate is what the approval records: which file, approved where and by whom.
type Predicate struct {
	Kind Kind `json:"kind"`
	// Path is the file's path in the repository, slash separated, relative.
	Path       string `json:"path"`
	Repository string `json:"repository,omitempty"`
	Ref        string `json:"ref,omitempty"`
	// Commit is the merge commit that approved the file.
	Commit      string    `json:"commit,omitempty"`
	PullRequest int       `json:"pullRequest,omitempty"`
	Approvers   []string  `json:"approvers,omitempty"`
	SignedAt    time.Time `json:"signedAt"`
}

// statement is an in-toto Statement v1 carrying a Predicate.
type statement struct {
	Type          string          `json:"_type"`
	Subject       []subject       `json:"subject"`
	PredicateType string          `json:"predicateType"`
	Predicate     json.RawMessage `json:"predicate"`
}

type subject struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// CleanPath normalizes a repository-relative path the way it is signed:
// slash separated, no "./", no leading slash, no "..".
func CleanPath(p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("empty path")
	}
	p = strings.ReplaceAll(p, "\\", "/")
	c := path.Clean(p)
	if path.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../") || c == "." {
		return "", fmt.Errorf("path %q must be relative to the repository and stay inside it", p)
	}
	return c, nil
}

// Digest returns the hex sha256 of content.
func Digest(content []byte) string {
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:])
}

// newStatement builds the statement JSON for content at p.Path.
func newStatement(content []byte, p Predicate) ([]byte, error) {
	pred, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode predicate: %w", err)
	}
	st := statement{
		Type:          StatementType,
		Subject:       []subject{{Name: p.Path, Digest: map[string]string{"sha256": Digest(content)}}},
		PredicateType: PredicateType,
		Predicate:     pred,
	}
	out, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("encode statement: %w", err)
	}
	return out, nil
}

// parseStatement decodes an in-toto statement payload.
func parseStatement(payload []byte) (*statement, error) {
	var st statement
	if err := json.Unmarshal(payload, &st); err != nil {
		return nil, fmt.Errorf("%w: statement is not valid JSON: %v", ErrNotApproval, err)
	}
	if st.Type != StatementType && st.Type != "https://in-toto.io/Statement/v0.1" {
		return nil, fmt.Errorf("%w: statement type %q is not an in-toto statement", ErrNotApproval, st.Type)
	}
	if p := bytes.TrimSpace(st.Predicate); len(p) > 0 && p[0] != '{' {
		return nil, fmt.Errorf("%w: the statement's predicate is not a JSON object", ErrNotApproval)
	}
	return &st, nil
}

// predicate decodes the planlock predicate, refusing other predicate types.
func (st *statement) predicate() (*Predicate, error) {
	if st.PredicateType != PredicateType {
		return nil, fmt.Errorf("%w: predicate type is %q, want %q", ErrNotApproval, st.PredicateType, PredicateType)
	}
	var p Predicate
	dec := json.NewDecoder(strings.NewReader(string(st.Predicate)))
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("%w: predicate: %v", ErrNotApproval, err)
	}
	if _, err := ParseKind(string(p.Kind)); err != nil {
		return nil, fmt.Errorf("%w: predicate: %v", ErrNotApproval, err)
	}
	return &p, nil
}

// BundlePath is where the bundle of the file at path lives by default.
func BundlePath(path string) string { return path + bundleSuffix }
