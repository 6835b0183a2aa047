package suggest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/hclplan/toolpin"
	"github.com/planlock/planlock/internal/canonjson"
	"github.com/planlock/planlock/internal/plantest"
)

// Options shape a suggestion.
type Options struct {
	Name   string // the plan's name; "" means "suggested"
	Goal   string // the plan's goal; "" means a reminder to write one
	Source string // where the calls came from, for the comments
	// MarginPercent is added to each observed max_calls (rounded up).
	MarginPercent int
	// Patterns are explicit hints, "tool.arg" → RE2 pattern; every
	// observed value must match its hint. Patterns are never guessed.
	Patterns map[string]string
	// StepNames names the step of a tool (the current plan's names, so the
	// power diff compares like with like); other tools' steps are named
	// after the tool.
	StepNames map[string]string
	// ToolPins are the definitions seen of the tools, by name (from a
	// tools/list: the audit log records calls, not definitions); each
	// step of a tool in it gets its tool_pin. Nil writes no pins.
	ToolPins map[string]ToolPin
	// ToolsSource names where ToolPins came from, for the comments.
	ToolsSource string
	// Filename is what the plan file will be called (its tests go in
	// plantest.TestPath of it); used in diagnostics of the self-check.
	Filename string
}

// ToolPin is a tool definition's digest (hclplan/toolpin) and description.
type ToolPin struct {
	Digest      string
	Description string
	// Definition is the tools/list entry the digest is of; when set it is
	// recorded in the pin, for the pull request summary.
	Definition []byte
}

// Result is a suggested plan and its tests, both checked: the plan parses
// and passes its tests with the real gate.
type Result struct {
	Plan   []byte
	Tests  []byte
	Parsed *hclplan.Plan
}

// enumMax is the most distinct strings an enum is learned for; beyond it a
// string argument gets max_length (and a pattern only from a hint).
const enumMax = 5

// Test generation bounds: a replayed run, a max_length probe and a
// max_calls probe stay readable.
const (
	maxReplay      = 100
	maxRuns        = 5
	maxLengthProbe = 4096
	maxCallsProbe  = 20
)

type step struct {
	name  string
	tool  string
	calls []Call
	args  []*arg
	max   int // max_calls
	most  int // most calls of this tool in one run
	note  string
}

type arg struct {
	name     string
	present  int
	distinct []any           // first-seen order, by canonical JSON
	seen     map[string]bool // canonical JSON of distinct
	// what was learned
	eq        any
	hasEq     bool
	enum      []any
	min, max  *big.Rat
	minText   string
	maxText   string
	maxLength int
	isLength  bool
	pattern   string
	optional  bool
	comment   string
}

