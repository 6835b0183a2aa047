// Package plandiff compares two plans: what the proposed plan lets the agent
// do that the approved one did not (Wider), what it no longer lets it do
// (Narrower), and what changed in a way a reader must judge (Changed). The
// approval pull requests of package gitapprove and planlock plan suggest show
// it in plain words.
package plandiff

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/hclplan/toolpin"
)

// Power says whether a change gives the agent more or less power.
type Power int

const (
	// Changed is a change that is neither clearly wider nor narrower
	// (a different pattern, upstream or pin value): read it.
	Changed Power = iota
	// Wider gives the agent more power.
	Wider
	// Narrower gives the agent less power.
	Narrower
)

// Change is one difference between an approved plan and a proposed one.
type Change struct {
	Power Power
	Text  string // plain words, Markdown
}

// Diff lists, in plain words, what the proposed plan lets the agent do
// that the approved one did not, and the other way round.
func Diff(old, proposed *hclplan.Plan) []Change {
	var d differ
	d.plan(old, proposed)
	return d.out
}

type differ struct{ out []Change }

func (d *differ) add(p Power, format string, a ...any) {
	d.out = append(d.out, Change{Power: p, Text: fmt.Sprintf(format, a...)})
}

func (d *differ) plan(o, n *hclplan.Plan) {
	if o.Name != n.Name {
		d.add(Changed, "plan renamed from %s to %s", md(o.Name), md(n.Name))
	}
	if o.Goal != n.Goal {
		d.add(Changed, "goal changed to: %s", md(n.Goal))
	}
	switch {
	case o.Expires.Equal(n.Expires):
	case n.Expires.IsZero():
		d.add(Wider, "the plan no longer expires (was %s)", stamp(o.Expires))
	case o.Expires.IsZero():
		d.add(Narrower, "the plan now expires at %s (never did)", stamp(n.Expires))
	case n.Expires.After(o.Expires):
		d.add(Wider, "expiry extended from %s to %s", stamp(o.Expires), stamp(n.Expires))
	default:
		d.add(Narrower, "expiry brought forward from %s to %s", stamp(o.Expires), stamp(n.Expires))
	}
	if o.Order != n.Order {
		if n.Order == hclplan.OrderAny {
			d.add(Wider, "steps may now run in any order (was sequential)")
		} else {
			d.add(Narrower, "steps must now run in order (was any order)")
		}
	}
	if o.OnViolation != n.OnViolation {
		if n.OnViolation == hclplan.ViolationHold {
			d.add(Wider, "a call outside the plan is now held for approval by pull request instead of blocked")
		} else {
			d.add(Narrower, "a call outside the plan is now blocked instead of held for approval")
		}
	}
	d.upstream(o.Upstream, n.Upstream)

	oldSteps := map[string]*hclplan.Step{}
	for _, s := range o.Steps {
		oldSteps[s.Name] = s
	}
	newSteps := map[string]bool{}
	for _, s := range n.Steps {
		newSteps[s.Name] = true
		if prev, ok := oldSteps[s.Name]; ok {
			d.step(prev, s)
			continue
		}
		d.add(Wider, "new step %s may call %s %s%s", md(s.Name), md(s.Tool), times(s.MaxCalls), argSummary(s))
		d.input("step "+md(s.Name), nil, s.Input)
	}
	for _, s := range o.Steps {
		if !newSteps[s.Name] {
			d.add(Narrower, "step %s removed: %s may no longer be called by it", md(s.Name), md(s.Tool))
		}
	}
	d.resourcesAndPrompts(o, n)
	if o.Order == hclplan.OrderSequential && n.Order == hclplan.OrderSequential && !sameOrder(o, n) {
		d.add(Changed, "step order changed to: %s", stepNames(n))
	}
}

