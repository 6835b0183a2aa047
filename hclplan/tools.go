package hclplan

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/planlock/planlock/internal/canonjson"
	"github.com/planlock/planlock/internal/editdist"
)

// Tool is one entry of an MCP tools/list result: its name, description and
// the JSON Schema of its arguments, as the upstream sent it. It is the one
// tool type of planlock: plan checks, the tool listing and plan skeletons
// read it.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema"`
	// Raw is the whole entry as the upstream sent it (ParseToolList keeps
	// it), for the tool_pin check; nil when unknown.
	Raw json.RawMessage `json:"-"`
}

// withRaw decodes raw entries keeping each one's bytes.
func withRaw(raws []json.RawMessage) ([]Tool, error) {
	tools := make([]Tool, 0, len(raws))
	for _, r := range raws {
		var t Tool
		if err := json.Unmarshal(r, &t); err != nil {
			return nil, fmt.Errorf("read tool list: %w", err)
		}
		t.Raw = r
		tools = append(tools, t)
	}
	return tools, nil
}

// ParseToolList reads a tools/list result ({"tools": [...]}), a whole
// JSON-RPC response carrying one, or a bare array of tools.
func ParseToolList(data []byte) ([]Tool, error) {
	var probe struct {
		Tools  []json.RawMessage `json:"tools"`
		Result *struct {
			Tools []json.RawMessage `json:"tools"`
		} `json:"result"`
	}
	trimmed := strings.TrimSpace(string(data))
	if strings.HasPrefix(trimmed, "[") {
		var raws []json.RawMessage
		if err := json.Unmarshal(data, &raws); err != nil {
			return nil, fmt.Errorf("read tool list: %w", err)
		}
		return withRaw(raws)
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("read tool list: %w", err)
	}
	switch {
	case probe.Tools != nil:
		return withRaw(probe.Tools)
	case probe.Result != nil && probe.Result.Tools != nil:
		return withRaw(probe.Result.Tools)
	}
	return nil, fmt.Errorf("read tool list: no \"tools\" array (want the result of tools/list)")
}

// CheckTools checks the plan against an upstream's tools: tools that do not
// exist, arguments the schema does not have (when it forbids others), required
// arguments the plan never allows, and constraints whose type contradicts the
// schema's.
func CheckTools(p *Plan, tools []Tool) hcl.Diagnostics {
	d := &decoder{}
	byName := make(map[string]Tool, len(tools))
	for _, t := range tools {
		byName[t.Name] = t
	}
	for _, s := range p.Steps {
		t, ok := byName[s.Tool]
		if !ok {
			d.errorf(s.ToolRange, "Unknown tool", "The upstream has no tool %q.%s", s.Tool, suggest(s.Tool, byName))
			continue
		}
		d.checkToolPin(s, t)
		if s.Pin != nil {
			if _, ok := byName[s.Pin.Tool]; !ok {
				d.errorf(s.Pin.DeclRange, "Unknown pin tool", "The upstream has no tool %q to read the pin with.%s", s.Pin.Tool, suggest(s.Pin.Tool, byName))
			}
		}
		var sch Schema
		if len(t.InputSchema) > 0 {
			if err := decodeSchema(t.InputSchema, &sch); err != nil {
				d.errorf(s.ToolRange, "Unreadable input schema", "The upstream's inputSchema of %q is not a JSON Schema object: %s.", s.Tool, err)
				continue
			}
		}
		closed := strings.TrimSpace(string(sch.AdditionalProperties)) == "false"
		for _, a := range s.Args {
			prop, known := sch.Properties[a.Name]
			if !known {
				if closed {
					d.errorf(a.DeclRange, "Unknown argument", "Tool %q has no argument %q and accepts no others.%s", s.Tool, a.Name, suggestProp(a.Name, sch.Properties))
				}
				continue
			}
			if msg := contradiction(a, prop.types()); msg != "" {
				d.errorf(a.DeclRange, "Constraint contradicts the tool's schema", "Argument %q of %q %s.", a.Name, s.Tool, msg)
			}
		}
		d.checkExprTypes(s, t.InputSchema)
		for _, req := range sch.Required {
			if s.Arg(req) == nil {
				d.errorf(s.DeclRange, "Required argument not allowed", "Tool %q requires argument %q, which step %q never allows, so every call would be refused; add an arg %q block.", s.Tool, req, s.Name, req)
			}
		}
	}
	return d.diags
}

// contradiction says how a's constraints conflict with the allowed schema
// types, or returns "".
func contradiction(a *Arg, allowed []string) string {
	if len(allowed) == 0 {
		return ""
	}
	allows := func(kinds ...string) bool {
		for _, k := range kinds {
			for _, t := range allowed {
				if t == k || (k == "number" && t == "integer") {
					return true
				}
			}
		}
		return false
	}
	want := strings.Join(allowed, " or ")
	check := func(what string, v Value) string {
		if !valueHasType(v.v, allowed) {
			return fmt.Sprintf("is of type %s, but %s %s is %s", want, what, v.String(), jsonType(v.v))
		}
		return ""
	}
	if a.Eq != nil {
		if m := check("eq", *a.Eq); m != "" {
			return m
		}
	}
	for _, e := range a.Enum {
		if m := check("enum value", e); m != "" {
			return m
		}
	}
	if (a.Min != nil || a.Max != nil) && !allows("number") {
		return fmt.Sprintf("is of type %s, but min/max need a number", want)
	}
	if a.MaxLength != nil && !allows("string", "array") {
		return fmt.Sprintf("is of type %s, but max_length needs a string or an array", want)
	}
	if a.Pattern != nil && !allows("string") {
		return fmt.Sprintf("is of type %s, but pattern needs a string", want)
	}
	return ""
}

func valueHasType(v any, allowed []string) bool {
	t := jsonType(v)
	for _, a := range allowed {
		if a == t {
			return true
		}
		if t == "number" && a == "integer" {
			if n, ok := canonjson.ToNumber(v); ok && n.IsInt() {
				return true
			}
		}
	}
	return false
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "number"
}

func suggest(name string, tools map[string]Tool) string {
	names := make([]string, 0, len(tools))
	for n := range tools {
		names = append(names, n)
	}
	return didYouMean(name, names)
}

func suggestProp(name string, props map[string]*Schema) string {
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	return didYouMean(name, names)
}

// didYouMean names the closest candidate within a small edit distance.
func didYouMean(name string, candidates []string) string {
	sort.Strings(candidates)
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editdist.Distance(name, c); d < bestD {
			best, bestD = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" Did you mean %q?", best)
}
