package hclplan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/url"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Input rules (MCP 2026-07-28 multi-round requests). An upstream may answer
// a call with resultType "input_required" and input requests the client is
// to run: an elicitation (a form the user fills in, or a URL the user
// opens), an LLM sampling, a roots listing. Each of them is a channel from
// the upstream to the user or the model, so a step allows none of them
// unless its input block names the kind and its bounds:
//
//	input {
//	  max_rounds = 2
//	  elicitation {
//	    max_message_length = 200
//	    field "confirm" { type = "boolean" }
//	    field "count"   {
//	      type = "integer"
//	      min  = 1
//	      max  = 10
//	    }
//	  }
//	  elicitation_url { origins = ["https://auth.example.com"] }
//	  sampling { max_tokens = 200 }
//	  roots = true
//	}
//
// A prompt block takes the same input block.

var (
	inputSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "max_rounds"}, {Name: "roots"}},
		Blocks: []hcl.BlockHeaderSchema{
			{Type: "elicitation"}, {Type: "elicitation_url"}, {Type: "sampling"},
		},
	}
	elicitationSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "max_message_length"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "field", LabelNames: []string{"name"}}},
	}
	inputFieldSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "type", Required: true}, {Name: "max_length"}, {Name: "min"}, {Name: "max"}, {Name: "enum"}, {Name: "optional"}},
	}
	elicitationURLSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "origins", Required: true}, {Name: "max_message_length"}},
	}
	samplingSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "max_tokens", Required: true}, {Name: "max_messages"}},
	}
)

// Defaults of an input block.
const (
	DefaultMaxRounds        = 1
	DefaultMaxMessageLength = 500
	DefaultMaxMessages      = 10
)

// InputRules are the input requests a step (or prompt) lets the upstream
// make of the client. nil allows none.
type InputRules struct {
	MaxRounds   int              // input_required results one call may have
	Elicitation *ElicitationRule // form-mode elicitation; nil: refused
	URL         *URLRule         // URL-mode elicitation; nil: refused
	Sampling    *SamplingRule    // nil: refused
	Roots       bool             // roots/list allowed

	DeclRange hcl.Range
}

// ElicitationRule bounds a form-mode elicitation: its message, and the
// fields it may ask for (each answer must satisfy its field).
type ElicitationRule struct {
	MaxMessageLength int
	Fields           []*InputField // in file order
}

// InputField is one field a form may ask for.
type InputField struct {
	Name      string
	Type      string // "string", "number", "integer" or "boolean"
	MaxLength *int
	Min, Max  *float64
	Enum      []string
	Optional  bool // the form may leave it out (a form need not ask all fields)

	DeclRange hcl.Range
}

// URLRule allows URL-mode elicitations of https URLs on the listed origins.
type URLRule struct {
	Origins          []string `json:"origins"` // "https://host[:port]", as written
	MaxMessageLength int      `json:"max_message_length"`
}

// SamplingRule bounds an LLM sampling request.
type SamplingRule struct {
	MaxTokens   int `json:"max_tokens"`
	MaxMessages int `json:"max_messages"`
}

func (d *decoder) inputBlocks(blocks hcl.Blocks) *InputRules {
	for _, extra := range blocks[min(1, len(blocks)):] {
		d.errorf(extra.DefRange, "Duplicate input block", "A step has at most one input block; the first is at %s.", blocks[0].DefRange)
	}
	if len(blocks) == 0 {
		return nil
	}
	return d.input(blocks[0])
}

func (d *decoder) input(b *hcl.Block) *InputRules {
	in := &InputRules{MaxRounds: DefaultMaxRounds, DeclRange: b.DefRange}
	c := d.content(b.Body, inputSchema)
	if a := c.Attributes["max_rounds"]; a != nil {
		if n, ok := d.integer(a); ok {
			if n < 1 || n > 10 {
				d.errorf(a.Expr.Range(), "Invalid max_rounds", "max_rounds is how many input_required results one call may have: 1 to 10.")
			}
			in.MaxRounds = n
		}
	}
	if a := c.Attributes["roots"]; a != nil {
		if v, ok := d.boolean(a); ok {
			in.Roots = v
		}
	}
	one := func(kind string) *hcl.Block {
		bs := c.Blocks.OfType(kind)
		for _, extra := range bs[min(1, len(bs)):] {
			d.errorf(extra.DefRange, "Duplicate "+kind+" block", "An input block has at most one %s block; the first is at %s.", kind, bs[0].DefRange)
		}
		if len(bs) == 0 {
			return nil
		}
		return bs[0]
	}
	if eb := one("elicitation"); eb != nil {
		in.Elicitation = d.elicitation(eb)
	}
	if ub := one("elicitation_url"); ub != nil {
		in.URL = d.elicitationURL(ub)
	}
	if sb := one("sampling"); sb != nil {
		in.Sampling = d.sampling(sb)
	}
	if in.Elicitation == nil && in.URL == nil && in.Sampling == nil && !in.Roots {
		d.errorf(b.DefRange, "Empty input block", "An input block allows at least one of elicitation, elicitation_url, sampling or roots = true; without one, leave the block out (no input request is allowed).")
	}
	return in
}

