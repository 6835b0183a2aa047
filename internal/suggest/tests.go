package suggest

import (
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strings"

	"github.com/planlock/planlock/hclplan"
)

// writeTests renders <plan>_test.hcl: each observed run (its first calls)
// replayed as allowed, and for each learned bound a call just outside it,
// blocked, after the calls the order needs first.
func writeTests(steps []*step, sequential bool, runs map[string][]Call, order []string) ([]byte, error) {
	var b strings.Builder
	b.WriteString("# Tests suggested by planlock plan suggest: the observed calls are allowed,\n# calls just outside each learned bound are blocked. Run: planlock plan test.\n")
	for i, r := range order {
		if i == maxRuns {
			break
		}
		calls := runs[r]
		if len(calls) > maxReplay {
			calls = calls[:maxReplay]
		}
		tc := make([]testCall, len(calls))
		for j, c := range calls {
			tc[j] = testCall{tool: c.Tool, args: c.Args, expect: hclplan.ExpectAllow}
		}
		name := fmt.Sprintf("observed run %d is allowed", i+1)
		if len(runs[r]) > maxReplay {
			name = fmt.Sprintf("observed run %d is allowed (its first %d calls)", i+1, maxReplay)
		}
		if err := writeTest(&b, name, tc); err != nil {
			return nil, err
		}
	}
	// prefix is what the sequential order needs before step i: one
	// observed call of each step before it.
	prefix := func(i int) []testCall {
		if !sequential {
			return nil
		}
		var out []testCall
		for _, s := range steps[:i] {
			out = append(out, testCall{tool: s.tool, args: s.calls[0].Args, expect: hclplan.ExpectAllow})
		}
		return out
	}
	planned := map[string]bool{}
	for _, s := range steps {
		planned[s.tool] = true
	}
	for i, s := range steps {
		base := s.calls[0].Args
		for _, a := range s.args {
			for _, p := range a.probes() {
				args := clone(base)
				args[a.name] = p.value
				tc := append(prefix(i), testCall{tool: s.tool, args: args, expect: hclplan.ExpectBlock, reasonArg: a.name})
				if err := writeTest(&b, fmt.Sprintf("step %s: argument %s %s is blocked", s.name, a.name, p.what), tc); err != nil {
					return nil, err
				}
			}
		}
		extra := "unplanned_argument"
		for s.argNamed(extra) != nil {
			extra += "_"
		}
		args := clone(base)
		args[extra] = "x"
		tc := append(prefix(i), testCall{tool: s.tool, args: args, expect: hclplan.ExpectBlock, reasonArg: extra})
		if err := writeTest(&b, fmt.Sprintf("step %s: an argument never observed is blocked", s.name), tc); err != nil {
			return nil, err
		}
		if s.max <= maxCallsProbe {
			tc := prefix(i)
			for range s.max {
				tc = append(tc, testCall{tool: s.tool, args: base, expect: hclplan.ExpectAllow})
			}
			tc = append(tc, testCall{tool: s.tool, args: base, expect: hclplan.ExpectBlock, reasonContains: "max_calls"})
			if err := writeTest(&b, fmt.Sprintf("step %s: call %d is over max_calls", s.name, s.max+1), tc); err != nil {
				return nil, err
			}
		}
	}
	other := "unplanned_tool"
	for planned[other] {
		other += "_"
	}
	if err := writeTest(&b, "a tool never observed is blocked", []testCall{{tool: other, args: map[string]any{}, expect: hclplan.ExpectBlock, reasonContains: "is not in plan"}}); err != nil {
		return nil, err
	}
	out, diags := hclplan.Format("suggested_test.hcl", []byte(b.String()))
	if diags.HasErrors() {
		return nil, fmt.Errorf("internal error: the suggested tests are not valid HCL: %s", diags.Error())
	}
	return out, nil
}

type testCall struct {
	tool           string
	args           map[string]any
	expect         string
	reasonArg      string
	reasonContains string
}

func writeTest(b *strings.Builder, name string, calls []testCall) error {
	// Names come partly from observed argument names: keep them unique.
	for k := 2; strings.Contains(b.String(), "\ntest "+mustHCL(name)+" {"); k++ {
		name = fmt.Sprintf("%s (%d)", strings.TrimSuffix(name, fmt.Sprintf(" (%d)", k-1)), k)
	}
	n, err := hcl(name)
	if err != nil {
		return err
	}
	fmt.Fprintf(b, "\ntest %s {\n", n)
	for _, c := range calls {
		tool, err := hcl(c.tool)
		if err != nil {
			return err
		}
		args, err := hcl(c.args)
		if err != nil {
			return err
		}
		fmt.Fprintf(b, "  call {\n    tool = %s\n    args = %s\n    expect = %q\n", tool, args, c.expect)
		if c.reasonArg != "" {
			ra, err := hcl(c.reasonArg)
			if err != nil {
				return err
			}
			fmt.Fprintf(b, "    reason_arg = %s\n", ra)
		}
		if c.reasonContains != "" {
			fmt.Fprintf(b, "    reason_contains = %q\n", c.reasonContains)
		}
		b.WriteString("  }\n")
	}
	b.WriteString("}\n")
	return nil
}

func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

type probe struct {
	what  string
	value any
}

// probes are values just outside the argument's learned bounds.
func (a *arg) probes() []probe {
	var out []probe
	switch {
	case a.hasEq:
		switch v := a.eq.(type) {
		case string:
			out = append(out, probe{"other than the observed value", v + "x"})
		case json.Number:
			if r, ok := new(big.Rat).SetString(string(v)); ok {
				out = append(out, probe{"other than the observed value", ratNumber(r.Add(r, step1(r)))})
			}
		default:
			out = append(out, probe{"other than the observed value", "x"})
		}
	case a.enum != nil:
		seen := map[string]bool{}
		for _, v := range a.enum {
			if s, ok := v.(string); ok {
				seen[s] = true
			}
		}
		cand := "x"
		if s, ok := a.enum[0].(string); ok {
			cand = s + "x"
		}
		for seen[cand] {
			cand += "x"
		}
		out = append(out, probe{"outside the observed values", cand})
	case a.min != nil:
		lo := new(big.Rat).Sub(a.min, step1(a.min))
		hi := new(big.Rat).Add(a.max, step1(a.max))
		out = append(out, probe{"below the observed minimum", ratNumber(lo)}, probe{"above the observed maximum", ratNumber(hi)})
	case a.isLength:
		if a.maxLength+1 <= maxLengthProbe {
			out = append(out, probe{"longer than observed", strings.Repeat("x", a.maxLength+1)})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].what < out[j].what })
	return out
}

// ratNumber spells r exactly as a JSON number when it is a whole number,
// else to 40 decimals (a probe one away from a bound stays outside it).
func ratNumber(r *big.Rat) json.Number {
	if r.IsInt() {
		return json.Number(r.Num().String())
	}
	return json.Number(strings.TrimRight(strings.TrimRight(r.FloatString(40), "0"), "."))
}

func mustHCL(s string) string {
	h, _ := hcl(s) // a string always converts
	return h
}

// step1 is how far a probe goes past a bound: 1, or the bound's own size
// when that is larger, so that the probe keeps few significant digits and
// stays exact in HCL.
func step1(r *big.Rat) *big.Rat {
	one := big.NewRat(1, 1)
	abs := new(big.Rat).Abs(r)
	if abs.Cmp(one) > 0 {
		return abs
	}
	return one
}
