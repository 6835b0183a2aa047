// Package jsonedit edits a JSON document a person keeps (an MCP client's
// configuration) in place: one member is set, every other byte stays.
package jsonedit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Marshal renders v as a configuration file shows it: two-space indents, at the
// indentation of where it goes, no HTML escaping.
func Marshal(v any, prefix string) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent(prefix, "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// SetMember sets doc[key][name] = value in the JSON document doc, changing
// only those bytes: every other member, its formatting and order stay as
// they were. An empty doc becomes a new document. A document that is not
// plain JSON (comments, a syntax error) is refused: it is the user's, and
// is left for them to edit.
func SetMember(doc []byte, key, name string, value any) ([]byte, error) {
	if len(bytes.TrimSpace(doc)) == 0 {
		out, err := Marshal(map[string]any{key: map[string]any{name: value}}, "")
		return append(out, '\n'), err
	}
	if !json.Valid(doc) {
		return nil, errors.New("it is not plain JSON (comments or a syntax error); add the entry by hand")
	}
	top := skipSpace(doc, 0)
	if doc[top] != '{' {
		return nil, errors.New("its top level is not a JSON object")
	}
	members := objectMembers(doc, top)
	indent := memberIndent(doc, members, top, "  ")
	for _, m := range members {
		if m.key != key {
			continue
		}
		if doc[m.valStart] != '{' {
			return nil, fmt.Errorf("its %q is not a JSON object", key)
		}
		inner := objectMembers(doc, m.valStart)
		innerIndent := memberIndent(doc, inner, m.valStart, indent+"  ")
		for _, s := range inner {
			if s.key == name { // replace the value only
				v, err := Marshal(value, lineIndent(doc, s.keyStart))
				if err != nil {
					return nil, err
				}
				return splice(doc, s.valStart, s.valEnd, v), nil
			}
		}
		return insertMember(doc, m.valStart, inner, innerIndent, name, value)
	}
	return insertMember(doc, top, members, indent, key, map[string]any{name: value})
}

func splice(doc []byte, start, end int, with []byte) []byte {
	out := make([]byte, 0, len(doc)-(end-start)+len(with))
	out = append(out, doc[:start]...)
	out = append(out, with...)
	return append(out, doc[end:]...)
}

// insertMember adds "name": value as the last member of the object at obj.
func insertMember(doc []byte, obj int, members []member, indent, name string, value any) ([]byte, error) {
	v, err := Marshal(value, indent)
	if err != nil {
		return nil, err
	}
	k, _ := json.Marshal(name)
	if len(members) > 0 {
		last := members[len(members)-1]
		return splice(doc, last.valEnd, last.valEnd, []byte(",\n"+indent+string(k)+": "+string(v))), nil
	}
	// An empty object: write it anew between its braces.
	end := scanValue(doc, obj)
	closing := lineIndent(doc, obj)
	return splice(doc, obj, end, []byte("{\n"+indent+string(k)+": "+string(v)+"\n"+closing+"}")), nil
}

// member is one member of a JSON object, as byte offsets into the document.
type member struct {
	key              string
	keyStart         int
	valStart, valEnd int
}

// objectMembers lists the members of the valid JSON object starting at i.
func objectMembers(doc []byte, i int) []member {
	var out []member
	i++ // '{'
	for {
		i = skipSpace(doc, i)
		if doc[i] == '}' {
			return out
		}
		if doc[i] == ',' {
			i = skipSpace(doc, i+1)
		}
		ks := i
		ke := scanValue(doc, i)
		var k string
		_ = json.Unmarshal(doc[ks:ke], &k)
		i = skipSpace(doc, ke)
		i = skipSpace(doc, i+1) // ':'
		ve := scanValue(doc, i)
		out = append(out, member{key: k, keyStart: ks, valStart: i, valEnd: ve})
		i = ve
	}
}

func skipSpace(doc []byte, i int) int {
	for i < len(doc) && (doc[i] == ' ' || doc[i] == '\t' || doc[i] == '\n' || doc[i] == '\r') {
		i++
	}
	return i
}

// scanValue returns the end of the valid JSON value starting at i.
func scanValue(doc []byte, i int) int {
	switch doc[i] {
	case '"':
		for j := i + 1; j < len(doc); j++ {
			switch doc[j] {
			case '\\':
				j++
			case '"':
				return j + 1
			}
		}
		return len(doc)
	case '{', '[':
		depth := 0
		for j := i; j < len(doc); j++ {
			switch doc[j] {
			case '"':
				j = scanValue(doc, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(doc)
	}
	j := i
	for j < len(doc) && !strings.ContainsRune(" \t\r\n,}]", rune(doc[j])) {
		j++
	}
	return j
}

// lineIndent is the whitespace that starts the line holding offset i.
func lineIndent(doc []byte, i int) string {
	start := bytes.LastIndexByte(doc[:i], '\n') + 1
	j := start
	for j < i && (doc[j] == ' ' || doc[j] == '\t') {
		j++
	}
	return string(doc[start:j])
}

// memberIndent is the indentation of an object's members: that of its
// first member, else the object's own plus def's step.
func memberIndent(doc []byte, members []member, obj int, def string) string {
	if len(members) > 0 {
		if in := lineIndent(doc, members[0].keyStart); bytes.LastIndexByte(doc[:members[0].keyStart], '\n') > obj {
			return in
		}
	}
	if obj == skipSpace(doc, 0) {
		return "  "
	}
	return lineIndent(doc, obj) + "  "
}