func (d *decoder) messageLength(c *hcl.BodyContent) int {
	n := DefaultMaxMessageLength
	if a := c.Attributes["max_message_length"]; a != nil {
		if v, ok := d.integer(a); ok {
			if v < 1 {
				d.errorf(a.Expr.Range(), "Invalid max_message_length", "max_message_length must be at least 1.")
			}
			n = v
		}
	}
	return n
}

func (d *decoder) elicitation(b *hcl.Block) *ElicitationRule {
	c := d.content(b.Body, elicitationSchema)
	e := &ElicitationRule{MaxMessageLength: d.messageLength(c)}
	seen := map[string]*InputField{}
	for _, fb := range c.Blocks.OfType("field") {
		name := fb.Labels[0]
		if first := seen[name]; first != nil {
			d.errorf(fb.LabelRanges[0], "Duplicate field", "Field %q is already declared at %s.", name, first.DeclRange)
			continue
		}
		if name == "" {
			d.errorf(fb.LabelRanges[0], "Empty field name", "A field block names the form field it allows.")
		}
		f := d.inputField(fb)
		seen[name] = f
		e.Fields = append(e.Fields, f)
	}
	if len(e.Fields) == 0 {
		d.errorf(b.DefRange, "Elicitation without fields", "An elicitation block lists the form fields it allows, each in a field block; a form asking for anything else is refused.")
	}
	return e
}

func (d *decoder) inputField(b *hcl.Block) *InputField {
	f := &InputField{Name: b.Labels[0], DeclRange: b.DefRange}
	c := d.content(b.Body, inputFieldSchema)
	if a := c.Attributes["type"]; a != nil {
		if v, ok := d.oneOf(a, "string", "number", "integer", "boolean"); ok {
			f.Type = v
		}
	}
	only := func(name string, types ...string) *hcl.Attribute {
		a := c.Attributes[name]
		if a != nil && f.Type != "" && !slices.Contains(types, f.Type) {
			d.errorf(a.Expr.Range(), "Invalid "+name, "%s applies to a field of type %s, not %s.", name, strings.Join(types, " or "), f.Type)
			return nil
		}
		return a
	}
	if a := only("max_length", "string"); a != nil {
		if n, ok := d.integer(a); ok {
			if n < 0 {
				d.errorf(a.Expr.Range(), "Invalid max_length", "max_length must be at least 0.")
			}
			f.MaxLength = &n
		}
	}
	for _, name := range []string{"min", "max"} {
		if a := only(name, "number", "integer"); a != nil {
			if v, ok := d.value(a); ok {
				if v.IsNull() || v.Type() != cty.Number {
					d.typeError(a, "a number", v)
					continue
				}
				x, _ := v.AsBigFloat().Float64()
				if name == "min" {
					f.Min = &x
				} else {
					f.Max = &x
				}
			}
		}
	}
	if f.Min != nil && f.Max != nil && *f.Min > *f.Max {
		d.errorf(b.DefRange, "Invalid bounds", "Field %q: min %v is above max %v.", f.Name, *f.Min, *f.Max)
	}
	if a := only("enum", "string"); a != nil {
		if vs, ok := d.strList(a); ok {
			if len(vs) == 0 {
				d.errorf(a.Expr.Range(), "Empty enum", "enum lists the values the field may take; it cannot be empty.")
			}
			f.Enum = vs
		}
	}
	if a := c.Attributes["optional"]; a != nil {
		if v, ok := d.boolean(a); ok {
			f.Optional = v
		}
	}
	if f.Type == "string" && f.MaxLength == nil && f.Enum == nil {
		d.errorf(b.DefRange, "Unbounded string field", "Field %q: a string field needs max_length or enum, so that an answer is bounded.", f.Name)
	}
	return f
}

