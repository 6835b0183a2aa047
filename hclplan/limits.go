package hclplan

import (
	"fmt"
	"strings"
)

// limitsV2 renders the v2 constraints of an argument compactly, in the
// style of the limits the proxy appends to a tool's description, so that the
// agent knows them before it calls. It is empty for a v1 argument.
func (a *Arg) limitsV2() []string {
	var cs []string
	if a.MinItems != nil {
		cs = append(cs, fmt.Sprintf("items >= %d", *a.MinItems))
	}
	if a.MaxItems != nil {
		cs = append(cs, fmt.Sprintf("items <= %d", *a.MaxItems))
	}
	if a.Items != nil {
		cs = append(cs, "each item "+compactLimits(a.Items))
	}
	if len(a.Fields) > 0 {
		parts := make([]string, len(a.Fields))
		for i, f := range a.Fields {
			parts[i] = f.Name + " " + compactLimits(f)
		}
		s := "object {" + strings.Join(parts, "; ") + "}"
		if !a.AnyOtherFields {
			s += " with no other fields"
		}
		cs = append(cs, s)
	}
	if a.Expr != nil {
		cs = append(cs, "must satisfy "+exprLimit(a.Expr))
	}
	return cs
}

// Limit renders a step check compactly, for a tool's description.
func (e *Expr) Limit() string { return exprLimit(e) }

func exprLimit(e *Expr) string {
	s := strings.Join(strings.Fields(e.Source), " ")
	if e.Message != "" {
		s += " (" + e.Message + ")"
	}
	return s
}

// Limits renders the argument's whole constraint set on one line, as a
// tool's description shows it ("" when it has none).
func (a *Arg) Limits() string { return compactLimits(a) }

// compactLimits renders a whole constraint set of a nested block.
func compactLimits(a *Arg) string {
	var cs []string
	if a.Any {
		cs = append(cs, "any value")
	}
	if a.Eq != nil {
		cs = append(cs, "= "+a.Eq.String())
	}
	if a.Enum != nil {
		cs = append(cs, "one of "+enumString(a.Enum))
	}
	if a.Min != nil {
		cs = append(cs, ">= "+a.Min.String())
	}
	if a.Max != nil {
		cs = append(cs, "<= "+a.Max.String())
	}
	if a.MaxLength != nil {
		cs = append(cs, fmt.Sprintf("length <= %d", *a.MaxLength))
	}
	if a.Pattern != nil {
		cs = append(cs, "matches "+a.Pattern.Source)
	}
	cs = append(cs, a.limitsV2()...)
	if a.Optional {
		cs = append(cs, "optional")
	}
	return strings.Join(cs, ", ")
}