// Suggest learns a plan from calls (in log order).
func Suggest(calls []Call, o Options) (*Result, error) {
	if len(calls) == 0 {
		return nil, errors.New("no calls to learn from")
	}
	if o.Name == "" {
		o.Name = "suggested"
	}
	if o.Filename == "" {
		o.Filename = o.Name + ".hcl"
	}
	if o.MarginPercent < 0 {
		return nil, fmt.Errorf("margin %d%%: must be 0 or more", o.MarginPercent)
	}
	steps, byTool, err := learnSteps(calls, o.StepNames)
	if err != nil {
		return nil, err
	}
	runs, runOrder := splitRuns(calls)
	for _, s := range steps {
		for _, r := range runOrder {
			n := 0
			for _, c := range runs[r] {
				if c.Tool == s.tool {
					n++
				}
			}
			s.most = max(s.most, n)
		}
		s.max = s.most + (s.most*o.MarginPercent+99)/100
		if err := learnArgs(s, o.Patterns); err != nil {
			return nil, err
		}
	}
	for k := range o.Patterns {
		tool, an, ok := cutLast(k)
		if !ok {
			return nil, fmt.Errorf("pattern hint %q: give it as TOOL.ARG=REGEX", k)
		}
		s := byTool[tool]
		if s == nil || s.argNamed(an) == nil {
			return nil, fmt.Errorf("pattern hint %q: no observed call of tool %q has argument %q", k, tool, an)
		}
	}
	sequential := isSequential(steps, runs, runOrder)
	planSrc, err := writePlan(steps, sequential, len(calls), len(runOrder), o)
	if err != nil {
		return nil, err
	}
	plan, diags := hclplan.Parse(o.Filename, planSrc)
	if diags.HasErrors() {
		return nil, fmt.Errorf("internal error: the suggested plan does not parse: %s", diags.Error())
	}
	testPath := plantest.TestPath(o.Filename)
	testSrc, err := writeTests(steps, sequential, runs, runOrder)
	if err != nil {
		return nil, err
	}
	tf, diags := hclplan.ParseTests(testPath, testSrc)
	if diags.HasErrors() {
		return nil, fmt.Errorf("internal error: the suggested tests do not parse: %s", diags.Error())
	}
	// Fail closed: every observed call must pass the plan as written.
	for _, c := range calls {
		st := plan.StepsForTool(c.Tool)
		if len(st) != 1 {
			return nil, fmt.Errorf("internal error: tool %q has %d steps in the suggested plan", c.Tool, len(st))
		}
		if err := st[0].Check(c.Args); err != nil {
			return nil, fmt.Errorf("internal error: audit line %d is not allowed by the suggested plan: %v", c.Line, err)
		}
	}
	for _, r := range plantest.Run(plan, tf, time.Now()) {
		if !r.Pass {
			why := r.Error
			for _, c := range r.Calls {
				if c.Problem != "" {
					why = fmt.Sprintf("%s: %s", c.Pos, c.Problem)
					break
				}
			}
			return nil, fmt.Errorf("internal error: the suggested plan fails its test %q: %s", r.Name, why)
		}
	}
	return &Result{Plan: planSrc, Tests: testSrc, Parsed: plan}, nil
}

func cutLast(k string) (string, string, bool) {
	i := strings.LastIndexByte(k, '.')
	if i <= 0 || i == len(k)-1 {
		return "", "", false
	}
	return k[:i], k[i+1:], true
}

func (s *step) argNamed(n string) *arg {
	for _, a := range s.args {
		if a.name == n {
			return a
		}
	}
	return nil
}

// learnSteps makes one step per tool, in the order tools were first called.
func learnSteps(calls []Call, given map[string]string) ([]*step, map[string]*step, error) {
	byTool := map[string]*step{}
	var steps []*step
	names := map[string]string{} // step name → tool
	for _, c := range calls {
		if c.Tool == "" {
			return nil, nil, fmt.Errorf("audit line %d: a call without a tool name cannot be planned", c.Line)
		}
		if err := exactString(c.Tool); err != nil {
			return nil, nil, fmt.Errorf("audit line %d: tool name: %w", c.Line, err)
		}
		s := byTool[c.Tool]
		if s == nil {
			s = &step{tool: c.Tool}
			if n := given[c.Tool]; n != "" && names[n] == "" && validStepName(n) {
				s.name = n
			} else {
				s.name, s.note = stepName(c.Tool, names)
			}
			names[s.name] = c.Tool
			byTool[c.Tool] = s
			steps = append(steps, s)
		}
		s.calls = append(s.calls, c)
	}
	return steps, byTool, nil
}

