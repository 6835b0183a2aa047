package hclplan

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sort"
)

// Schema is the part of a tool's JSON Schema planlock reads, decoded in one
// place for every reader: the plan checks against the tools (CheckTools),
// the types of expressions, and the tool listing and plan skeletons people
// read. Numbers in the keywords are json.Number.
type Schema struct {
	Type                 json.RawMessage    `json:"type"`
	Properties           map[string]*Schema `json:"properties"`
	Items                json.RawMessage    `json:"items"`
	AdditionalProperties json.RawMessage    `json:"additionalProperties"`
	Required             []string           `json:"required"`
	// Keywords a skeleton suggests constraints from; any JSON value.
	Enum        any `json:"enum"`
	MaxLength   any `json:"maxLength"`
	Minimum     any `json:"minimum"`
	Maximum     any `json:"maximum"`
	Description any `json:"description"`
}

// decodeSchema reads one JSON Schema object, numbers kept exact.
func decodeSchema(raw []byte, s *Schema) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(s); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("invalid character after top-level value")
	}
	return nil
}

// Types returns the JSON Schema types the schema allows; nil means any.
func (s *Schema) Types() []string {
	if s == nil || len(s.Type) == 0 {
		return nil
	}
	var one string
	if json.Unmarshal(s.Type, &one) == nil {
		return []string{one}
	}
	var many []string
	if json.Unmarshal(s.Type, &many) == nil {
		return many
	}
	return nil
}

func (s *Schema) types() []string { return s.Types() }

// items returns the schema of an array's elements, or nil.
func (s *Schema) items() *Schema {
	if s == nil || len(s.Items) == 0 {
		return nil
	}
	var it Schema
	if decodeSchema(s.Items, &it) != nil {
		return nil
	}
	return &it
}

// ToolArg is one property of a tool's input schema.
type ToolArg struct {
	Name     string
	Required bool
	Schema   *Schema
}

// Args returns the tool's arguments in name order; none when the input
// schema cannot be read.
func (t Tool) Args() []ToolArg {
	var s Schema
	if decodeSchema(t.InputSchema, &s) != nil {
		return nil
	}
	req := map[string]bool{}
	for _, r := range s.Required {
		req[r] = true
	}
	out := make([]ToolArg, 0, len(s.Properties))
	for name, p := range s.Properties {
		if p == nil {
			p = &Schema{}
		}
		out = append(out, ToolArg{Name: name, Required: req[name], Schema: p})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
