package plandiff

import (
	"fmt"
	"strings"

	"github.com/planlock/planlock/hclplan"
)

// argV2 compares the v2 constraints of an argument, field or items block:
// array lengths, element and field constraints, and CEL expressions.
func (d *differ) argV2(at string, o, n *hclplan.Arg) {
	d.count(at, "min_items", o.MinItems, n.MinItems, -1)
	d.count(at, "max_items", o.MaxItems, n.MaxItems, 1)
	switch {
	case o.Items == nil && n.Items == nil:
	case o.Items == nil:
		d.add(Narrower, "%s: every item must now be %s", at, describe(n.Items))
	case n.Items == nil:
		d.add(Wider, "%s: items are no longer constrained (were: %s)", at, describe(o.Items))
	default:
		d.arg(at+", each item", o.Items, n.Items)
	}
	d.fields(at, o, n)
	d.expr(at, o.Expr, n.Expr)
}

// count compares min_items (wider = -1, lower) or max_items (wider = +1).
func (d *differ) count(at, name string, o, n *int, wider int) {
	switch {
	case o == nil && n == nil:
	case o == nil:
		d.add(Narrower, "%s: new %s %d", at, name, *n)
	case n == nil:
		d.add(Wider, "%s: %s %d removed", at, name, *o)
	case *n != *o:
		if (*n > *o) == (wider > 0) {
			d.add(Wider, "%s: %s widened %d → %d", at, name, *o, *n)
		} else {
			d.add(Narrower, "%s: %s narrowed %d → %d", at, name, *o, *n)
		}
	}
}

func (d *differ) fields(at string, o, n *hclplan.Arg) {
	switch {
	case len(o.Fields) == 0 && len(n.Fields) == 0:
		return
	case len(o.Fields) == 0:
		d.add(Narrower, "%s must now be an object: %s", at, describeFields(n))
		return
	case len(n.Fields) == 0:
		d.add(Wider, "%s: field constraints removed (were: %s)", at, describeFields(o))
		return
	}
	old := map[string]*hclplan.Arg{}
	for _, f := range o.Fields {
		old[f.Name] = f
	}
	seen := map[string]bool{}
	for _, f := range n.Fields {
		seen[f.Name] = true
		of, ok := old[f.Name]
		switch {
		case ok:
			d.arg(at+", field `"+f.Name+"`", of, f)
		case o.AnyOtherFields:
			d.add(Changed, "%s: field `%s` is now constrained: %s (was any value)", at, f.Name, describe(f))
		default:
			d.add(Wider, "%s: new field `%s` %s", at, f.Name, describe(f))
		}
	}
	for _, f := range o.Fields {
		if seen[f.Name] {
			continue
		}
		if n.AnyOtherFields {
			d.add(Wider, "%s: field `%s` is no longer constrained (was: %s)", at, f.Name, describe(f))
		} else {
			d.add(Narrower, "%s: field `%s` removed (values with it are now blocked)", at, f.Name)
		}
	}
	if o.AnyOtherFields != n.AnyOtherFields {
		if n.AnyOtherFields {
			d.add(Wider, "%s: undeclared fields are now allowed", at)
		} else {
			d.add(Narrower, "%s: undeclared fields are now blocked", at)
		}
	}
}

func (d *differ) expr(at string, o, n *hclplan.Expr) {
	switch {
	case o == nil && n == nil:
	case o == nil:
		d.add(Narrower, "%s must now satisfy %s", at, exprText(n))
	case n == nil:
		d.add(Wider, "%s no longer has to satisfy %s", at, exprText(o))
	case o.Source != n.Source:
		d.add(Changed, "%s: check changed from %s to %s (read it: it may allow more)", at, exprText(o), exprText(n))
	case o.Message != n.Message:
		d.add(Changed, "%s: check message changed to “%s”", at, n.Message)
	}
}

// checks compares a step's check blocks by their expressions.
func (d *differ) checks(at string, o, n []*hclplan.Expr) {
	old := map[string]*hclplan.Expr{}
	for _, c := range o {
		old[c.Source] = c
	}
	now := map[string]bool{}
	for _, c := range n {
		now[c.Source] = true
		switch prev, ok := old[c.Source]; {
		case !ok:
			d.add(Narrower, "%s: new check %s", at, exprText(c))
		case prev.Message != c.Message:
			d.add(Changed, "%s: check %s now says “%s”", at, exprText(c), c.Message)
		}
	}
	for _, c := range o {
		if !now[c.Source] {
			d.add(Wider, "%s: check %s removed", at, exprText(c))
		}
	}
}

