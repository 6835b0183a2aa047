package toolpin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf16"
)

// Summary is what a reviewer reads of a pinned definition besides its
// description: the shape of its schemas and what a client acts on.
type Summary struct {
	Title string
	// Input is the input schema's top-level properties, by name.
	Input []Property
	// InputOther is set when the input schema allows more than its
	// properties say (no "properties", or additionalProperties not false).
	InputOther bool
	// Output is nil when the definition has no output schema.
	Output *[]Property
	// Annotations are the annotations as name and JSON value, by name.
	Annotations [][2]string
	// Meta are the _meta keys with their values as JSON, by key.
	Meta [][2]string
	// Other are the names of any other members (execution, later ones).
	Other []string
}

// Property is one top-level schema property.
type Property struct {
	Name     string
	Type     string // the JSON Schema type, "a|b" for several, "any" when none
	Required bool
}

// Summarize reads a definition (any JSON form; Canonical checks it).
func Summarize(def []byte) (Summary, error) {
	c, err := Canonical(def)
	if err != nil {
		return Summary{}, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(c, &m); err != nil {
		return Summary{}, fmt.Errorf("tool definition: %w", err)
	}
	var s Summary
	for k, v := range m {
		switch k {
		case "name", "description":
		case "title":
			_ = json.Unmarshal(v, &s.Title)
		case "inputSchema":
			s.Input, s.InputOther = properties(v)
		case "outputSchema":
			props, _ := properties(v)
			s.Output = &props
		case "annotations":
			s.Annotations = members(v)
		case "_meta":
			s.Meta = members(v)
		default:
			s.Other = append(s.Other, k)
		}
	}
	if _, ok := m["inputSchema"]; !ok {
		s.InputOther = true
	}
	sort.Strings(s.Other)
	return s, nil
}

// properties reads a schema's top-level properties, sorted by name, each
// with its required mark, and whether the schema allows other members.
func properties(schema json.RawMessage) ([]Property, bool) {
	var sc struct {
		Properties           map[string]json.RawMessage `json:"properties"`
		Required             []string                   `json:"required"`
		AdditionalProperties *json.RawMessage           `json:"additionalProperties"`
	}
	if json.Unmarshal(schema, &sc) != nil {
		return nil, true
	}
	var out []Property
	for name, p := range sc.Properties {
		out = append(out, Property{Name: name, Type: typeOf(p), Required: slices.Contains(sc.Required, name)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	other := sc.Properties == nil || sc.AdditionalProperties == nil || string(*sc.AdditionalProperties) != "false"
	return out, other
}

// typeOf is a property schema's type.
func typeOf(p json.RawMessage) string {
	var sc struct {
		Type json.RawMessage `json:"type"`
	}
	if json.Unmarshal(p, &sc) != nil || len(sc.Type) == 0 {
		return "any"
	}
	var one string
	if json.Unmarshal(sc.Type, &one) == nil {
		return one
	}
	var many []string
	if json.Unmarshal(sc.Type, &many) == nil && len(many) > 0 {
		return strings.Join(many, "|")
	}
	return "any"
}

// members lists an object's members as name and canonical JSON, by name.
func members(v json.RawMessage) [][2]string {
	var m map[string]json.RawMessage
	if json.Unmarshal(v, &m) != nil {
		return [][2]string{{"", string(v)}}
	}
	var out [][2]string
	for k, x := range m {
		out = append(out, [2]string{k, string(x)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// indented is the canonical form of def indented by two spaces, every
// character a reader cannot see (or that reorders what they see) written
// as a JSON \u escape, so that the text is the same definition and shows
// all of it.
func indented(def []byte) (string, error) {
	c, err := Canonical(def)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	if err := json.Indent(&b, c, "", "  "); err != nil {
		return "", fmt.Errorf("tool definition: %w", err)
	}
	var out strings.Builder
	for _, r := range b.String() {
		// Outside strings JSON is ASCII, so every rune escaped here is
		// inside a string, where \u is read back as the same rune.
		if r == '\n' || r == ' ' || (unicode.IsGraphic(r) && !unicode.Is(unicode.Cf, r) && !unicode.Is(unicode.Zs, r)) {
			out.WriteRune(r)
			continue
		}
		if r > 0xffff {
			hi, lo := utf16.EncodeRune(r)
			fmt.Fprintf(&out, `\u%04x\u%04x`, hi, lo)
			continue
		}
		fmt.Fprintf(&out, `\u%04x`, r)
	}
	return out.String(), nil
}

// HCL writes def as an HCL heredoc for a tool_pin's definition attribute:
// the indented canonical form, template sequences escaped, each line after
// indent. It parses back to text whose canonical form is def's.
func HCL(def []byte, indent string) (string, error) {
	s, err := indented(def)
	if err != nil {
		return "", err
	}
	s = strings.ReplaceAll(strings.ReplaceAll(s, "${", "$${"), "%{", "%%{")
	var b strings.Builder
	b.WriteString("<<-JSON\n")
	for _, line := range strings.Split(s, "\n") {
		b.WriteString(indent + "  " + line + "\n")
	}
	// No line of indented JSON is a bare word, so none ends the heredoc.
	b.WriteString(indent + "JSON")
	return b.String(), nil
}
