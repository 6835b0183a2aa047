package hclplan

import (
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// A plan's tests live in <plan>_test.hcl beside the plan file, never in the
// plan itself: the plan's digest is what is signed and approved, and tests
// must be able to grow without a new approval.

var (
	testRootSchema = &hcl.BodySchema{
		Blocks: []hcl.BlockHeaderSchema{{Type: "test", LabelNames: []string{"name"}}},
	}
	testSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "now"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "pin"}, {Type: "call"}},
	}
	testPinSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "step", Required: true}, {Name: "value"}, {Name: "fails"}},
	}
	testCallSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{
			{Name: "tool", Required: true}, {Name: "args"}, {Name: "expect", Required: true},
			{Name: "reason_step"}, {Name: "reason_arg"}, {Name: "reason_contains"}, {Name: "fails"},
		},
	}
)

// Expectations of a test call.
const (
	ExpectAllow = "allow"
	ExpectBlock = "block"
	ExpectHold  = "hold"
)

// TestFile is a parsed <plan>_test.hcl.
type TestFile struct {
	Filename string
	Tests    []*PlanTest
}

// PlanTest is one test block: a sequence of calls against a fresh state.
type PlanTest struct {
	Name  string
	Now   time.Time // zero: the clock of the run
	Pins  []*TestPin
	Calls []*TestCall

	DeclRange hcl.Range
}

// TestPin is the value a pinned step's pin read returns in a test.
type TestPin struct {
	Step  string
	Value Value
	Fails bool // the pin read fails

	DeclRange hcl.Range
}

// TestCall is one call of a test and what the plan must decide.
type TestCall struct {
	Tool           string
	Args           Value // a JSON object
	Expect         string
	ReasonStep     string
	ReasonArg      string
	ReasonContains string
	Fails          bool // the upstream answers this call with an error

	DeclRange hcl.Range
}

// ParseTests parses a plan test file. Like Parse, it reports every problem
// with its source range and returns a TestFile only without errors.
func ParseTests(filename string, src []byte) (*TestFile, hcl.Diagnostics) {
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, diags
	}
	d := &decoder{diags: diags}
	tf := &TestFile{Filename: filename}
	c := d.content(file.Body, testRootSchema)
	seen := map[string]hcl.Range{}
	for _, b := range c.Blocks.OfType("test") {
		name := b.Labels[0]
		if strings.TrimSpace(name) == "" {
			d.errorf(b.LabelRanges[0], "Empty test name", "A test is named, such as test \"refund within bounds\" { ... }.")
		}
		if first, dup := seen[name]; dup {
			d.errorf(b.LabelRanges[0], "Duplicate test name", "A test named %q is already declared at %s.", name, first)
			continue
		}
		seen[name] = b.DefRange
		tf.Tests = append(tf.Tests, d.planTest(b))
	}
	if len(c.Blocks) == 0 && !d.diags.HasErrors() {
		d.errorf(file.Body.MissingItemRange(), "No test block", "A plan test file holds test \"name\" { call { ... } } blocks.")
	}
	if d.diags.HasErrors() {
		return nil, d.diags
	}
	return tf, d.diags
}

func (d *decoder) planTest(b *hcl.Block) *PlanTest {
	t := &PlanTest{Name: b.Labels[0], DeclRange: b.DefRange}
	c := d.content(b.Body, testSchema)
	if a := c.Attributes["now"]; a != nil {
		if s, ok := d.str(a); ok {
			now, err := time.Parse(time.RFC3339, s)
			if err != nil {
				d.errorf(a.Expr.Range(), "Invalid now", "now must be an RFC 3339 time such as \"2026-12-31T23:59:59Z\"; %q is not.", s)
			}
			t.Now = now
		}
	}
	pinned := map[string]bool{}
	for _, pb := range c.Blocks.OfType("pin") {
		p := &TestPin{DeclRange: pb.DefRange}
		pc := d.content(pb.Body, testPinSchema)
		if a := pc.Attributes["step"]; a != nil {
			p.Step, _ = d.str(a)
			if pinned[p.Step] {
				d.errorf(a.Expr.Range(), "Duplicate pin", "The pin of step %q is already given in this test.", p.Step)
			}
			pinned[p.Step] = true
		}
		if a := pc.Attributes["fails"]; a != nil {
			p.Fails, _ = d.boolean(a)
		}
		a := pc.Attributes["value"]
		switch {
		case a != nil && p.Fails:
			d.errorf(a.Range, "pin with both value and fails", "A pin read either returns a value or fails; give one of the two.")
		case a != nil:
			p.Value, _ = d.json(a)
		case !p.Fails:
			d.errorf(pb.DefRange, "pin without value", "Give value = ... (what the pin read returns) or fails = true.")
		}
		t.Pins = append(t.Pins, p)
	}
	for _, cb := range c.Blocks.OfType("call") {
		t.Calls = append(t.Calls, d.testCall(cb))
	}
	if len(t.Calls) == 0 {
		d.errorf(b.DefRange, "Test has no calls", "A test lists at least one call { tool = ..., expect = ... } block.")
	}
	return t
}

func (d *decoder) testCall(b *hcl.Block) *TestCall {
	tc := &TestCall{DeclRange: b.DefRange, Args: Value{v: map[string]any{}}}
	c := d.content(b.Body, testCallSchema)
	if a := c.Attributes["tool"]; a != nil {
		tc.Tool, _ = d.str(a)
	}
	if a := c.Attributes["args"]; a != nil {
		if v, ok := d.json(a); ok {
			if _, isObj := v.v.(map[string]any); !isObj {
				d.errorf(a.Expr.Range(), "Invalid call args", "args must be an object of the tool's arguments, such as { order_id = \"4711\" }.")
			} else {
				tc.Args = v
			}
		}
	}
	if a := c.Attributes["expect"]; a != nil {
		tc.Expect, _ = d.oneOf(a, ExpectAllow, ExpectBlock, ExpectHold)
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"reason_step", &tc.ReasonStep}, {"reason_arg", &tc.ReasonArg}, {"reason_contains", &tc.ReasonContains}} {
		if a := c.Attributes[f.name]; a != nil {
			*f.dst, _ = d.str(a)
		}
	}
	if a := c.Attributes["fails"]; a != nil {
		tc.Fails, _ = d.boolean(a)
	}
	return tc
}

// Object returns the value as an object (the arguments of a call), or nil.
// The map is the value's own: callers must not modify it.
func (v Value) Object() map[string]any {
	m, _ := v.v.(map[string]any)
	return m
}
