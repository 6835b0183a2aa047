package hclplan

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

var (
	rootSchema = &hcl.BodySchema{
		Blocks: []hcl.BlockHeaderSchema{{Type: "plan", LabelNames: []string{"name"}}},
	}
	planSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{
			{Name: "goal", Required: true},
			{Name: "expires"},
			{Name: "order"},
			{Name: "on_violation"},
		},
		Blocks: []hcl.BlockHeaderSchema{
			{Type: "upstream"},
			{Type: "step", LabelNames: []string{"name"}},
			{Type: "resource", LabelNames: []string{"name"}},
			{Type: "prompt", LabelNames: []string{"name"}},
		},
	}
	upstreamSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "command"}, {Name: "url"}, {Name: "env"}},
	}
	stepSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{
			{Name: "tool", Required: true},
			{Name: "max_calls"},
			{Name: "on_error"},
			{Name: "approval"},
		},
		Blocks: []hcl.BlockHeaderSchema{
			{Type: "arg", LabelNames: []string{"name"}},
			{Type: "pin"},
			{Type: "tool_pin"},
			{Type: "check"},
			{Type: "input"},
		},
	}
	argSchema = &hcl.BodySchema{
		Attributes: append([]hcl.AttributeSchema{
			{Name: "eq"}, {Name: "enum"}, {Name: "min"}, {Name: "max"},
			{Name: "max_length"}, {Name: "pattern"}, {Name: "any"}, {Name: "optional"},
		}, v2ArgAttributes...),
		Blocks: v2ArgBlocks,
	}
	pinSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{
			{Name: "tool", Required: true},
			{Name: "args"},
			{Name: "field", Required: true},
			{Name: "eq", Required: true},
		},
	}
)

// nameRE is what plan and step names may look like: they end up in branch
// names and file paths of approval pull requests.
var (
	nameRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	envVarRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// Parse parses and validates the exact bytes of one plan file. It returns a
// Plan only when there are no error diagnostics; all problems found are
// reported, not only the first.
func Parse(filename string, src []byte) (*Plan, hcl.Diagnostics) {
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, diags
	}
	d := &decoder{diags: diags, src: src}
	p := d.root(file.Body, filename)
	if d.diags.HasErrors() {
		return nil, d.diags
	}
	p.Filename = filename
	p.Digest = Digest(src)
	return p, d.diags
}

type decoder struct {
	diags hcl.Diagnostics
	src   []byte // the file's bytes, to place CEL errors inside a string
}

func (d *decoder) errorf(rng hcl.Range, summary, detail string, args ...any) {
	r := rng
	d.diags = append(d.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf(detail, args...),
		Subject:  &r,
	})
}

func (d *decoder) content(body hcl.Body, schema *hcl.BodySchema) *hcl.BodyContent {
	c, diags := body.Content(schema)
	d.diags = append(d.diags, diags...)
	return c
}

func (d *decoder) root(body hcl.Body, filename string) *Plan {
	c := d.content(body, rootSchema)
	plans := c.Blocks.OfType("plan")
	if len(plans) == 0 {
		rng := body.MissingItemRange()
		d.errorf(rng, "No plan block", "A plan file must contain exactly one plan block, such as plan \"refund-4711\" { ... }.")
		return nil
	}
	for _, extra := range plans[1:] {
		d.errorf(extra.DefRange, "More than one plan", "A plan file holds exactly one plan; the first is declared at %s. Put each plan in its own file.", plans[0].DefRange)
	}
	return d.plan(plans[0])
}