func exprText(e *hclplan.Expr) string {
	return "`" + strings.Join(strings.Fields(e.Source), " ") + "`"
}

// describeV2 says briefly what the v2 constraints allow.
func describeV2(a *hclplan.Arg) []string {
	var p []string
	if a.MinItems != nil {
		p = append(p, fmt.Sprintf("≥ %d items", *a.MinItems))
	}
	if a.MaxItems != nil {
		p = append(p, fmt.Sprintf("≤ %d items", *a.MaxItems))
	}
	if a.Items != nil {
		p = append(p, "each item "+describe(a.Items))
	}
	if len(a.Fields) > 0 {
		p = append(p, describeFields(a))
	}
	if a.Expr != nil {
		p = append(p, "satisfying "+exprText(a.Expr))
	}
	return p
}

func describeFields(a *hclplan.Arg) string {
	parts := make([]string, len(a.Fields))
	for i, f := range a.Fields {
		parts[i] = "`" + f.Name + "` " + describe(f)
	}
	s := "fields {" + strings.Join(parts, "; ") + "}"
	if a.AnyOtherFields {
		s += " and any others"
	}
	return s
}

// resourcesAndPrompts compares the resource and prompt blocks by name.
func (d *differ) resourcesAndPrompts(o, n *hclplan.Plan) {
	uri := func(r *hclplan.Resource) string {
		switch {
		case r.URIPattern != nil:
			return "URIs matching `" + r.URIPattern.Source + "`"
		case r.URITemplate != "":
			return "URIs of the template `" + r.URITemplate + "`"
		}
		return "`" + r.URI + "`"
	}
	old := map[string]*hclplan.Resource{}
	for _, r := range o.Resources {
		old[r.Name] = r
	}
	now := map[string]bool{}
	for _, r := range n.Resources {
		now[r.Name] = true
		prev, ok := old[r.Name]
		switch {
		case !ok:
			d.add(Wider, "new resource `%s`: may read %s %s", r.Name, uri(r), times(r.MaxReads))
			d.input("resource `"+r.Name+"`", nil, r.Input)
			continue
		case uri(prev) != uri(r):
			d.add(Changed, "resource `%s` now allows %s (was %s)", r.Name, uri(r), uri(prev))
		}
		switch {
		case r.MaxReads > prev.MaxReads:
			d.add(Wider, "resource `%s`: max_reads %d → %d", r.Name, prev.MaxReads, r.MaxReads)
		case r.MaxReads < prev.MaxReads:
			d.add(Narrower, "resource `%s`: max_reads %d → %d", r.Name, prev.MaxReads, r.MaxReads)
		}
		d.input("resource `"+r.Name+"`", prev.Input, r.Input)
	}
	for _, r := range o.Resources {
		if !now[r.Name] {
			d.add(Narrower, "resource `%s` removed: %s may no longer be read by it", r.Name, uri(r))
		}
	}
	oldP := map[string]*hclplan.Prompt{}
	for _, p := range o.Prompts {
		oldP[p.Name] = p
	}
	nowP := map[string]bool{}
	for _, p := range n.Prompts {
		nowP[p.Name] = true
		prev, ok := oldP[p.Name]
		if !ok {
			d.add(Wider, "new prompt `%s` may be used %s", p.Name, times(p.MaxCalls))
			d.input("prompt `"+p.Name+"`", nil, p.Input)
			continue
		}
		switch {
		case p.MaxCalls > prev.MaxCalls:
			d.add(Wider, "prompt `%s`: max_calls %d → %d", p.Name, prev.MaxCalls, p.MaxCalls)
		case p.MaxCalls < prev.MaxCalls:
			d.add(Narrower, "prompt `%s`: max_calls %d → %d", p.Name, prev.MaxCalls, p.MaxCalls)
		}
		at := "prompt `" + p.Name + "`"
		oldArgs := map[string]*hclplan.Arg{}
		for _, a := range prev.Args {
			oldArgs[a.Name] = a
		}
		seen := map[string]bool{}
		for _, a := range p.Args {
			seen[a.Name] = true
			if oa, ok := oldArgs[a.Name]; ok {
				d.arg(at+", argument `"+a.Name+"`", oa, a)
			} else {
				d.add(Wider, "%s: new argument `%s` %s", at, a.Name, describe(a))
			}
		}
		for _, a := range prev.Args {
			if !seen[a.Name] {
				d.add(Narrower, "%s: argument `%s` removed", at, a.Name)
			}
		}
		d.input(at, prev.Input, p.Input)
	}
	for _, p := range o.Prompts {
		if !nowP[p.Name] {
			d.add(Narrower, "prompt `%s` removed", p.Name)
		}
	}
}