// stepName derives a valid step name from a tool name. A tool name with
// other characters (a look-alike in another script, say) gets a note for
// the reviewer that spells those characters as code points, never raw.
func stepName(tool string, taken map[string]string) (string, string) {
	var b strings.Builder
	var odd []string
	for i, r := range tool {
		switch {
		case r < utf8.RuneSelf && (r == '_' || r == '-' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'):
			b.WriteRune(r)
		default:
			b.WriteByte('_')
			if len(odd) < 8 {
				odd = append(odd, fmt.Sprintf("U+%04X at byte %d", r, i))
			}
		}
	}
	name := b.String()
	if name == "" || !isAlnum(name[0]) {
		name = "t" + name
	}
	if len(name) > 56 {
		name = name[:56]
	}
	note := ""
	if len(odd) > 0 {
		note = "the tool name has characters other than ASCII letters, digits, '_', '-', '.': " + strings.Join(odd, ", ") + "; check it is the tool you mean"
	}
	base := name
	for n := 2; taken[name] != ""; n++ {
		name = fmt.Sprintf("%s-%d", base, n)
		if note == "" {
			note = "the tool name looks like that of another step"
		} else if !strings.Contains(note, "looks like") {
			note += "; it looks like the tool of another step"
		}
	}
	return name, note
}

func validStepName(n string) bool {
	if len(n) == 0 || len(n) > 64 || !isAlnum(n[0]) {
		return false
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; !isAlnum(c) && c != '_' && c != '.' && c != '-' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// splitRuns groups calls by the plan digest they ran under (a run: counts
// and order are per digest), in first-seen order.
func splitRuns(calls []Call) (map[string][]Call, []string) {
	runs := map[string][]Call{}
	var order []string
	for _, c := range calls {
		if _, ok := runs[c.Run]; !ok {
			order = append(order, c.Run)
		}
		runs[c.Run] = append(runs[c.Run], c)
	}
	return runs, order
}

// isSequential: every run called the steps' tools in plan order, each in
// one stretch, starting with the first and skipping none, so the gate's
// sequential rule would have allowed every run.
func isSequential(steps []*step, runs map[string][]Call, order []string) bool {
	idx := map[string]int{}
	for i, s := range steps {
		idx[s.tool] = i
	}
	for _, r := range order {
		next := 0
		cur := -1
		for _, c := range runs[r] {
			i := idx[c.Tool]
			switch {
			case i == cur:
			case i == next:
				cur, next = i, i+1
			default:
				return false
			}
		}
	}
	return true
}

// learnArgs learns each argument's constraint from the step's calls.
func learnArgs(s *step, hints map[string]string) error {
	byName := map[string]*arg{}
	for _, c := range s.calls {
		for k, v := range c.Args {
			a := byName[k]
			if a == nil {
				if err := exactString(k); err != nil {
					return fmt.Errorf("audit line %d: argument name: %w", c.Line, err)
				}
				if k == "" {
					return fmt.Errorf("audit line %d: tool %q was called with an argument named \"\", which a plan cannot name", c.Line, s.tool)
				}
				a = &arg{name: k}
				byName[k] = a
				s.args = append(s.args, a)
			}
			a.present++
			if err := a.add(v); err != nil {
				return fmt.Errorf("audit line %d: argument %q: %w", c.Line, k, err)
			}
		}
	}
	sort.Slice(s.args, func(i, j int) bool { return s.args[i].name < s.args[j].name })
	for _, a := range s.args {
		a.optional = a.present < len(s.calls)
		if err := a.learn(len(s.calls), hints[s.tool+"."+a.name]); err != nil {
			return fmt.Errorf("tool %q argument %q: %w", s.tool, a.name, err)
		}
	}
	return nil
}

func (a *arg) add(v any) error {
	if err := boundedNumbers(v, 0); err != nil {
		return err
	}
	c, err := canonjson.Marshal(v)
	if err != nil {
		return err
	}
	if err := exactInHCL(v, 0); err != nil {
		return err
	}
	if a.seen == nil {
		a.seen = map[string]bool{}
	}
	if a.seen[string(c)] {
		return nil
	}
	a.seen[string(c)] = true
	a.distinct = append(a.distinct, v)
	return nil
}

func (a *arg) learn(calls int, hint string) error {
	from := plural(a.present, "call", "calls")
	if a.optional {
		from += fmt.Sprintf(", absent in %d", calls-a.present)
	}
	if hint != "" {
		p, err := hclplan.CompilePattern(hint)
		if err != nil {
			return fmt.Errorf("pattern hint: %w", err)
		}
		for _, v := range a.distinct {
			s, ok := v.(string)
			if !ok || !p.MatchString(s) {
				return fmt.Errorf("pattern hint %q does not match an observed value", hint)
			}
		}
		a.pattern = hint
	}
	if len(a.distinct) == 1 {
		a.eq, a.hasEq = a.distinct[0], true
		a.comment = "learned from " + from + ": always this value"
		return nil
	}
	strs, nums := true, true
	for _, v := range a.distinct {
		if _, ok := v.(string); !ok {
			strs = false
		}
		if _, ok := v.(json.Number); !ok {
			nums = false
		}
	}
	switch {
	case strs && len(a.distinct) > enumMax:
		for _, v := range a.distinct {
			a.maxLength = max(a.maxLength, utf8.RuneCountInString(v.(string)))
		}
		a.isLength = true
		a.comment = fmt.Sprintf("learned from %s: %d distinct strings, the longest %d characters", from, len(a.distinct), a.maxLength)
		if a.pattern != "" {
			a.comment += "; pattern from the given hint"
		}
		return nil
	case nums:
		for _, v := range a.distinct {
			r, ok := new(big.Rat).SetString(string(v.(json.Number)))
			if !ok {
				nums = false
				break
			}
			if a.min == nil || r.Cmp(a.min) < 0 {
				a.min, a.minText = r, string(v.(json.Number))
			}
			if a.max == nil || r.Cmp(a.max) > 0 {
				a.max, a.maxText = r, string(v.(json.Number))
			}
		}
		if nums {
			a.comment = fmt.Sprintf("learned from %s: %d distinct numbers from %s to %s", from, len(a.distinct), a.minText, a.maxText)
			return nil
		}
		a.min, a.max = nil, nil
	}
	// A handful of strings, or values of other or mixed types: exactly the
	// values seen.
	a.enum = a.distinct
	a.comment = fmt.Sprintf("learned from %s: these %d values only", from, len(a.distinct))
	return nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// exactInHCL refuses a number that an HCL plan cannot hold exactly (HCL
// keeps 512 bits): a bound written for it would be another number, so the
// suggestion would not be what was seen.
func exactInHCL(v any, depth int) error {
	switch t := v.(type) {
	case string:
		return exactString(t)
	case json.Number:
		want, ok := new(big.Rat).SetString(string(t))
		if !ok {
			return fmt.Errorf("%s is not a number", t)
		}
		c, err := cty.ParseNumberVal(string(t))
		if err != nil {
			return fmt.Errorf("number %s: %w", t, err)
		}
		// As the plan parser reads an HCL number: a whole number exactly,
		// else its shortest decimal at HCL's precision.
		bf := c.AsBigFloat()
		text := bf.Text('g', -1)
		if bf.IsInt() {
			i, _ := bf.Int(nil)
			text = i.String()
		}
		got, ok := new(big.Rat).SetString(text)
		if !ok || got.Cmp(want) != 0 {
			return fmt.Errorf("the number %s cannot be written exactly in a plan (HCL keeps 512 bits); constrain it by hand", t)
		}
	case []any:
		for _, e := range t {
			if err := exactInHCL(e, depth+1); err != nil {
				return err
			}
		}
	case map[string]any:
		for k, e := range t {
			if err := exactString(k); err != nil {
				return err
			}
			if err := exactInHCL(e, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// maxExponent bounds the decimal exponent of a learned number: beyond it
// exact arithmetic on the number costs more than any plan needs.
const maxExponent = 400

// boundedNumbers refuses numbers with huge exponents before anything does
// exact arithmetic on them.
func boundedNumbers(v any, depth int) error {
	switch t := v.(type) {
	case json.Number:
		s := string(t)
		if i := strings.IndexAny(s, "eE"); i >= 0 {
			e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
			if err != nil || e > maxExponent || e < -maxExponent {
				return fmt.Errorf("the number %s is too large or too small to learn a bound from; constrain it by hand", truncate(s))
			}
		}
		if len(s) > 2*maxExponent {
			return fmt.Errorf("the number %s has too many digits to learn a bound from; constrain it by hand", truncate(s))
		}
	case []any:
		for _, e := range t {
			if err := boundedNumbers(e, depth+1); err != nil {
				return err
			}
		}
	case map[string]any:
		for _, e := range t {
			if err := boundedNumbers(e, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// exactString refuses a string an HCL plan cannot hold as it is: HCL
// strings are valid UTF-8 in Unicode normal form C.
func exactString(s string) error {
	if !utf8.ValidString(s) || cty.StringVal(s).AsString() != s {
		return fmt.Errorf("the string %s cannot be written exactly in a plan (HCL strings are UTF-8 in normal form C)", strconv.QuoteToASCII(truncate(s)))
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// hcl spells a decoded JSON value as an HCL expression, escaped by hclwrite
// (quotes, backslashes, newlines, "${" and "%{" sequences).
func hcl(v any) (string, error) {
	c, err := toCty(v, 0)
	if err != nil {
		return "", err
	}
	return string(hclwrite.TokensForValue(c).Bytes()), nil
}

func toCty(v any, depth int) (cty.Value, error) {
	if depth > 64 {
		return cty.NilVal, errors.New("a value nested more than 64 levels deep")
	}
	switch t := v.(type) {
	case nil:
		return cty.NullVal(cty.DynamicPseudoType), nil
	case bool:
		return cty.BoolVal(t), nil
	case string:
		return cty.StringVal(t), nil
	case json.Number:
		n, err := cty.ParseNumberVal(string(t))
		if err != nil {
			return cty.NilVal, fmt.Errorf("number %s: %w", t, err)
		}
		return n, nil
	case []any:
		if len(t) == 0 {
			return cty.EmptyTupleVal, nil
		}
		out := make([]cty.Value, len(t))
		for i, e := range t {
			c, err := toCty(e, depth+1)
			if err != nil {
				return cty.NilVal, err
			}
			out[i] = c
		}
		return cty.TupleVal(out), nil
	case map[string]any:
		if len(t) == 0 {
			return cty.EmptyObjectVal, nil
		}
		out := make(map[string]cty.Value, len(t))
		for k, e := range t {
			c, err := toCty(e, depth+1)
			if err != nil {
				return cty.NilVal, err
			}
			out[k] = c
		}
		return cty.ObjectVal(out), nil
	}
	return cty.NilVal, fmt.Errorf("unsupported value %T", v)
}

func hclList(vs []any) (string, error) {
	parts := make([]string, len(vs))
	for i, v := range vs {
		s, err := hcl(v)
		if err != nil {
			return "", err
		}
		parts[i] = s
	}
	return "[" + strings.Join(parts, ", ") + "]", nil
}

// writePlan renders the plan; every learned line carries its comment.
func writePlan(steps []*step, sequential bool, calls, runs int, o Options) ([]byte, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "# Suggested by planlock plan suggest from %s: %s in %s.\n", commentSafe(o.Source), plural(calls, "forwarded call", "forwarded calls"), plural(runs, "run", "runs"))
	b.WriteString("# Every line says what it was learned from. Review each one: this plan allows\n# what the agent did, no more; approve only what it should do.\n")
	name, err := hcl(o.Name)
	if err != nil {
		return nil, err
	}
	goal := o.Goal
	if goal == "" {
		goal = "Replace with what this agent is for (learned from observed calls)"
	}
	g, err := hcl(goal)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(&b, "plan %s {\n  goal = %s\n", name, g)
	if sequential {
		fmt.Fprintf(&b, "  order = \"sequential\" # every run called the tools in this order, each in one stretch\n")
	} else {
		fmt.Fprintf(&b, "  order = \"any\" # the runs called the tools in differing or interleaved orders\n")
	}
	for _, s := range steps {
		b.WriteString("\n")
		if s.note != "" {
			fmt.Fprintf(&b, "  # NOTE: %s\n", s.note)
		}
		tool, err := hcl(s.tool)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "  step %q {\n    tool = %s # called %s\n", s.name, tool, plural(len(s.calls), "time", "times"))
		margin := ""
		if o.MarginPercent > 0 {
			margin = fmt.Sprintf(", plus a margin of %d%%", o.MarginPercent)
		}
		fmt.Fprintf(&b, "    max_calls = %d # at most %s in one run%s\n", s.max, plural(s.most, "call", "calls"), margin)
		for _, a := range s.args {
			label, err := hcl(a.name)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(&b, "    arg %s { # %s\n", label, a.comment)
			switch {
			case a.hasEq:
				v, err := hcl(a.eq)
				if err != nil {
					return nil, err
				}
				fmt.Fprintf(&b, "      eq = %s\n", v)
			case a.enum != nil:
				v, err := hclList(a.enum)
				if err != nil {
					return nil, err
				}
				fmt.Fprintf(&b, "      enum = %s\n", v)
			case a.min != nil:
				lo, err := hcl(json.Number(a.minText))
				if err != nil {
					return nil, err
				}
				hi, err := hcl(json.Number(a.maxText))
				if err != nil {
					return nil, err
				}
				fmt.Fprintf(&b, "      min = %s\n      max = %s\n", lo, hi)
			case a.isLength:
				fmt.Fprintf(&b, "      max_length = %d\n", a.maxLength)
			}
			if a.pattern != "" && !a.hasEq && a.enum == nil {
				p, err := hcl(a.pattern)
				if err != nil {
					return nil, err
				}
				fmt.Fprintf(&b, "      pattern = %s # from the given hint, matched by every observed value\n", p)
			}
			if a.optional {
				fmt.Fprintf(&b, "      optional = true # absent in some calls\n")
			}
			b.WriteString("    }\n")
		}
		if o.ToolPins != nil {
			if err := writeToolPin(&b, o, s.tool); err != nil {
				return nil, err
			}
		}
		b.WriteString("  }\n")
	}
	b.WriteString("}\n")
	out, diags := hclplan.Format(o.Filename, []byte(b.String()))
	if diags.HasErrors() {
		return nil, fmt.Errorf("internal error: the suggested plan is not valid HCL: %s", diags.Error())
	}
	return out, nil
}

// commentSafe keeps text that goes into a comment on one line of printable
// ASCII, so that nothing observed can end the comment.
func commentSafe(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 0x20 && r < 0x7f {
			b.WriteRune(r)
		} else {
			b.WriteByte('?')
		}
	}
	return b.String()
}

// writeToolPin writes the tool_pin of tool from o.ToolPins, or says that
// the tool list had no definition of it.
func writeToolPin(b *strings.Builder, o Options, tool string) error {
	tp, ok := o.ToolPins[tool]
	if !ok {
		fmt.Fprintf(b, "    # no tool_pin: %s has no definition of this tool\n", o.ToolsSource)
		return nil
	}
	digest, err := hcl(tp.Digest)
	if err != nil {
		return err
	}
	desc, err := hcl(tp.Description)
	if err != nil {
		return err
	}
	fmt.Fprintf(b, "    tool_pin { # the definition in %s\n      digest      = %s\n      description = %s\n", o.ToolsSource, digest, desc)
	if tp.Definition != nil {
		def, err := toolpin.HCL(tp.Definition, "      ")
		if err != nil {
			return err
		}
		fmt.Fprintf(b, "      definition  = %s\n", def)
	}
	b.WriteString("    }\n")
	return nil
}