func (d *decoder) plan(b *hcl.Block) *Plan {
	p := &Plan{
		Name:        b.Labels[0],
		Order:       OrderSequential,
		OnViolation: ViolationBlock,
		DeclRange:   b.DefRange,
	}
	d.checkName(b.LabelRanges[0], "plan", p.Name)
	c := d.content(b.Body, planSchema)
	if a := c.Attributes["goal"]; a != nil {
		if s, ok := d.str(a); ok {
			if strings.TrimSpace(s) == "" {
				d.errorf(a.Expr.Range(), "Empty goal", "The goal says in plain words what the plan is for; approvers read it first.")
			}
			p.Goal = s
		}
	}
	if a := c.Attributes["expires"]; a != nil {
		if s, ok := d.str(a); ok {
			t, err := time.Parse(time.RFC3339, s)
			if err != nil {
				d.errorf(a.Expr.Range(), "Invalid expires", "expires must be an RFC 3339 time such as \"2026-12-31T23:59:59Z\"; %q is not.", s)
			} else {
				p.Expires = t
				p.ExpiresRange = a.Expr.Range()
			}
		}
	}
	if a := c.Attributes["order"]; a != nil {
		if s, ok := d.oneOf(a, "sequential", "any"); ok {
			p.Order = Order(s)
		}
	}
	if a := c.Attributes["on_violation"]; a != nil {
		if s, ok := d.oneOf(a, "block", "hold"); ok {
			p.OnViolation = OnViolation(s)
		}
	}
	ups := c.Blocks.OfType("upstream")
	for _, extra := range ups[min(1, len(ups)):] {
		d.errorf(extra.DefRange, "Duplicate upstream block", "A plan has at most one upstream block; the first is at %s.", ups[0].DefRange)
	}
	if len(ups) > 0 {
		p.Upstream = d.upstream(ups[0])
	}
	seen := map[string]*hcl.Block{}
	for _, sb := range c.Blocks.OfType("step") {
		name := sb.Labels[0]
		if first, dup := seen[name]; dup {
			d.errorf(sb.LabelRanges[0], "Duplicate step name", "A step named %q is already declared at %s; step names must be unique.", name, first.DefRange)
			continue
		}
		seen[name] = sb
		if s := d.step(sb); s != nil {
			s.Index = len(p.Steps)
			p.Steps = append(p.Steps, s)
		}
	}
	d.agreeToolPins(p.Steps)
	p.Resources = d.resources(c.Blocks.OfType("resource"))
	p.Prompts = d.prompts(c.Blocks.OfType("prompt"))
	if len(seen) == 0 && len(p.Resources) == 0 && len(p.Prompts) == 0 {
		d.errorf(b.DefRange, "Plan has no steps", "A plan must allow at least one tool call: add a step block.")
	}
	return p
}

func (d *decoder) checkName(rng hcl.Range, what, name string) {
	if !nameRE.MatchString(name) {
		d.errorf(rng, "Invalid "+what+" name", "A %s name is 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit; %q is not.", what, name)
	}
}

func (d *decoder) upstream(b *hcl.Block) *Upstream {
	u := &Upstream{DeclRange: b.DefRange}
	c := d.content(b.Body, upstreamSchema)
	cmd, hasCmd := c.Attributes["command"]
	uattr, hasURL := c.Attributes["url"]
	switch {
	case hasCmd && hasURL:
		d.errorf(uattr.NameRange, "Upstream has both command and url", "An upstream is either a stdio command or a streamable HTTP url, not both.")
	case !hasCmd && !hasURL:
		d.errorf(b.DefRange, "Upstream has neither command nor url", "Give command = [\"program\", \"arg\"] for a stdio upstream or url = \"http://...\" for streamable HTTP.")
	}
	if hasCmd {
		if list, ok := d.strList(cmd); ok {
			if len(list) == 0 || list[0] == "" {
				d.errorf(cmd.Expr.Range(), "Empty upstream command", "command names the program to run, then its arguments.")
			}
			u.Command = list
		}
	}
	if hasURL {
		if s, ok := d.str(uattr); ok {
			pu, err := url.Parse(s)
			if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
				d.errorf(uattr.Expr.Range(), "Invalid upstream url", "url must be an http:// or https:// URL of a streamable HTTP MCP server; %q is not.", s)
			}
			u.URL = s
		}
	}
	if a := c.Attributes["env"]; a != nil {
		if list, ok := d.strList(a); ok {
			seen := map[string]bool{}
			for i, n := range list {
				if !envVarRE.MatchString(n) {
					d.errorf(a.Expr.Range(), "Invalid environment variable name", "%q is not a variable name.", n)
				} else if IsOwnSecret(n) {
					d.errorf(elementRange(a.Expr, i), "planlock's own secret", "%s is one of planlock's own variables (its tokens and signing credentials); an upstream never gets it. Give the upstream its own variable.", n)
				} else if seen[n] {
					d.errorf(a.Expr.Range(), "Duplicate environment variable", "%q is listed twice.", n)
				}
				seen[n] = true
			}
			if hasURL && len(list) > 0 {
				d.errorf(a.NameRange, "env needs a stdio upstream", "env lists variables passed to a stdio upstream command; an HTTP upstream gets none.")
			}
			u.Env = list
		}
	}
	return u
}

