package hclplan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Summary renders the plan for a human, in Markdown that reads well as the
// body of an approval pull request: what the agent may do, in plain words.
func Summary(p *Plan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Plan %s\n\n", MarkdownCode(p.Name))
	fmt.Fprintf(&b, "**Goal:** %s\n\n", MarkdownCode(p.Goal))
	if p.Expires.IsZero() {
		b.WriteString("- **Expires:** never\n")
	} else {
		fmt.Fprintf(&b, "- **Expires:** %s\n", p.Expires.UTC().Format(time.RFC3339))
	}
	if p.Order == OrderSequential {
		b.WriteString("- **Order:** sequential — steps run in the order below; a later step closes the earlier ones\n")
	} else {
		b.WriteString("- **Order:** any — steps may run in any order\n")
	}
	if p.OnViolation == ViolationHold {
		b.WriteString("- **A call outside the plan:** held for approval by a new pull request\n")
	} else {
		b.WriteString("- **A call outside the plan:** blocked\n")
	}
	switch {
	case p.Upstream == nil:
		b.WriteString("- **Upstream:** given on the proxy's command line\n")
	case p.Upstream.URL != "":
		fmt.Fprintf(&b, "- **Upstream:** streamable HTTP %s\n", MarkdownCode(p.Upstream.URL))
	default:
		fmt.Fprintf(&b, "- **Upstream:** %s", MarkdownCode(shellJoin(p.Upstream.Command)))
		if len(p.Upstream.Env) > 0 {
			fmt.Fprintf(&b, ", with only %s from the environment", codeList(p.Upstream.Env))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "- **Digest:** `%s`\n", p.Digest)

	b.WriteString("\n### Steps\n")
	if len(p.Steps) == 0 {
		b.WriteString("\nNo tool may be called.\n")
	}
	for i, s := range p.Steps {
		fmt.Fprintf(&b, "\n%d. **%s** calls %s %s", i+1, MarkdownCode(s.Name), MarkdownCode(s.Tool), times(s.MaxCalls))
		if s.OnError == ErrorHold {
			b.WriteString("; a failed call is held for approval")
		}
		b.WriteString(".\n")
		if s.Approval == ApprovalEach {
			b.WriteString("   - **Every call needs approval** by its own pull request.\n")
		}
		if len(s.Args) == 0 {
			b.WriteString("   - No arguments allowed.\n")
		}
		for _, a := range s.Args {
			fmt.Fprintf(&b, "   - %s %s\n", MarkdownCode(a.Name), describeArg(a))
			writeNested(&b, a, "     ")
		}
		for _, c := range s.Checks {
			fmt.Fprintf(&b, "   - Check on all arguments: %s\n", describeExpr(c))
		}
		if s.Pin != nil {
			fmt.Fprintf(&b, "   - Pinned: before each call, %s must return %s = %s, or the call is held.\n",
				MarkdownCode(s.Pin.Tool+"("+s.Pin.Args.String()+")"), MarkdownCode(s.Pin.Field), MarkdownCode(s.Pin.Eq.String()))
		}
		if tp := s.ToolPin; tp != nil {
			fmt.Fprintf(&b, "   - Tool definition pinned: %s; a changed definition is not shown to the agent and its calls are %s.\n",
				MarkdownCode(tp.Digest), map[bool]string{true: "held", false: "blocked"}[p.OnViolation == ViolationHold])
			if tp.Description != nil {
				fmt.Fprintf(&b, "     - Pinned description: %s\n", MarkdownCode(*tp.Description))
			}
			writeToolPinSummary(&b, tp)
		}
		writeInput(&b, s.Input, "   ")
	}
	writeResourcesAndPrompts(&b, p)
	b.WriteString("\nAny other tool, argument or call is blocked.\n")
	return b.String()
}

func times(n int) string {
	if n == 1 {
		return "at most once"
	}
	return fmt.Sprintf("at most %d times", n)
}

// describeArg says in plain words what values an argument may take.
func describeArg(a *Arg) string {
	return withOptional(describeConstraints(a), a.Optional)
}

// describeConstraints says what values a constraint set allows; nested
// items and field blocks are written by writeNested.
func describeConstraints(a *Arg) string {
	if a.Any {
		return "may be any value"
	}
	var parts []string
	if a.Eq != nil {
		parts = append(parts, "must be "+MarkdownCode(a.Eq.String()))
	}
	if a.Enum != nil {
		parts = append(parts, "must be one of "+MarkdownCode(enumString(a.Enum)))
	}
	switch {
	case a.Min != nil && a.Max != nil:
		parts = append(parts, fmt.Sprintf("must be a number from %s to %s", a.Min, a.Max))
	case a.Min != nil:
		parts = append(parts, fmt.Sprintf("must be a number of at least %s", a.Min))
	case a.Max != nil:
		parts = append(parts, fmt.Sprintf("must be a number of at most %s", a.Max))
	}
	if a.MaxLength != nil {
		parts = append(parts, fmt.Sprintf("at most %d characters (or items)", *a.MaxLength))
	}
	if a.Pattern != nil {
		parts = append(parts, fmt.Sprintf("must match %s in full", MarkdownCode(a.Pattern.Source)))
	}
	parts = append(parts, describeV2(a)...)
	return strings.Join(parts, ", ")
}

func withOptional(s string, optional bool) string {
	if optional {
		return s + " (optional)"
	}
	return s + " (required)"
}

func codeList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = MarkdownCode(x)
	}
	return strings.Join(q, ", ")
}

