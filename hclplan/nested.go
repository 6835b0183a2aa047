package hclplan

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// The v2 additions to an arg block: arrays (items, min_items, max_items),
// objects (field, any_other_fields) and a CEL expression (expr, message).
// The same constraint set applies inside items and field blocks.
var (
	v2ArgAttributes = []hcl.AttributeSchema{
		{Name: "min_items"}, {Name: "max_items"}, {Name: "any_other_fields"},
		{Name: "expr"}, {Name: "message"},
	}
	v2ArgBlocks = []hcl.BlockHeaderSchema{
		{Type: "items"},
		{Type: "field", LabelNames: []string{"name"}},
	}
	// fieldSchema is an arg's: a field may be optional like an argument.
	fieldSchema = argSchema
	// itemsSchema is an arg's without optional: an element is never absent.
	itemsSchema = &hcl.BodySchema{Attributes: withoutAttr(argSchema.Attributes, "optional"), Blocks: v2ArgBlocks}
)

// maxNesting bounds how deep items and field blocks nest, so that checking a
// value recurses a bounded number of times whatever the value.
const maxNesting = 32

func withoutAttr(attrs []hcl.AttributeSchema, name string) []hcl.AttributeSchema {
	var out []hcl.AttributeSchema
	for _, a := range attrs {
		if a.Name != name {
			out = append(out, a)
		}
	}
	return out
}

// constraintName names a constraint set in diagnostics: an argument or field
// by its quoted name, an items block as "each item".
func constraintName(a *Arg, depth int) string {
	if depth > 0 && a.Name == "" {
		return "each item"
	}
	return strconv.Quote(a.Name)
}

// constraintsV2 decodes the v2 attributes and blocks of one constraint set
// into a and returns how many constraints they add.
func (d *decoder) constraintsV2(c *hcl.BodyContent, a *Arg, depth int) int {
	attrs := c.Attributes
	n := 0
	count := func(name string) *int {
		at := attrs[name]
		if at == nil {
			return nil
		}
		v, ok := d.integer(at)
		if !ok {
			return nil
		}
		if v < 0 {
			d.errorf(at.Expr.Range(), "Invalid "+name, "%s must be 0 or more.", name)
		}
		n++
		return &v
	}
	a.MinItems = count("min_items")
	a.MaxItems = count("max_items")
	if a.MinItems != nil && a.MaxItems != nil && *a.MinItems > *a.MaxItems {
		d.errorf(hcl.RangeBetween(attrs["min_items"].Range, attrs["max_items"].Range), "min_items is greater than max_items", "min_items = %d and max_items = %d allow no array.", *a.MinItems, *a.MaxItems)
	}

	items := c.Blocks.OfType("items")
	fields := c.Blocks.OfType("field")
	if (len(items) > 0 || len(fields) > 0) && depth >= maxNesting {
		d.errorf(c.Blocks[0].DefRange, "Constraints nested too deep", "items and field blocks nest at most %d levels.", maxNesting)
		return n + 1
	}
	for _, extra := range items[min(1, len(items)):] {
		d.errorf(extra.DefRange, "Duplicate items block", "A constraint set has at most one items block; the first is at %s.", items[0].DefRange)
	}
	if len(items) > 0 {
		a.Items = d.constraints(items[0], &Arg{DeclRange: items[0].DefRange}, itemsSchema, depth+1)
		n++
	}
	seen := map[string]*Arg{}
	for _, fb := range fields {
		name := fb.Labels[0]
		if name == "" {
			d.errorf(fb.LabelRanges[0], "Empty field name", "A field block names the object key it constrains.")
			continue
		}
		if first := seen[name]; first != nil {
			d.errorf(fb.LabelRanges[0], "Duplicate field", "Field %q is already constrained at %s; combine the constraints in one field block.", name, first.DeclRange)
			continue
		}
		f := d.constraints(fb, &Arg{Name: name, DeclRange: fb.DefRange}, fieldSchema, depth+1)
		seen[name] = f
		a.Fields = append(a.Fields, f)
	}
	if len(fields) > 0 {
		n++
	}
	if at := attrs["any_other_fields"]; at != nil {
		a.AnyOtherFields, _ = d.boolean(at)
		if len(fields) == 0 {
			d.errorf(at.Range, "any_other_fields without field blocks", "any_other_fields says whether keys that no field block declares are accepted; add field blocks, or use any = true for any object.")
		}
	}
	if len(items) > 0 && len(fields) > 0 {
		d.errorf(fields[0].DefRange, "items and field together", "items constrains an array and field an object; one value cannot be both.")
	}
	d.contradictoryKinds(attrs, a, constraintName(a, depth))
	if at := attrs["expr"]; at != nil {
		a.Expr = d.expr(at, attrs["message"], varSelf, &sizeHints{self: a})
		n++
	} else if at := attrs["message"]; at != nil {
		d.errorf(at.Range, "message without expr", "message is what a call is told when the expr check fails; add expr or remove message.")
	}
	return n
}