// elementRange is the range of a list's i-th element where the list is
// written out, else the whole expression's.
func elementRange(e hcl.Expression, i int) hcl.Range {
	if t, ok := e.(*hclsyntax.TupleConsExpr); ok && i < len(t.Exprs) {
		return t.Exprs[i].Range()
	}
	return e.Range()
}

func (d *decoder) step(b *hcl.Block) *Step {
	s := &Step{
		Name:      b.Labels[0],
		MaxCalls:  1,
		OnError:   ErrorContinue,
		Approval:  ApprovalNone,
		DeclRange: b.DefRange,
		byName:    map[string]*Arg{},
	}
	d.checkName(b.LabelRanges[0], "step", s.Name)
	c := d.content(b.Body, stepSchema)
	if a := c.Attributes["tool"]; a != nil {
		if t, ok := d.str(a); ok {
			if t == "" {
				d.errorf(a.Expr.Range(), "Empty tool name", "tool names the MCP tool this step allows.")
			}
			s.Tool = t
			s.ToolRange = a.Expr.Range()
		}
	}
	if a := c.Attributes["max_calls"]; a != nil {
		if n, ok := d.integer(a); ok {
			if n < 1 {
				d.errorf(a.Expr.Range(), "Invalid max_calls", "max_calls must be at least 1; to allow no call, remove the step.")
			}
			s.MaxCalls = n
		}
	}
	if a := c.Attributes["on_error"]; a != nil {
		if v, ok := d.oneOf(a, "continue", "hold"); ok {
			s.OnError = OnError(v)
		}
	}
	if a := c.Attributes["approval"]; a != nil {
		if v, ok := d.oneOf(a, "none", "each"); ok {
			s.Approval = Approval(v)
		}
	}
	for _, ab := range c.Blocks.OfType("arg") {
		name := ab.Labels[0]
		if first := s.byName[name]; first != nil {
			d.errorf(ab.LabelRanges[0], "Duplicate argument", "Argument %q is already constrained at %s in this step; combine the constraints in one arg block.", name, first.DeclRange)
			continue
		}
		arg := d.arg(ab)
		s.Args = append(s.Args, arg)
		s.byName[name] = arg
	}
	pins := c.Blocks.OfType("pin")
	for _, extra := range pins[min(1, len(pins)):] {
		d.errorf(extra.DefRange, "Duplicate pin block", "A step has at most one pin; the first is at %s.", pins[0].DefRange)
	}
	if len(pins) > 0 {
		s.Pin = d.pin(pins[0])
	}
	tps := c.Blocks.OfType("tool_pin")
	for _, extra := range tps[min(1, len(tps)):] {
		d.errorf(extra.DefRange, "Duplicate tool_pin block", "A step has at most one tool_pin; the first is at %s.", tps[0].DefRange)
	}
	if len(tps) > 0 {
		s.ToolPin = d.toolPin(tps[0], s.Tool)
	}
	for _, cb := range c.Blocks.OfType("check") {
		if e := d.check(cb, s); e != nil {
			s.Checks = append(s.Checks, e)
		}
	}
	s.Input = d.inputBlocks(c.Blocks.OfType("input"))
	return s
}