func (d *decoder) elicitationURL(b *hcl.Block) *URLRule {
	c := d.content(b.Body, elicitationURLSchema)
	u := &URLRule{MaxMessageLength: d.messageLength(c)}
	if a := c.Attributes["origins"]; a != nil {
		if vs, ok := d.strList(a); ok {
			if len(vs) == 0 {
				d.errorf(a.Expr.Range(), "Empty origins", "origins lists the https origins a URL elicitation may open; it cannot be empty.")
			}
			for i, o := range vs {
				if err := checkOrigin(o); err != nil {
					d.errorf(elementRange(a.Expr, i), "Invalid origin", "%s", err)
				}
			}
			u.Origins = vs
		}
	}
	return u
}

// checkOrigin says why o is not an https origin (scheme, host, optional
// port; no path, query, fragment or user).
func checkOrigin(o string) error {
	u, err := url.Parse(o)
	if err != nil {
		return fmt.Errorf("origin %q: %v", o, err)
	}
	if u.Scheme != "https" || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("origin %q must be https://HOST or https://HOST:PORT, with no path, query or user", o)
	}
	return nil
}

func (d *decoder) sampling(b *hcl.Block) *SamplingRule {
	c := d.content(b.Body, samplingSchema)
	s := &SamplingRule{MaxMessages: DefaultMaxMessages}
	if a := c.Attributes["max_tokens"]; a != nil {
		if n, ok := d.integer(a); ok {
			if n < 1 {
				d.errorf(a.Expr.Range(), "Invalid max_tokens", "max_tokens must be at least 1.")
			}
			s.MaxTokens = n
		}
	}
	if a := c.Attributes["max_messages"]; a != nil {
		if n, ok := d.integer(a); ok {
			if n < 1 {
				d.errorf(a.Expr.Range(), "Invalid max_messages", "max_messages must be at least 1.")
			}
			s.MaxMessages = n
		}
	}
	return s
}

// Input methods (the JSON-RPC methods an input request embeds).
const (
	MethodElicitation = "elicitation/create"
	MethodSampling    = "sampling/createMessage"
	MethodRoots       = "roots/list"
)

// CheckRequest says why the rules refuse one input request (its method and
// params as the upstream wrote them); nil allows it. A nil *InputRules
// refuses everything.
func (in *InputRules) CheckRequest(method string, params json.RawMessage) error {
	if in == nil {
		return fmt.Errorf("%s: the plan allows no input requests here", quoteMethod(method))
	}
	p, err := object(params)
	if err != nil {
		return fmt.Errorf("%s: params %v", quoteMethod(method), err)
	}
	switch method {
	case MethodElicitation:
		mode, _ := p["mode"].(string)
		switch {
		case mode == "url":
			return in.checkURL(p)
		case mode == "" || mode == "form":
			return in.checkForm(p)
		}
		return fmt.Errorf("elicitation mode %q is not one the plan allows (form, url)", limit(mode))
	case MethodSampling:
		return in.checkSampling(p)
	case MethodRoots:
		if !in.Roots {
			return errors.New("roots/list: the plan does not allow roots (roots = true)")
		}
		return nil
	}
	return fmt.Errorf("%s is not an input request the plan can allow", quoteMethod(method))
}

func quoteMethod(m string) string { return fmt.Sprintf("%q", limit(m)) }

func limit(s string) string {
	if utf8.RuneCountInString(s) > 60 {
		r := []rune(s)
		return string(r[:60]) + "…"
	}
	return s
}

func object(raw json.RawMessage) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, errors.New("must be one JSON object")
	}
	return m, nil
}

func messageOK(p map[string]any, max int) error {
	msg, ok := p["message"].(string)
	if !ok {
		return errors.New("the message must be a string")
	}
	if n := utf8.RuneCountInString(msg); n > max {
		return fmt.Errorf("the message is %d characters, the plan allows %d (max_message_length)", n, max)
	}
	return nil
}

