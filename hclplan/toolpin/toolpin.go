// Package toolpin is the canonical form and digest of an MCP tool
// definition, the thing a plan's tool_pin block approves: the text and
// schemas the agent reads and what a client acts on.
//
// # Canonical form
//
// The digest covers every member of the tools/list entry except "icons"
// (pictures for people, not read by the model): name, title, description,
// inputSchema, outputSchema, annotations, execution, _meta (all of it, since
// planlock cannot tell which keys a client acts on, such as a UI resource
// under "ui" or "ui/resourceUri") and any member a later protocol adds. A
// member whose value is null counts as absent. The kept object is written as
// canonical JSON (internal/canonjson): object keys sorted by their UTF-8
// bytes, no insignificant space, strings escaped as encoding/json does
// without HTML escaping, numbers in their shortest exact decimal text (1.0,
// 1e0 and 1 are the same number). Key order and whitespace therefore never
// change the digest; any other change does. A definition with a duplicate
// object key, an invalid number or trailing data has no digest: it is
// refused, since two readers could see two different definitions.
//
// The digest is "sha256:" and the lowercase hex SHA-256 of the canonical
// bytes.
package toolpin

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"

	"github.com/planlock/planlock/internal/canonjson"
)

// Prefix starts every digest.
const Prefix = "sha256:"

// digestRE is what a digest looks like.
var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// ValidDigest reports whether s is a well-formed digest.
func ValidDigest(s string) bool { return digestRE.MatchString(s) }

// excluded are the members the digest leaves out.
var excluded = map[string]bool{"icons": true}

// maxDepth bounds nesting, as the proxy bounds what it reads.
const maxDepth = 200

// Canonical returns the canonical form of one tools/list entry.
func Canonical(def []byte) ([]byte, error) {
	v, err := decode(def)
	if err != nil {
		return nil, fmt.Errorf("tool definition: %w", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("tool definition: not a JSON object")
	}
	kept := make(map[string]any, len(obj))
	for k, x := range obj {
		if x == nil || excluded[k] {
			continue
		}
		kept[k] = x
	}
	if name, ok := kept["name"].(string); !ok || name == "" {
		return nil, errors.New("tool definition: no name")
	}
	out, err := canonjson.Marshal(kept)
	if err != nil {
		return nil, fmt.Errorf("tool definition: %w", err)
	}
	return out, nil
}

// Digest returns the digest of one tools/list entry.
func Digest(def []byte) (string, error) {
	c, err := Canonical(def)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return Prefix + hex.EncodeToString(sum[:]), nil
}

// decode reads exactly one JSON value, numbers as json.Number, refusing
// duplicate keys.
func decode(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	v, err := canonjson.DecodeValue(d, maxDepth, true)
	var dup *canonjson.DuplicateKeyError
	if errors.As(err, &dup) {
		return nil, fmt.Errorf("duplicate key %q", dup.Key)
	}
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the definition")
	}
	return v, nil
}