func (d *decoder) arg(b *hcl.Block) *Arg {
	a := &Arg{Name: b.Labels[0], DeclRange: b.DefRange}
	if a.Name == "" {
		d.errorf(b.LabelRanges[0], "Empty argument name", "An arg block names the tool argument it constrains.")
	}
	return d.constraints(b, a, argSchema, 0)
}

// constraints decodes the constraint set of an arg, items or field block
// into a; depth is how deep the block is nested inside an arg.
func (d *decoder) constraints(b *hcl.Block, a *Arg, schema *hcl.BodySchema, depth int) *Arg {
	before := len(d.diags)
	c := d.content(b.Body, schema)
	malformed := d.diags[before:].HasErrors()
	attrs := c.Attributes
	if at := attrs["optional"]; at != nil {
		a.Optional, _ = d.boolean(at)
	}
	if at := attrs["any"]; at != nil {
		a.Any, _ = d.boolean(at)
	}
	if at := attrs["eq"]; at != nil {
		if v, ok := d.json(at); ok {
			a.Eq = &v
		}
	}
	if at := attrs["enum"]; at != nil {
		if v, ok := d.json(at); ok {
			list, isList := v.v.([]any)
			switch {
			case !isList:
				d.errorf(at.Expr.Range(), "Invalid enum", "enum must be a list of allowed values, such as [\"EUR\", \"USD\"].")
			case len(list) == 0:
				d.errorf(at.Expr.Range(), "Empty enum", "An empty enum allows no value; list at least one.")
			default:
				a.Enum = make([]Value, len(list))
				for i, e := range list {
					a.Enum[i] = Value{v: e}
				}
			}
		}
	}
	if at := attrs["min"]; at != nil {
		a.Min = d.number(at)
	}
	if at := attrs["max"]; at != nil {
		a.Max = d.number(at)
	}
	if a.Min != nil && a.Max != nil && a.Min.Cmp(*a.Max) > 0 {
		at := attrs["min"]
		d.errorf(hcl.RangeBetween(at.Range, attrs["max"].Range), "min is greater than max", "min = %s and max = %s allow no value.", a.Min, a.Max)
	}
	if at := attrs["max_length"]; at != nil {
		if n, ok := d.integer(at); ok {
			if n < 0 {
				d.errorf(at.Expr.Range(), "Invalid max_length", "max_length must be 0 or more.")
			}
			a.MaxLength = &n
		}
	}
	if at := attrs["pattern"]; at != nil {
		if s, ok := d.str(at); ok {
			p, err := CompilePattern(s)
			if err != nil {
				d.errorf(at.Expr.Range(), "Invalid pattern", "pattern must be an RE2 regular expression: %s.", err)
			} else {
				a.Pattern = p
			}
		}
	}
	constraints := 0
	for _, n := range []string{"eq", "enum", "min", "max", "max_length", "pattern"} {
		if attrs[n] != nil {
			constraints++
		}
	}
	constraints += d.constraintsV2(c, a, depth)
	name := constraintName(a, depth)
	switch {
	case a.Any && constraints > 0:
		d.errorf(attrs["any"].Range, "any combined with other constraints", "any = true accepts every value, so the other constraints on %s would never apply; remove one or the other.", name)
	case malformed:
		// An unknown attribute was probably meant as a constraint; its
		// diagnostic says enough.
	case !a.Any && constraints == 0 && attrs["any"] == nil:
		d.errorf(b.DefRange, "Argument has no constraint", "Constrain %s with eq, enum, min, max, max_length or pattern, or write any = true to accept every value.", name)
	case !a.Any && constraints == 0:
		d.errorf(attrs["any"].Range, "Argument has no constraint", "any = false with no other constraint says nothing about %s; constrain it or write any = true.", name)
	}
	return a
}