func (d *differ) upstream(o, n *hclplan.Upstream) {
	desc := func(u *hclplan.Upstream) string {
		switch {
		case u == nil:
			return "given on the proxy's command line"
		case u.URL != "":
			return md(u.URL)
		default:
			return md(strings.Join(u.Command, " "))
		}
	}
	if desc(o) != desc(n) {
		d.add(Changed, "upstream changed from %s to %s", desc(o), desc(n))
	}
	var oe, ne []string
	if o != nil {
		oe = o.Env
	}
	if n != nil {
		ne = n.Env
	}
	added, removed := setDiff(oe, ne)
	if len(added) > 0 {
		d.add(Wider, "the upstream now also receives %s from the environment", codes(added))
	}
	if len(removed) > 0 {
		d.add(Narrower, "the upstream no longer receives %s", codes(removed))
	}
}

func (d *differ) step(o, n *hclplan.Step) {
	at := "step " + md(n.Name)
	if o.Tool != n.Tool {
		d.add(Wider, "%s now calls %s instead of %s", at, md(n.Tool), md(o.Tool))
	}
	switch {
	case n.MaxCalls > o.MaxCalls:
		d.add(Wider, "%s: max_calls %d → %d", at, o.MaxCalls, n.MaxCalls)
	case n.MaxCalls < o.MaxCalls:
		d.add(Narrower, "%s: max_calls %d → %d", at, o.MaxCalls, n.MaxCalls)
	}
	if o.Approval != n.Approval {
		if n.Approval == hclplan.ApprovalEach {
			d.add(Narrower, "%s: every call now needs its own approval", at)
		} else {
			d.add(Wider, "%s: calls no longer need approval one by one", at)
		}
	}
	if o.OnError != n.OnError {
		if n.OnError == hclplan.ErrorHold {
			d.add(Narrower, "%s: a failed call now puts the step on hold", at)
		} else {
			d.add(Wider, "%s: a failed call no longer puts the step on hold", at)
		}
	}
	d.pin(at, o.Pin, n.Pin)
	d.toolPin(at, o.ToolPin, n.ToolPin)

	oldArgs := map[string]*hclplan.Arg{}
	for _, a := range o.Args {
		oldArgs[a.Name] = a
	}
	seen := map[string]bool{}
	for _, a := range n.Args {
		seen[a.Name] = true
		oa, ok := oldArgs[a.Name]
		if !ok {
			d.add(Wider, "%s: new argument %s %s", at, md(a.Name), describe(a))
			continue
		}
		d.arg(at+", argument "+md(a.Name), oa, a)
	}
	for _, a := range o.Args {
		if !seen[a.Name] {
			d.add(Narrower, "%s: argument %s removed (calls with it are now blocked)", at, md(a.Name))
		}
	}
	d.checks(at, o.Checks, n.Checks)
	d.input(at, o.Input, n.Input)
}

// input compares what a step or prompt lets the upstream ask of the
// client, line by line as plan show says it: a line the proposed plan adds
// is more power (a new kind of input request, a wider bound), one it drops
// is less.
func (d *differ) input(at string, o, n *hclplan.InputRules) {
	ol, nl := o.Describe(), n.Describe()
	added, removed := setDiff(ol, nl)
	for _, l := range added {
		d.add(Wider, "%s: now allows: %s", at, l)
	}
	for _, l := range removed {
		d.add(Narrower, "%s: no longer allows: %s", at, l)
	}
}

func (d *differ) pin(at string, o, n *hclplan.Pin) {
	switch {
	case o == nil && n == nil:
	case o == nil:
		d.add(Narrower, "%s: now pinned: %s field %s must be %s before each call", at, md(n.Tool), md(n.Field), val(n.Eq))
	case n == nil:
		d.add(Wider, "%s: pin removed (was %s field %s = %s)", at, md(o.Tool), md(o.Field), val(o.Eq))
	default:
		if o.Tool != n.Tool || o.Field != n.Field || !o.Args.Equal(n.Args.Interface()) {
			d.add(Changed, "%s: pin now reads %s field %s (was %s field %s)", at, md(n.Tool+"("+n.Args.String()+")"), md(n.Field), md(o.Tool+"("+o.Args.String()+")"), md(o.Field))
		}
		if !o.Eq.Equal(n.Eq.Interface()) {
			d.add(Changed, "%s: pinned value %s → %s", at, val(o.Eq), val(n.Eq))
		}
	}
}