func (in *InputRules) checkForm(p map[string]any) error {
	e := in.Elicitation
	if e == nil {
		return errors.New("elicitation (form): the plan does not allow it here")
	}
	if err := messageOK(p, e.MaxMessageLength); err != nil {
		return fmt.Errorf("elicitation (form): %v", err)
	}
	schema, ok := p["requestedSchema"].(map[string]any)
	if !ok || schema["type"] != "object" {
		return errors.New("elicitation (form): requestedSchema must be an object schema")
	}
	props, _ := schema["properties"].(map[string]any)
	if len(props) == 0 {
		return errors.New("elicitation (form): requestedSchema asks for no field")
	}
	for _, name := range sortedKeys(props) {
		f := e.field(name)
		if f == nil {
			return fmt.Errorf("elicitation (form): field %q is not one the plan allows (%s)", limit(name), e.names())
		}
		ps, _ := props[name].(map[string]any)
		t, _ := ps["type"].(string)
		if t != f.Type && !(f.Type == "number" && t == "integer") {
			return fmt.Errorf("elicitation (form): field %q is asked as type %q, the plan allows %s", limit(name), limit(t), f.Type)
		}
	}
	for _, f := range e.Fields {
		if !f.Optional {
			if _, ok := props[f.Name]; !ok {
				return fmt.Errorf("elicitation (form): the form leaves out field %q, which the plan does not mark optional", f.Name)
			}
		}
	}
	return nil
}

func (e *ElicitationRule) field(name string) *InputField {
	for _, f := range e.Fields {
		if f.Name == name {
			return f
		}
	}
	return nil
}

func (e *ElicitationRule) names() string {
	var ns []string
	for _, f := range e.Fields {
		ns = append(ns, f.Name)
	}
	return strings.Join(ns, ", ")
}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func (in *InputRules) checkURL(p map[string]any) error {
	u := in.URL
	if u == nil {
		return errors.New("elicitation (url): the plan does not allow it here")
	}
	if err := messageOK(p, u.MaxMessageLength); err != nil {
		return fmt.Errorf("elicitation (url): %v", err)
	}
	raw, _ := p["url"].(string)
	pu, err := url.Parse(raw)
	if err != nil || pu.Scheme != "https" || pu.Host == "" || pu.User != nil {
		return fmt.Errorf("elicitation (url): %q is not an https URL", limit(raw))
	}
	origin := "https://" + strings.ToLower(pu.Host)
	for _, o := range u.Origins {
		if strings.EqualFold(strings.TrimSuffix(o, "/"), origin) {
			return nil
		}
	}
	return fmt.Errorf("elicitation (url): origin %s is not on the plan's list (%s)", limit(origin), strings.Join(u.Origins, ", "))
}

func (in *InputRules) checkSampling(p map[string]any) error {
	s := in.Sampling
	if s == nil {
		return errors.New("sampling: the plan does not allow it here")
	}
	n, ok := p["maxTokens"].(json.Number)
	if !ok {
		return errors.New("sampling: maxTokens must be a number")
	}
	mt, err := n.Int64()
	if err != nil || mt < 1 {
		return fmt.Errorf("sampling: maxTokens %s is not a positive whole number", limit(n.String()))
	}
	if mt > int64(s.MaxTokens) {
		return fmt.Errorf("sampling: maxTokens %d is above the plan's max_tokens %d", mt, s.MaxTokens)
	}
	msgs, ok := p["messages"].([]any)
	if !ok || len(msgs) == 0 {
		return errors.New("sampling: messages must be a non-empty list")
	}
	if len(msgs) > s.MaxMessages {
		return fmt.Errorf("sampling: %d messages, the plan allows %d (max_messages)", len(msgs), s.MaxMessages)
	}
	if _, ok := p["tools"]; ok {
		return errors.New("sampling: a request offering tools to the model is not allowed")
	}
	return nil
}