func (d *decoder) pin(b *hcl.Block) *Pin {
	p := &Pin{DeclRange: b.DefRange, Args: Value{v: map[string]any{}}}
	c := d.content(b.Body, pinSchema)
	if a := c.Attributes["tool"]; a != nil {
		if s, ok := d.str(a); ok {
			if s == "" {
				d.errorf(a.Expr.Range(), "Empty pin tool", "tool names the MCP tool the proxy calls to read the pinned value.")
			}
			p.Tool = s
		}
	}
	if a := c.Attributes["args"]; a != nil {
		if v, ok := d.json(a); ok {
			if _, isObj := v.v.(map[string]any); !isObj {
				d.errorf(a.Expr.Range(), "Invalid pin args", "args must be an object of the pin tool's arguments, such as { path = \"f/x\" }.")
			} else {
				p.Args = v
			}
		}
	}
	if a := c.Attributes["field"]; a != nil {
		if s, ok := d.str(a); ok {
			if s == "" || strings.HasPrefix(s, ".") || strings.HasSuffix(s, ".") || strings.Contains(s, "..") {
				d.errorf(a.Expr.Range(), "Invalid pin field", "field is a dotted path into the pin call's JSON result, such as \"hash\" or \"script.hash\".")
			}
			p.Field = s
		}
	}
	if a := c.Attributes["eq"]; a != nil {
		if v, ok := d.json(a); ok {
			p.Eq = v
		}
	}
	return p
}

// Lookup follows the pin's dotted field path into a decoded JSON document.
func (p *Pin) Lookup(doc any) (any, bool) {
	cur := doc
	for _, part := range strings.Split(p.Field, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		cur, ok = m[part]
		if !ok {
			return nil, false
		}
	}
	return cur, true
}

// value evaluates a constant expression: plans have no variables or functions.
func (d *decoder) value(a *hcl.Attribute) (cty.Value, bool) {
	v, diags := a.Expr.Value(nil)
	d.diags = append(d.diags, diags...)
	if diags.HasErrors() {
		return cty.NilVal, false
	}
	return v, true
}

func (d *decoder) typeError(a *hcl.Attribute, want string, got cty.Value) {
	d.errorf(a.Expr.Range(), "Incorrect attribute value type", "%s must be %s, not %s.", a.Name, want, friendlyType(got))
}

func friendlyType(v cty.Value) string {
	if v.IsNull() {
		return "null"
	}
	t := v.Type()
	switch {
	case t == cty.String:
		return "a string"
	case t == cty.Number:
		return "a number"
	case t == cty.Bool:
		return "a bool"
	case t.IsTupleType() || t.IsListType() || t.IsSetType():
		return "a list"
	case t.IsObjectType() || t.IsMapType():
		return "an object"
	}
	return t.FriendlyName()
}

func (d *decoder) str(a *hcl.Attribute) (string, bool) {
	v, ok := d.value(a)
	if !ok {
		return "", false
	}
	if v.IsNull() || v.Type() != cty.String {
		d.typeError(a, "a string", v)
		return "", false
	}
	return v.AsString(), true
}

func (d *decoder) oneOf(a *hcl.Attribute, allowed ...string) (string, bool) {
	s, ok := d.str(a)
	if !ok {
		return "", false
	}
	for _, x := range allowed {
		if s == x {
			return s, true
		}
	}
	d.errorf(a.Expr.Range(), "Invalid "+a.Name, "%s must be %s; %q is not.", a.Name, quoteList(allowed), s)
	return "", false
}