// toolPin says how the pinned tool definition changed: a new digest is a
// new definition the agent will read, for the reviewer to judge.
func (d *differ) toolPin(at string, o, n *hclplan.ToolPin) {
	switch {
	case o == nil && n == nil:
	case o == nil:
		d.add(Narrower, "%s: tool definition now pinned to %s", at, md(n.Digest))
	case n == nil:
		d.add(Wider, "%s: tool definition pin removed (was %s): the upstream may change the definition unreviewed", at, md(o.Digest))
	default:
		if o.Digest != n.Digest {
			d.add(Changed, "%s: pinned tool definition %s → %s", at, md(o.Digest), md(n.Digest))
		}
		od, nd := "", ""
		if o.Description != nil {
			od = *o.Description
		}
		if n.Description != nil {
			nd = *n.Description
		}
		if od != nd {
			d.add(Changed, "%s: pinned description %s → %s", at, md(od), md(nd))
		}
		if o.Digest != n.Digest && o.Definition != nil && n.Definition != nil {
			d.toolDefinition(at, o.Definition, n.Definition)
		}
	}
}

// toolDefinition says what changed between two recorded definitions,
// member by member of what plan show summarises. Each is Changed: the
// plan's own constraints still bound the calls; what the agent reads is
// for the reviewer to judge.
func (d *differ) toolDefinition(at string, o, n []byte) {
	was, oerr := toolpin.Summarize(o)
	now, nerr := toolpin.Summarize(n)
	if oerr != nil || nerr != nil {
		return
	}
	if was.Title != now.Title {
		d.add(Changed, "%s: pinned title %s → %s", at, md(was.Title), md(now.Title))
	}
	props := func(what string, op, np []toolpin.Property) {
		old := map[string]toolpin.Property{}
		for _, p := range op {
			old[p.Name] = p
		}
		for _, p := range np {
			q, ok := old[p.Name]
			delete(old, p.Name)
			switch {
			case !ok:
				d.add(Changed, "%s: pinned %s property %s (%s%s) added", at, what, md(p.Name), md(p.Type), map[bool]string{true: ", required", false: ""}[p.Required])
			case q.Type != p.Type:
				d.add(Changed, "%s: pinned %s property %s type %s → %s", at, what, md(p.Name), md(q.Type), md(p.Type))
			case q.Required != p.Required:
				d.add(Changed, "%s: pinned %s property %s is now %s", at, what, md(p.Name), map[bool]string{true: "required", false: "optional"}[p.Required])
			}
		}
		for _, p := range op {
			if _, gone := old[p.Name]; gone {
				d.add(Changed, "%s: pinned %s property %s removed", at, what, md(p.Name))
			}
		}
	}
	props("input", was.Input, now.Input)
	switch {
	case was.Output == nil && now.Output != nil:
		d.add(Changed, "%s: pinned definition now has an output schema", at)
	case was.Output != nil && now.Output == nil:
		d.add(Changed, "%s: pinned definition no longer has an output schema", at)
	case was.Output != nil:
		props("output", *was.Output, *now.Output)
	}
	members := func(what string, om, nm [][2]string) {
		old := map[string]string{}
		for _, m := range om {
			old[m[0]] = m[1]
		}
		for _, m := range nm {
			v, ok := old[m[0]]
			delete(old, m[0])
			switch {
			case !ok:
				d.add(Changed, "%s: pinned %s %s = %s added", at, what, md(m[0]), md(m[1]))
			case v != m[1]:
				d.add(Changed, "%s: pinned %s %s %s → %s", at, what, md(m[0]), md(v), md(m[1]))
			}
		}
		for _, m := range om {
			if _, gone := old[m[0]]; gone {
				d.add(Changed, "%s: pinned %s %s removed", at, what, md(m[0]))
			}
		}
	}
	members("annotation", was.Annotations, now.Annotations)
	members("`_meta`", was.Meta, now.Meta)
}

