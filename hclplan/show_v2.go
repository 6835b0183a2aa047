package hclplan

import (
	"fmt"
	"strings"
)

// describeV2 says in plain words what the v2 constraints of a allow.
func describeV2(a *Arg) []string {
	var parts []string
	switch {
	case a.MinItems != nil && a.MaxItems != nil:
		parts = append(parts, fmt.Sprintf("must be an array of %d to %d items", *a.MinItems, *a.MaxItems))
	case a.MinItems != nil:
		parts = append(parts, fmt.Sprintf("must be an array of at least %d items", *a.MinItems))
	case a.MaxItems != nil:
		parts = append(parts, fmt.Sprintf("must be an array of at most %d items", *a.MaxItems))
	case a.Items != nil:
		parts = append(parts, "must be an array")
	}
	switch {
	case len(a.Fields) > 0 && a.AnyOtherFields:
		parts = append(parts, "must be an object (the fields below are checked; other fields are allowed)")
	case len(a.Fields) > 0:
		parts = append(parts, "must be an object with only the fields below")
	}
	if a.Expr != nil {
		parts = append(parts, describeExpr(a.Expr))
	}
	return parts
}

// describeExpr renders a CEL check on one line, with its message.
func describeExpr(e *Expr) string {
	s := fmt.Sprintf("must satisfy `%s`", strings.Join(strings.Fields(e.Source), " "))
	if e.Message != "" {
		s += " — “" + e.Message + "”"
	}
	return s
}

// writeNested writes the items and field blocks of a as nested list items.
func writeNested(b *strings.Builder, a *Arg, indent string) {
	if a.Items != nil {
		fmt.Fprintf(b, "%s- each item %s\n", indent, describeConstraints(a.Items))
		writeNested(b, a.Items, indent+"  ")
	}
	for _, f := range a.Fields {
		fmt.Fprintf(b, "%s- field `%s` %s\n", indent, f.Name, describeArg(f))
		writeNested(b, f, indent+"  ")
	}
}
