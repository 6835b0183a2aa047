package hclplan

import (
	"fmt"
	"strings"

	"github.com/planlock/planlock/hclplan/toolpin"
)

// writeToolPinSummary writes what the reviewer reads of a pinned
// definition besides its description: its schemas, annotations and _meta
// from the definition the pin records (checked against the digest at
// parse), or that the plan records none and the digest alone pins them.
func writeToolPinSummary(b *strings.Builder, tp *ToolPin) {
	const in = "     - "
	if tp.Definition == nil {
		fmt.Fprintf(b, "%sSchemas, annotations and `_meta`: not recorded in the plan, pinned by the digest alone (a tool_pin with the definition, as planlock tools --pins writes it, shows them here).\n", in)
		return
	}
	s, err := toolpin.Summarize(tp.Definition)
	if err != nil {
		fmt.Fprintf(b, "%sDefinition unreadable: %s\n", in, MarkdownCode(err.Error()))
		return
	}
	if s.Title != "" {
		fmt.Fprintf(b, "%sTitle: %s\n", in, MarkdownCode(s.Title))
	}
	other := "; no other arguments"
	if s.Input == nil && s.InputOther {
		fmt.Fprintf(b, "%sInput: any arguments (the schema names no properties)\n", in)
	} else {
		if s.InputOther {
			other = "; other arguments allowed by the schema"
		}
		fmt.Fprintf(b, "%sInput: %s%s\n", in, propertyList(s.Input), other)
	}
	switch {
	case s.Output == nil:
		fmt.Fprintf(b, "%sOutput schema: none\n", in)
	default:
		fmt.Fprintf(b, "%sOutput schema: %s\n", in, propertyList(*s.Output))
	}
	fmt.Fprintf(b, "%sAnnotations: %s\n", in, memberList(s.Annotations))
	fmt.Fprintf(b, "%s`_meta`: %s\n", in, memberList(s.Meta))
	if len(s.Other) > 0 {
		fmt.Fprintf(b, "%sAlso pinned: %s\n", in, codeList(s.Other))
	}
}

// propertyList is "`a` string (required), `b` number".
func propertyList(ps []toolpin.Property) string {
	if len(ps) == 0 {
		return "no properties"
	}
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = MarkdownCode(p.Name) + " " + MarkdownCode(p.Type)
		if p.Required {
			parts[i] += " (required)"
		}
	}
	return strings.Join(parts, ", ")
}

// memberList is "`k` = `v`, …", or "none".
func memberList(ms [][2]string) string {
	if len(ms) == 0 {
		return "none"
	}
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = MarkdownCode(m[0]) + " = " + MarkdownCode(m[1])
	}
	return strings.Join(parts, ", ")
}