func (d *differ) arg(at string, o, n *hclplan.Arg) {
	if o.Optional != n.Optional {
		if n.Optional {
			d.add(Wider, "%s is now optional", at)
		} else {
			d.add(Narrower, "%s is now required", at)
		}
	}
	if o.Any != n.Any {
		if n.Any {
			d.add(Wider, "%s may now be any value (was: %s)", at, describe(o))
			return
		}
		d.add(Narrower, "%s is now constrained: %s (was any value)", at, describe(n))
		return
	}
	if n.Any {
		return
	}
	// eq
	switch {
	case o.Eq == nil && n.Eq == nil:
	case o.Eq == nil:
		d.add(Narrower, "%s must now be %s", at, val(*n.Eq))
	case n.Eq == nil:
		d.add(Wider, "%s no longer has to be %s", at, val(*o.Eq))
	case !o.Eq.Equal(n.Eq.Interface()):
		d.add(Changed, "%s must be %s instead of %s", at, val(*n.Eq), val(*o.Eq))
	}
	// enum
	switch {
	case o.Enum == nil && n.Enum == nil:
	case o.Enum == nil:
		d.add(Narrower, "%s is now limited to one of %s", at, values(n.Enum))
	case n.Enum == nil:
		d.add(Wider, "%s is no longer limited to %s", at, values(o.Enum))
	default:
		if add := missing(n.Enum, o.Enum); len(add) > 0 {
			d.add(Wider, "%s also allows %s", at, values(add))
		}
		if rm := missing(o.Enum, n.Enum); len(rm) > 0 {
			d.add(Narrower, "%s no longer allows %s", at, values(rm))
		}
	}
	d.bound(at, "minimum", o.Min, n.Min, -1)
	d.bound(at, "maximum", o.Max, n.Max, 1)
	switch {
	case o.MaxLength == nil && n.MaxLength == nil:
	case o.MaxLength == nil:
		d.add(Narrower, "%s: length now limited to %d", at, *n.MaxLength)
	case n.MaxLength == nil:
		d.add(Wider, "%s: length limit %d removed", at, *o.MaxLength)
	case *n.MaxLength > *o.MaxLength:
		d.add(Wider, "%s: max_length widened %d → %d", at, *o.MaxLength, *n.MaxLength)
	case *n.MaxLength < *o.MaxLength:
		d.add(Narrower, "%s: max_length narrowed %d → %d", at, *o.MaxLength, *n.MaxLength)
	}
	switch {
	case o.Pattern == nil && n.Pattern == nil:
	case o.Pattern == nil:
		d.add(Narrower, "%s must now match %s", at, md(n.Pattern.Source))
	case n.Pattern == nil:
		d.add(Wider, "%s no longer has to match %s", at, md(o.Pattern.Source))
	case o.Pattern.Source != n.Pattern.Source:
		d.add(Changed, "%s pattern changed from %s to %s (read it: it may match more)", at, md(o.Pattern.Source), md(n.Pattern.Source))
	}
	d.argV2(at, o, n)
}

// bound compares a min (wider = -1, lower) or max (wider = +1, higher).
func (d *differ) bound(at, name string, o, n *hclplan.Number, wider int) {
	switch {
	case o == nil && n == nil:
	case o == nil:
		d.add(Narrower, "%s: new %s %s", at, name, n)
	case n == nil:
		d.add(Wider, "%s: %s %s removed", at, name, o)
	default:
		c := n.Cmp(*o)
		switch {
		case c == 0:
		case c == wider:
			d.add(Wider, "%s: %s widened %s → %s", at, name, o, n)
		default:
			d.add(Narrower, "%s: %s narrowed %s → %s", at, name, o, n)
		}
	}
}

// md and val write plan-supplied strings through the one escaping function.
func md(s string) string { return hclplan.MarkdownCode(s) }