func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`") {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		} else {
			q[i] = a
		}
	}
	return strings.Join(q, " ")
}

// The canonical JSON form. Struct fields marshal in declaration order and
// maps with sorted keys, so the bytes are stable for tests and tools.
type jsonPlan struct {
	Name        string         `json:"name"`
	Digest      string         `json:"digest"`
	Goal        string         `json:"goal"`
	Expires     *string        `json:"expires"`
	Order       Order          `json:"order"`
	OnViolation OnViolation    `json:"on_violation"`
	Upstream    *jsonUpstream  `json:"upstream"`
	Steps       []jsonStep     `json:"steps"`
	Resources   []jsonResource `json:"resources,omitempty"`
	Prompts     []jsonPrompt   `json:"prompts,omitempty"`
}

type jsonUpstream struct {
	Command []string `json:"command,omitempty"`
	URL     string   `json:"url,omitempty"`
	Env     []string `json:"env"`
}

type jsonStep struct {
	Name     string       `json:"name"`
	Tool     string       `json:"tool"`
	MaxCalls int          `json:"max_calls"`
	OnError  OnError      `json:"on_error"`
	Approval Approval     `json:"approval"`
	Args     []jsonArg    `json:"args"`
	Pin      *jsonPin     `json:"pin"`
	ToolPin  *jsonToolPin `json:"tool_pin,omitempty"`
	Checks   []jsonExpr   `json:"checks,omitempty"`
	Input    *jsonInput   `json:"input,omitempty"`
}

type jsonArg struct {
	Name     string `json:"name"`
	Optional bool   `json:"optional"`
	jsonConstraints
}

// jsonConstraints is the constraint set of an arg, field or items block; the
// v2 members are omitted when unset, so a v1 plan's JSON is unchanged.
type jsonConstraints struct {
	Any            bool             `json:"any,omitempty"`
	Eq             *Value           `json:"eq,omitempty"`
	Enum           []Value          `json:"enum,omitempty"`
	Min            *Number          `json:"min,omitempty"`
	Max            *Number          `json:"max,omitempty"`
	MaxLength      *int             `json:"max_length,omitempty"`
	Pattern        *string          `json:"pattern,omitempty"`
	MinItems       *int             `json:"min_items,omitempty"`
	MaxItems       *int             `json:"max_items,omitempty"`
	Items          *jsonConstraints `json:"items,omitempty"`
	Fields         []jsonArg        `json:"fields,omitempty"`
	AnyOtherFields bool             `json:"any_other_fields,omitempty"`
	Expr           *jsonExpr        `json:"expr,omitempty"`
}

// jsonExpr is a CEL expression, byte for byte, and its message.
type jsonExpr struct {
	Source  string `json:"expr"`
	Message string `json:"message,omitempty"`
}

type jsonToolPin struct {
	Digest      string          `json:"digest"`
	Description *string         `json:"description,omitempty"`
	Definition  json.RawMessage `json:"definition,omitempty"`
}

type jsonPin struct {
	Tool  string `json:"tool"`
	Args  Value  `json:"args"`
	Field string `json:"field"`
	Eq    Value  `json:"eq"`
}

// JSON returns the plan's canonical JSON form, indented, with a trailing
// newline.
func JSON(p *Plan) ([]byte, error) {
	jp := jsonPlan{
		Name:        p.Name,
		Digest:      p.Digest,
		Goal:        p.Goal,
		Order:       p.Order,
		OnViolation: p.OnViolation,
		Steps:       []jsonStep{},
	}
	if !p.Expires.IsZero() {
		s := p.Expires.UTC().Format(time.RFC3339)
		jp.Expires = &s
	}
	if u := p.Upstream; u != nil {
		jp.Upstream = &jsonUpstream{Command: u.Command, URL: u.URL, Env: append([]string{}, u.Env...)}
	}
	for _, s := range p.Steps {
		js := jsonStep{Name: s.Name, Tool: s.Tool, MaxCalls: s.MaxCalls, OnError: s.OnError, Approval: s.Approval, Args: []jsonArg{}}
		for _, a := range s.Args {
			js.Args = append(js.Args, jsonArgOf(a))
		}
		if pin := s.Pin; pin != nil {
			js.Pin = &jsonPin{Tool: pin.Tool, Args: pin.Args, Field: pin.Field, Eq: pin.Eq}
		}
		if tp := s.ToolPin; tp != nil {
			js.ToolPin = &jsonToolPin{Digest: tp.Digest, Description: tp.Description, Definition: tp.Definition}
		}
		for _, c := range s.Checks {
			js.Checks = append(js.Checks, jsonExpr{Source: c.Source, Message: c.Message})
		}
		js.Input = jsonInputOf(s.Input)
		jp.Steps = append(jp.Steps, js)
	}
	jp.Resources, jp.Prompts = jsonResourcesAndPrompts(p)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(jp); err != nil {
		return nil, fmt.Errorf("encode plan %s: %w", p.Name, err)
	}
	return b.Bytes(), nil
}

func jsonArgOf(a *Arg) jsonArg {
	return jsonArg{Name: a.Name, Optional: a.Optional, jsonConstraints: jsonConstraintsOf(a)}
}

func jsonConstraintsOf(a *Arg) jsonConstraints {
	jc := jsonConstraints{Any: a.Any, Eq: a.Eq, Enum: a.Enum, Min: a.Min, Max: a.Max, MaxLength: a.MaxLength,
		MinItems: a.MinItems, MaxItems: a.MaxItems, AnyOtherFields: a.AnyOtherFields}
	if a.Pattern != nil {
		src := a.Pattern.Source
		jc.Pattern = &src
	}
	if a.Items != nil {
		items := jsonConstraintsOf(a.Items)
		jc.Items = &items
	}
	for _, f := range a.Fields {
		jc.Fields = append(jc.Fields, jsonArgOf(f))
	}
	if a.Expr != nil {
		jc.Expr = &jsonExpr{Source: a.Expr.Source, Message: a.Expr.Message}
	}
	return jc
}