// CheckResponse says why the client's answer to one input request (method
// and params as asked, response as the client wrote it) is refused; nil
// allows it.
func (in *InputRules) CheckResponse(method string, params, response json.RawMessage) error {
	if in == nil {
		return errors.New("the plan allows no input requests here")
	}
	r, err := object(response)
	if err != nil {
		return fmt.Errorf("the answer %v", err)
	}
	switch method {
	case MethodElicitation:
		p, _ := object(params)
		action, _ := r["action"].(string)
		switch action {
		case "decline", "cancel":
			if _, ok := r["content"]; ok && r["content"] != nil {
				return fmt.Errorf("a %s answer carries content", action)
			}
			return nil
		case "accept":
		default:
			return fmt.Errorf("elicitation answer action %q is not accept, decline or cancel", limit(action))
		}
		if mode, _ := p["mode"].(string); mode == "url" {
			if c, ok := r["content"]; ok && c != nil {
				return errors.New("a URL elicitation's answer carries content")
			}
			return nil
		}
		content, ok := r["content"].(map[string]any)
		if !ok {
			if r["content"] == nil {
				return nil // accepted with nothing filled in
			}
			return errors.New("elicitation answer content must be an object")
		}
		schema, _ := p["requestedSchema"].(map[string]any)
		asked, _ := schema["properties"].(map[string]any)
		for _, name := range sortedKeys(content) {
			if _, ok := asked[name]; !ok {
				return fmt.Errorf("elicitation answer field %q was not asked for", limit(name))
			}
			f := in.Elicitation.field(name)
			if f == nil {
				return fmt.Errorf("elicitation answer field %q is not one the plan allows", limit(name))
			}
			if err := f.check(content[name]); err != nil {
				return fmt.Errorf("elicitation answer field %q: %v", f.Name, err)
			}
		}
		return nil
	case MethodSampling:
		if role, _ := r["role"].(string); role != "assistant" && role != "user" {
			return errors.New("sampling answer role must be assistant or user")
		}
		if _, ok := r["content"]; !ok {
			return errors.New("sampling answer has no content")
		}
		return nil
	case MethodRoots:
		if _, ok := r["roots"].([]any); !ok {
			return errors.New("roots answer has no roots list")
		}
		return nil
	}
	return fmt.Errorf("%s was not asked", quoteMethod(method))
}

// check says why v is not a value f allows.
func (f *InputField) check(v any) error {
	switch f.Type {
	case "string":
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("must be a string")
		}
		if f.MaxLength != nil && utf8.RuneCountInString(s) > *f.MaxLength {
			return fmt.Errorf("%d characters, the plan allows %d", utf8.RuneCountInString(s), *f.MaxLength)
		}
		if f.Enum != nil && !slices.Contains(f.Enum, s) {
			return fmt.Errorf("%q is not one of the plan's values", limit(s))
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("must be true or false")
		}
	case "number", "integer":
		n, ok := v.(json.Number)
		if !ok {
			return fmt.Errorf("must be a number")
		}
		x, _, err := big.ParseFloat(n.String(), 10, 200, big.ToNearestEven)
		if err != nil {
			return fmt.Errorf("must be a number")
		}
		if f.Type == "integer" && !x.IsInt() {
			return fmt.Errorf("%s is not a whole number", limit(n.String()))
		}
		fx, _ := x.Float64()
		if math.IsInf(fx, 0) || (f.Min != nil && fx < *f.Min) || (f.Max != nil && fx > *f.Max) {
			return fmt.Errorf("%s is outside the plan's bounds%s", limit(n.String()), f.bounds())
		}
	}
	return nil
}

func (f *InputField) bounds() string {
	var parts []string
	if f.Min != nil {
		parts = append(parts, fmt.Sprintf("min %v", *f.Min))
	}
	if f.Max != nil {
		parts = append(parts, fmt.Sprintf("max %v", *f.Max))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// Describe says in plain words what the rules allow, one item a line, for
// plan show.
func (in *InputRules) Describe() []string {
	if in == nil {
		return nil
	}
	var out []string
	out = append(out, fmt.Sprintf("Input requests: at most %s per call", map[bool]string{true: "1 round", false: fmt.Sprintf("%d rounds", in.MaxRounds)}[in.MaxRounds == 1]))
	if e := in.Elicitation; e != nil {
		var fs []string
		for _, f := range e.Fields {
			fs = append(fs, MarkdownCode(f.Name)+" "+f.describe())
		}
		out = append(out, fmt.Sprintf("Elicitation (form), message up to %d characters, fields: %s", e.MaxMessageLength, strings.Join(fs, "; ")))
	}
	if u := in.URL; u != nil {
		out = append(out, fmt.Sprintf("Elicitation (URL) of https URLs on %s only, message up to %d characters", codeList(u.Origins), u.MaxMessageLength))
	}
	if s := in.Sampling; s != nil {
		out = append(out, fmt.Sprintf("Sampling (an LLM completion the upstream asks the client for), at most %d tokens and %d messages", s.MaxTokens, s.MaxMessages))
	}
	if in.Roots {
		out = append(out, "Roots: the upstream may ask for the client's roots")
	}
	return out
}

func (f *InputField) describe() string {
	s := f.Type
	if f.MaxLength != nil {
		s += fmt.Sprintf(", at most %d characters", *f.MaxLength)
	}
	if f.Enum != nil {
		s += ", one of " + codeList(f.Enum)
	}
	if b := f.bounds(); b != "" {
		s += b
	}
	if f.Optional {
		s += ", optional"
	}
	return s
}