func val(v hclplan.Value) string { return hclplan.MarkdownCode(v.String()) }

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func times(n int) string {
	if n == 1 {
		return "at most once"
	}
	return fmt.Sprintf("up to %d times", n)
}

func argSummary(s *hclplan.Step) string {
	if len(s.Args) == 0 {
		return " with no arguments"
	}
	parts := make([]string, len(s.Args))
	for i, a := range s.Args {
		parts[i] = md(a.Name) + " " + describe(a)
	}
	return "; " + strings.Join(parts, "; ")
}

// describe says what values an argument allows, briefly.
func describe(a *hclplan.Arg) string {
	if a.Any {
		return "any value"
	}
	var p []string
	if a.Eq != nil {
		p = append(p, "= "+val(*a.Eq))
	}
	if a.Enum != nil {
		p = append(p, "one of "+values(a.Enum))
	}
	if a.Min != nil {
		p = append(p, "≥ "+a.Min.String())
	}
	if a.Max != nil {
		p = append(p, "≤ "+a.Max.String())
	}
	if a.MaxLength != nil {
		p = append(p, fmt.Sprintf("length ≤ %d", *a.MaxLength))
	}
	if a.Pattern != nil {
		p = append(p, "matching "+md(a.Pattern.Source))
	}
	p = append(p, describeV2(a)...)
	s := strings.Join(p, ", ")
	if a.Optional {
		s += " (optional)"
	}
	return s
}

func values(vs []hclplan.Value) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = val(v)
	}
	return strings.Join(s, ", ")
}

// missing returns the values of a that are not in b.
func missing(a, b []hclplan.Value) []hclplan.Value {
	var out []hclplan.Value
	for _, x := range a {
		found := false
		for _, y := range b {
			if y.Equal(x.Interface()) {
				found = true
				break
			}
		}
		if !found {
			out = append(out, x)
		}
	}
	return out
}

func setDiff(o, n []string) (added, removed []string) {
	om, nm := map[string]bool{}, map[string]bool{}
	for _, x := range o {
		om[x] = true
	}
	for _, x := range n {
		nm[x] = true
		if !om[x] {
			added = append(added, x)
		}
	}
	for _, x := range o {
		if !nm[x] {
			removed = append(removed, x)
		}
	}
	sort.Strings(added)
	sort.Strings(removed)
	return added, removed
}

func codes(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = md(x)
	}
	return strings.Join(q, ", ")
}

func sameOrder(o, n *hclplan.Plan) bool {
	var a, b []string
	common := map[string]int{}
	for _, s := range o.Steps {
		common[s.Name]++
	}
	for _, s := range n.Steps {
		common[s.Name]++
	}
	for _, s := range o.Steps {
		if common[s.Name] == 2 {
			a = append(a, s.Name)
		}
	}
	for _, s := range n.Steps {
		if common[s.Name] == 2 {
			b = append(b, s.Name)
		}
	}
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
}

func stepNames(p *hclplan.Plan) string {
	names := make([]string, len(p.Steps))
	for i, s := range p.Steps {
		names[i] = md(s.Name)
	}
	return strings.Join(names, " → ")
}

// Format renders the changes as a Markdown section for the PR body.
func Format(base string, changes []Change) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## What changes compared with the approved plan on %s\n\n", md(base))
	if len(changes) == 0 {
		b.WriteString("Nothing the agent may do changes (only formatting or comments differ).\n")
		return b.String()
	}
	for _, g := range []struct {
		p     Power
		title string
	}{{Wider, "More power"}, {Narrower, "Less power"}, {Changed, "Changed — read these"}} {
		var items []string
		for _, c := range changes {
			if c.Power == g.p {
				items = append(items, c.Text)
			}
		}
		if len(items) == 0 {
			continue
		}
		fmt.Fprintf(&b, "**%s**\n\n", g.title)
		for _, it := range items {
			fmt.Fprintf(&b, "- %s\n", it)
		}
		b.WriteString("\n")
	}
	return b.String()
}