func quoteList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	if len(q) == 2 {
		return q[0] + " or " + q[1]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

func (d *decoder) strList(a *hcl.Attribute) ([]string, bool) {
	v, ok := d.value(a)
	if !ok {
		return nil, false
	}
	t := v.Type()
	if v.IsNull() || !(t.IsTupleType() || t.IsListType()) {
		d.typeError(a, "a list of strings", v)
		return nil, false
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsNull() || e.Type() != cty.String {
			d.typeError(a, "a list of strings", v)
			return nil, false
		}
		out = append(out, e.AsString())
	}
	return out, true
}

func (d *decoder) boolean(a *hcl.Attribute) (bool, bool) {
	v, ok := d.value(a)
	if !ok {
		return false, false
	}
	if v.IsNull() || v.Type() != cty.Bool {
		d.typeError(a, "true or false", v)
		return false, false
	}
	return v.True(), true
}

func (d *decoder) integer(a *hcl.Attribute) (int, bool) {
	v, ok := d.value(a)
	if !ok {
		return 0, false
	}
	if v.IsNull() || v.Type() != cty.Number {
		d.typeError(a, "a whole number", v)
		return 0, false
	}
	bf := v.AsBigFloat()
	i, acc := bf.Int64()
	if acc != big.Exact || i > 1<<31 || i < -(1<<31) {
		d.errorf(a.Expr.Range(), "Invalid "+a.Name, "%s must be a whole number up to 2147483648.", a.Name)
		return 0, false
	}
	return int(i), true
}

func (d *decoder) number(a *hcl.Attribute) *Number {
	v, ok := d.value(a)
	if !ok {
		return nil
	}
	if v.IsNull() || v.Type() != cty.Number {
		d.typeError(a, "a number", v)
		return nil
	}
	text, err := numberText(v.AsBigFloat())
	if err != nil {
		d.errorf(a.Expr.Range(), "Invalid number", "%s: %s.", a.Name, err)
		return nil
	}
	n, err := ParseNumber(text)
	if err != nil {
		d.errorf(a.Expr.Range(), "Invalid number", "%s: %s.", a.Name, err)
		return nil
	}
	return &n
}

func (d *decoder) json(a *hcl.Attribute) (Value, bool) {
	v, ok := d.value(a)
	if !ok {
		return Value{}, false
	}
	j, err := ctyToJSON(v)
	if err != nil {
		d.errorf(a.Expr.Range(), "Invalid value", "%s must be a JSON value (string, number, bool, null, list or object): %s.", a.Name, err)
		return Value{}, false
	}
	return Value{v: j}, true
}

// numberText renders an HCL number as exact JSON number text within
// CheckNumber's bounds. The magnitude is checked first: rendering 1e-999999
// in decimal takes minutes.
func numberText(f *big.Float) (string, error) {
	// 2^1400 is about 1e421: anything beyond is out of bounds whatever its
	// text (the exact bound is checked on the text below).
	if exp := f.MantExp(nil); f.IsInf() || (f.Sign() != 0 && (exp > 1400 || exp < -1400)) {
		return "", fmt.Errorf("a number with an exponent beyond ±%d is refused", MaxNumberExponent)
	}
	var s string
	if f.IsInt() && f.MantExp(nil) <= int(f.Prec()) {
		// Exact: the integer fits the mantissa.
		i, _ := f.Int(nil)
		s = i.String()
	} else {
		// The shortest text that reads back as f; big.Float writes
		// exponents as "e+06", which JSON accepts.
		s = f.Text('g', -1)
	}
	if err := CheckNumber(s); err != nil {
		return "", err
	}
	return s, nil
}

func ctyToJSON(v cty.Value) (any, error) {
	if !v.IsKnown() {
		return nil, fmt.Errorf("value is not known")
	}
	if v.IsNull() {
		return nil, nil
	}
	t := v.Type()
	switch {
	case t == cty.String:
		return v.AsString(), nil
	case t == cty.Bool:
		return v.True(), nil
	case t == cty.Number:
		s, err := numberText(v.AsBigFloat())
		if err != nil {
			return nil, err
		}
		return json.Number(s), nil
	case t.IsTupleType() || t.IsListType() || t.IsSetType():
		out := []any{}
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			j, err := ctyToJSON(e)
			if err != nil {
				return nil, err
			}
			out = append(out, j)
		}
		return out, nil
	case t.IsObjectType() || t.IsMapType():
		out := map[string]any{}
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			j, err := ctyToJSON(e)
			if err != nil {
				return nil, err
			}
			out[k.AsString()] = j
		}
		return out, nil
	}
	return nil, fmt.Errorf("unsupported type %s", t.FriendlyName())
}