// contradictoryKinds reports constraints that need different JSON types, so
// that no value could ever pass (pattern with items, min with field, ...).
func (d *decoder) contradictoryKinds(attrs hcl.Attributes, a *Arg, name string) {
	type need struct {
		what  string
		kinds string // the JSON types it accepts
		v2    bool
	}
	var needs []need
	add := func(set bool, what, kinds string, v2 bool) {
		if set {
			needs = append(needs, need{what, kinds, v2})
		}
	}
	add(attrs["pattern"] != nil, "pattern", "string", false)
	add(attrs["min"] != nil || attrs["max"] != nil, "min/max", "number", false)
	add(attrs["max_length"] != nil, "max_length", "string array", false)
	add(a.Items != nil || a.MinItems != nil || a.MaxItems != nil, "items/min_items/max_items", "array", true)
	add(len(a.Fields) > 0, "field", "object", true)
	for i := range needs {
		for j := i + 1; j < len(needs); j++ {
			// Two v1 constraints that contradict each other were valid in
			// v1 (the argument just never passes); v1 plans keep their meaning.
			if !needs[i].v2 && !needs[j].v2 {
				continue
			}
			if !sharesWord(needs[i].kinds, needs[j].kinds) {
				d.errorf(a.DeclRange, "Contradictory constraints", "%s needs %s but %s needs %s: no value of %s could pass.",
					needs[i].what, orWords(needs[i].kinds), needs[j].what, orWords(needs[j].kinds), name)
				return
			}
		}
	}
}

func sharesWord(a, b string) bool {
	for _, x := range strings.Fields(a) {
		for _, y := range strings.Fields(b) {
			if x == y {
				return true
			}
		}
	}
	return false
}

func orWords(s string) string {
	w := strings.Fields(s)
	for i, x := range w {
		if strings.IndexByte("aeiou", x[0]) >= 0 {
			w[i] = "an " + x
		} else {
			w[i] = "a " + x
		}
	}
	return strings.Join(w, " or ")
}

// checkValue reports whether v satisfies every constraint of a, including
// the nested ones. It returns "" or the reason, and where below the argument
// the failing value is, such as `[2].oldText`.
func (a *Arg) checkValue(v any) (path, reason string) {
	if r := a.check(v); r != "" || a.Any {
		return "", r
	}
	if a.Items != nil || a.MinItems != nil || a.MaxItems != nil {
		list, ok := v.([]any)
		if !ok {
			return "", fmt.Sprintf("= %s, want an array", describe(v))
		}
		if a.MinItems != nil && len(list) < *a.MinItems {
			return "", fmt.Sprintf("has %d items, fewer than the minimum %d", len(list), *a.MinItems)
		}
		if a.MaxItems != nil && len(list) > *a.MaxItems {
			return "", fmt.Sprintf("has %d items, more than the maximum %d", len(list), *a.MaxItems)
		}
		if a.Items != nil {
			for i, e := range list {
				if p, r := a.Items.checkValue(e); r != "" {
					return "[" + strconv.Itoa(i) + "]" + p, r
				}
			}
		}
	}
	if len(a.Fields) > 0 {
		obj, ok := v.(map[string]any)
		if !ok {
			return "", fmt.Sprintf("= %s, want an object", describe(v))
		}
		if p, r := a.checkFields(obj); r != "" {
			return p, r
		}
	}
	if a.Expr != nil {
		if _, p, r := a.Expr.boundInput(v); r != "" {
			return p, r
		}
		if r := a.Expr.evalReason(v); r != "" {
			return "", r
		}
	}
	return "", ""
}

// checkFields checks an object against a's field blocks; as for arguments,
// a key no field declares is reported before any other violation.
func (a *Arg) checkFields(obj map[string]any) (path, reason string) {
	present := 0
	for _, f := range a.Fields {
		if _, ok := obj[f.Name]; ok {
			present++
		}
	}
	if present < len(obj) && !a.AnyOtherFields {
		var bad []string
		for k := range obj {
			if a.field(k) == nil {
				bad = append(bad, k)
			}
		}
		sort.Strings(bad)
		return keyPath(bad[0]), "is not allowed by the plan"
	}
	for _, f := range a.Fields {
		fv, ok := obj[f.Name]
		if !ok {
			if !f.Optional {
				return keyPath(f.Name), "is required"
			}
			continue
		}
		if p, r := f.checkValue(fv); r != "" {
			return keyPath(f.Name) + p, r
		}
	}
	return "", ""
}

// field returns a's field block named name, or nil.
func (a *Arg) field(name string) *Arg {
	for _, f := range a.Fields {
		if f.Name == name {
			return f
		}
	}
	return nil
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// keyPath renders one object key of a value path: .name, or ["odd key"].
func keyPath(k string) string {
	if identRE.MatchString(k) {
		return "." + k
	}
	return "[" + strconv.Quote(k) + "]"
}
