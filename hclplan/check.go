package hclplan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"unicode/utf8"

	"github.com/planlock/planlock/internal/canonjson"
)

// Violation is why a call's arguments break a step. Its message names the
// step, the argument and the bound, in one line.
type Violation struct {
	Step   string
	Arg    string // empty when the violation is not about one argument
	Path   string // where inside the argument, such as `[2].oldText`; often empty
	Reason string
	Kind   string // "" for a step, "prompt" for a prompt's arguments
}

func (v *Violation) Error() string {
	kind := "step"
	if v.Kind != "" {
		kind = v.Kind
	}
	if v.Arg == "" {
		return fmt.Sprintf("%s %q: %s", kind, v.Step, v.Reason)
	}
	return fmt.Sprintf("%s %q: argument %q%s %s", kind, v.Step, v.Arg, v.Path, v.Reason)
}

// Check reports whether args, a decoded JSON object (numbers as json.Number
// or float64), satisfies every constraint of the step. It returns nil or a
// *Violation; arguments are checked in sorted name order so the first
// violation reported is stable.
func (s *Step) Check(args map[string]any) error {
	// One pass over the declared arguments; an undeclared argument is
	// reported before any other violation, so count what was matched.
	var first *Violation
	present := 0
	for _, a := range s.Args {
		v, ok := args[a.Name]
		if ok {
			present++
		}
		if first != nil {
			continue
		}
		switch {
		case !ok && !a.Optional:
			first = &Violation{Step: s.Name, Arg: a.Name, Reason: "is required"}
		case ok:
			if path, reason := a.checkValue(v); reason != "" {
				first = &Violation{Step: s.Name, Arg: a.Name, Path: path, Reason: reason}
			}
		}
	}
	if present < len(args) {
		return &Violation{Step: s.Name, Arg: s.firstUndeclared(args), Reason: "is not allowed by the plan"}
	}
	if first != nil {
		return first
	}
	// The step's checks see all arguments, so they run once every argument
	// passed on its own.
	for _, c := range s.Checks {
		if arg, path, reason := c.boundInput(args); reason != "" {
			return &Violation{Step: s.Name, Arg: arg, Path: path, Reason: reason}
		}
		if reason := c.evalReason(args); reason != "" {
			return &Violation{Step: s.Name, Reason: reason}
		}
	}
	return nil
}

// firstUndeclared returns the alphabetically first argument the step does
// not declare, or "".
func (s *Step) firstUndeclared(args map[string]any) string {
	var bad []string
	for k := range args {
		if s.byName[k] == nil {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return ""
	}
	sort.Strings(bad)
	return bad[0]
}

// check returns "" when v satisfies every constraint of a, else the reason.
func (a *Arg) check(v any) string {
	if a.Any {
		return ""
	}
	if n, ok := v.(json.Number); ok {
		// Bounded before eq, enum, min or max do exact arithmetic on it.
		if err := CheckNumber(string(n)); err != nil {
			return "is refused: " + err.Error()
		}
	}
	if a.Eq != nil && !a.Eq.Equal(v) {
		return fmt.Sprintf("= %s, want %s", describe(v), a.Eq.String())
	}
	if a.Enum != nil {
		found := false
		for _, e := range a.Enum {
			if e.Equal(v) {
				found = true
				break
			}
		}
		if !found {
			return fmt.Sprintf("= %s, want one of %s", describe(v), enumString(a.Enum))
		}
	}
	if a.Min != nil || a.Max != nil {
		n, ok := canonjson.ToNumber(v)
		if !ok {
			return fmt.Sprintf("= %s, want a number", describe(v))
		}
		if a.Min != nil && n.Cmp(*a.Min) < 0 {
			return fmt.Sprintf("= %s is below the minimum %s", n.String(), a.Min.String())
		}
		if a.Max != nil && n.Cmp(*a.Max) > 0 {
			return fmt.Sprintf("= %s is above the maximum %s", n.String(), a.Max.String())
		}
	}
	if a.MaxLength != nil {
		var l int
		var unit string
		switch t := v.(type) {
		case string:
			l, unit = utf8.RuneCountInString(t), "characters"
		case []any:
			l, unit = len(t), "items"
		default:
			return fmt.Sprintf("= %s, want a string or an array", describe(v))
		}
		if l > *a.MaxLength {
			return fmt.Sprintf("has %d %s, more than the maximum length %d", l, unit, *a.MaxLength)
		}
	}
	if a.Pattern != nil {
		s, ok := v.(string)
		if !ok {
			return fmt.Sprintf("= %s, want a string", describe(v))
		}
		if !a.Pattern.MatchString(s) {
			return fmt.Sprintf("= %s does not match the pattern %s", describe(s), strconv.Quote(a.Pattern.Source))
		}
	}
	return ""
}

func enumString(vals []Value) string {
	s := "["
	for i, v := range vals {
		if i > 0 {
			s += ", "
		}
		s += v.String()
	}
	return s + "]"
}

// describe renders an argument value for a reason line, cut short so a huge
// argument can neither flood the message nor be copied whole to render it.
func describe(v any) string {
	const max = 80
	var b bytes.Buffer
	err := canonjson.Write(&b, v, 4*max)
	if err != nil && !errors.Is(err, canonjson.ErrCapped) {
		return fmt.Sprintf("%T", v)
	}
	out := b.Bytes()
	if err == nil && utf8.RuneCount(out) <= max {
		return string(out)
	}
	r := []rune(string(out))
	return string(r[:min(max, len(r))]) + "…"
}
