package hclplan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"
	"github.com/hashicorp/hcl/v2"

	"github.com/planlock/planlock/internal/oneline"
)

// CEL expressions in plans (v2): `expr` on an arg, items or field block, with
// `self` bound to the value, and `check` blocks on a step, with `args` bound
// to the whole arguments object.
//
// An expression is compiled and type-checked once, when the plan is parsed;
// its estimated cost is bounded then, and every evaluation runs under a cost
// limit. The environment is CEL's standard library plus the string and list
// extensions: no clock, no randomness, no I/O, so the same call always gets
// the same decision.
//
// Values: JSON strings, booleans, null, arrays and objects are CEL string,
// bool, null, list and map. A JSON number whose value is a whole number that
// fits int64 (30, 30.0, 3e1) is a CEL int, one a double holds exactly as
// written (30.5) a double, any other a decimal value typed double that keeps
// its exact value (cel_number.go). Comparisons are exact, as min and max are
// (`args.amount <= 30` holds for 30 and not for 30.000000000000001);
// arithmetic does not mix int and double, so write `double(args.amount) * 1.5`.

const (
	varSelf = "self"
	varArgs = "args"

	// exprCostLimit bounds one evaluation, in CEL's cost units (about one
	// per operation or per 10 characters scanned); above it the call is
	// refused. validate refuses expressions whose estimated cost can exceed it.
	exprCostLimit = 1_000_000
	// maxExprLen bounds the text of one expression, in characters.
	maxExprLen = 4096
	// maxMessageLen bounds a check's message, in characters.
	maxMessageLen = 300

	// Sizes assumed for the cost estimate when the plan does not bound a
	// value with max_length, max_items or closed field blocks. They are
	// also enforced: before an expression runs, every value it can read
	// is checked against the bound the estimate assumed for it (boundInput),
	// so the estimate is a true upper bound of the evaluation's cost.
	defaultStringHint = 10_000 // characters of a string (or object key)
	defaultListHint   = 1_000  // items of an array, keys of an object
	// maxExprDepth bounds how deeply the value an expression reads nests.
	maxExprDepth = 32
)

var (
	exprSchema  = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "expr", Required: true}, {Name: "message"}}}
	celEnvsOnce = sync.OnceValues(newCELEnvs)
	// exactCompareOptionsOnce builds the comparison declarations once.
	exactCompareOptionsOnce = sync.OnceValues(exactCompareOptions)
)

// Expr is one CEL expression of a plan.
type Expr struct {
	Source  string // the expression, byte for byte as the plan gives it
	Message string // what a refused call is told; "" when unset

	Range     hcl.Range // the expression's string in the file
	DeclRange hcl.Range // the check block, or the expr attribute

	variable string // varSelf or varArgs
	hints    *sizeHints
	reads    map[string]bool // for args: the arguments it reads by name
	readsAll bool            // for args: it may read any argument
	prog     cel.Program
	raw      []byte // the source text of Range, to place CEL errors
}

// celEnvs are the two environments: one with `self`, one with `args`. They
// are immutable once built and shared by every plan.
type celEnvs struct{ self, args *cel.Env }

func celBaseOptions() []cel.EnvOption {
	exact, err := exactCompareOptionsOnce()
	if err != nil {
		// Only a cel-go without the standard comparisons gets here; the
		// environment then fails to build and every expression is refused.
		return []cel.EnvOption{func(*cel.Env) (*cel.Env, error) { return nil, err }}
	}
	return append(exact,
		ext.Strings(),
		ext.Lists(ext.ListsMaxRangeSize(10_000)),
		cel.CrossTypeNumericComparisons(true),
		cel.ParserExpressionSizeLimit(maxExprLen),
		cel.ParserRecursionLimit(64),
	)
}

func newCELEnvs() (*celEnvs, error) {
	self, err := cel.NewCustomEnv(append(celBaseOptions(), cel.Variable(varSelf, cel.DynType))...)
	if err != nil {
		return nil, fmt.Errorf("CEL environment: %w", err)
	}
	args, err := cel.NewCustomEnv(append(celBaseOptions(), cel.Variable(varArgs, cel.MapType(cel.StringType, cel.DynType)))...)
	if err != nil {
		return nil, fmt.Errorf("CEL environment: %w", err)
	}
	return &celEnvs{self: self, args: args}, nil
}

func (e *celEnvs) env(variable string) *cel.Env {
	if variable == varSelf {
		return e.self
	}
	return e.args
}

// check decodes a step's check block.
func (d *decoder) check(b *hcl.Block, s *Step) *Expr {
	c := d.content(b.Body, exprSchema)
	at := c.Attributes["expr"]
	if at == nil {
		return nil
	}
	e := d.expr(at, c.Attributes["message"], varArgs, &sizeHints{args: s.Args})
	if e != nil {
		e.DeclRange = b.DefRange
	}
	return e
}

// expr decodes, compiles and bounds one expression.
func (d *decoder) expr(at, msg *hcl.Attribute, variable string, hints *sizeHints) *Expr {
	src, ok := d.str(at)
	if !ok {
		return nil
	}
	e := &Expr{Source: src, Range: at.Expr.Range(), DeclRange: at.Range, variable: variable, hints: hints}
	if r := e.Range; r.Start.Byte >= 0 && r.End.Byte <= len(d.src) && r.Start.Byte <= r.End.Byte {
		e.raw = d.src[r.Start.Byte:r.End.Byte]
	}
	if msg != nil {
		if m, ok := d.str(msg); ok {
			switch {
			case strings.TrimSpace(m) == "":
				d.errorf(msg.Expr.Range(), "Empty message", "message is what a refused call is told; write a sentence or remove it.")
			case strings.ContainsAny(m, "\r\n"):
				d.errorf(msg.Expr.Range(), "Invalid message", "message must be one line: it is quoted in the one-line reason of a refused call.")
			case utf8.RuneCountInString(m) > maxMessageLen:
				d.errorf(msg.Expr.Range(), "Invalid message", "message must be at most %d characters.", maxMessageLen)
			}
			e.Message = m
		}
	}
	switch {
	case strings.TrimSpace(src) == "":
		d.errorf(e.Range, "Empty expression", "expr is a CEL expression that must be true for the call to pass, such as %s.", exampleFor(variable))
		return nil
	case utf8.RuneCountInString(src) > maxExprLen:
		d.errorf(e.Range, "Expression too long", "An expression has at most %d characters.", maxExprLen)
		return nil
	}
	envs, err := celEnvsOnce()
	if err != nil {
		d.errorf(e.Range, "CEL unavailable", "%s.", err)
		return nil
	}
	env := envs.env(variable)
	ast, ok := d.compileExpr(e, env)
	if !ok {
		return nil
	}
	e.readsAll = true
	if variable == varArgs {
		e.reads, e.readsAll = argsRead(ast)
	}
	if lit, holds := inexactLiteral(ast, e.Source); lit != "" {
		d.errorf(e.Range, "Inexact number", "CEL holds the literal %s as the double %s, not the number written, and numbers compare exactly; write %s, or bound the argument with min/max.", lit, holds, holds)
		return nil
	}
	est, err := env.EstimateCost(ast, hints)
	if err != nil {
		d.errorf(e.Range, "Expression cost unknown", "The cost of this expression cannot be estimated: %s.", celMessage(err.Error()))
		return nil
	}
	if est.Max > exprCostLimit {
		d.errorf(e.Range, "Expression too expensive", "This expression may cost up to %s, more than the limit %d. Bound the values it reads with max_length or max_items (unbounded strings are assumed to have %d characters, arrays %d items).",
			costText(est.Max), exprCostLimit, defaultStringHint, defaultListHint)
		return nil
	}
	prog, err := env.Program(ast, cel.CostLimit(exprCostLimit), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		d.errorf(e.Range, "Invalid expression", "%s.", celMessage(err.Error()))
		return nil
	}
	e.prog = prog
	return e
}

// compileExpr parses and type-checks e in env and reports every CEL error at
// its place in the file. The result must be a bool (or dyn, checked when run).
func (d *decoder) compileExpr(e *Expr, env *cel.Env) (*cel.Ast, bool) {
	ast, iss := env.Compile(e.Source)
	if iss != nil && iss.Err() != nil {
		for _, ce := range iss.Errors() {
			rng := e.Range
			if ce.Location != nil && ce.Location.Line() > 0 {
				rng = e.placeOf(ce.Location.Line(), ce.Location.Column())
			}
			d.errorf(rng, "Invalid expression", "%s.", celMessage(ce.Message))
		}
		return nil, false
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		d.errorf(e.Range, "Expression is not a condition", "The expression's type is %s; it must give true or false (bool).", t)
		return nil, false
	}
	return ast, true
}

func exampleFor(variable string) string {
	if variable == varSelf {
		return `"self.startsWith('/srv/docs/')"`
	}
	return `"args.amount <= 30"`
}

func costText(c uint64) string {
	if c == math.MaxUint64 {
		return "an unbounded cost"
	}
	return strconv.FormatUint(c, 10)
}

// celMessage is a CEL error on one line, without CEL's "ERROR: <input>:"
// prefix (the diagnostic already says where).
func celMessage(s string) string {
	return oneline.Of(strings.TrimPrefix(strings.TrimSpace(s), "ERROR: <input>:"), 0)
}

// evalReason evaluates e with its variable bound to v and returns "" when the
// result is true, else the reason the call is refused. Everything but true
// refuses: false, another type, an error or the cost limit.
func (e *Expr) evalReason(v any) string {
	if e.prog == nil {
		return "has a check that did not compile, so the call is refused"
	}
	if e.hints == nil {
		return "has a check without input bounds, so the call is refused"
	}
	out, _, err := e.prog.Eval(oneVar{name: e.variable, val: jsonToCEL(v)})
	if err != nil {
		return fmt.Sprintf("check %s could not be evaluated, so the call is refused: %s", e.quoted(), celMessage(err.Error()))
	}
	b, ok := out.(types.Bool)
	if !ok {
		return fmt.Sprintf("check %s gave %s, not true or false, so the call is refused", e.quoted(), out.Type().TypeName())
	}
	if b {
		return ""
	}
	switch {
	case e.variable == varSelf && e.Message != "":
		return "fails its check: " + e.Message
	case e.variable == varSelf:
		return "fails its check " + e.quoted()
	case e.Message != "":
		return "check failed: " + e.Message
	}
	return "check " + e.quoted() + " failed"
}

// quoted renders the expression for a one-line reason, cut short.
func (e *Expr) quoted() string {
	const max = 80
	s := e.Source
	if utf8.RuneCountInString(s) > max {
		s = string([]rune(s)[:max]) + "…"
	}
	return strconv.Quote(s)
}

// oneVar is the activation of an evaluation: one variable.
type oneVar struct {
	name string
	val  ref.Val
}

func (a oneVar) ResolveName(name string) (any, bool) {
	if name == a.name {
		return a.val, true
	}
	return nil, false
}

func (oneVar) Parent() interpreter.Activation { return nil }

// jsonAdapter turns decoded JSON into CEL values lazily: an element of an
// array or object is converted only when the expression reads it.
type jsonAdapter struct{}

func jsonToCEL(v any) ref.Val { return jsonAdapter{}.NativeToValue(v) }

func (a jsonAdapter) NativeToValue(v any) ref.Val {
	switch t := v.(type) {
	case nil:
		return types.NullValue
	case bool:
		return types.Bool(t)
	case string:
		return types.String(t)
	case json.Number:
		return celNumber(string(t))
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			return types.NewErr("%v is not a JSON number", t)
		}
		return celNumber(strconv.FormatFloat(t, 'g', -1, 64))
	case int:
		return types.Int(t)
	case int64:
		return types.Int(t)
	case []any:
		return types.NewDynamicList(a, t)
	case map[string]any:
		return types.NewStringInterfaceMap(a, t)
	case ref.Val:
		return t
	}
	return types.DefaultTypeAdapter.NativeToValue(v)
}

// celNumber converts JSON number text to its exact CEL value (exactNumber).
func celNumber(s string) ref.Val {
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return types.Int(i)
	}
	n, err := ParseNumber(s)
	if err != nil {
		return types.NewErr("%q is not a JSON number", s)
	}
	return exactNumber(n.Rat(), s)
}

// sizeHints bounds, for the cost estimate, the sizes of the values an
// expression reads, from the plan's own max_length, max_items and closed
// field blocks.
type sizeHints struct {
	self *Arg   // an arg's expression
	args []*Arg // a step's check
}

func (h *sizeHints) EstimateCallCost(function, overloadID string, target *cost.AstNode, args []cost.AstNode) *cost.CallEstimate {
	return nil
}

func (h *sizeHints) EstimateSize(n cost.AstNode) *cost.SizeEstimate {
	path := n.Path()
	if len(path) == 0 {
		return nil
	}
	var cur *Arg
	switch {
	case path[0] == varSelf && h.self != nil:
		cur = h.self
	case path[0] == varArgs:
		if len(path) == 1 {
			return &cost.SizeEstimate{Min: 0, Max: uint64(len(h.args))}
		}
		for _, a := range h.args {
			if a.Name == path[1] {
				cur = a
			}
		}
		path = path[1:]
	default:
		return nil
	}
	for _, p := range path[1:] {
		if cur == nil {
			break
		}
		switch p {
		case "@items":
			cur = cur.Items
		case "@values":
			// Any field's value: as large as the largest bound among them.
			return &cost.SizeEstimate{Min: 0, Max: valuesBound(cur)}
		case "@keys":
			cur = nil
		default:
			cur = cur.field(p)
		}
	}
	return &cost.SizeEstimate{Min: 0, Max: sizeBound(cur, n.Type())}
}

// declaredBound is the largest size the plan's constraints a allow, if
// they bound it (max_length, max_items, closed field blocks).
func declaredBound(a *Arg) (uint64, bool) {
	if a == nil {
		return 0, false
	}
	best := uint64(math.MaxUint64)
	for _, p := range []*int{a.MaxLength, a.MaxItems} {
		if p != nil && uint64(*p) < best {
			best = uint64(*p)
		}
	}
	if len(a.Fields) > 0 && !a.AnyOtherFields && uint64(len(a.Fields)) < best {
		best = uint64(len(a.Fields))
	}
	return best, best != math.MaxUint64
}

// valuesBound bounds the size of any value of an object a constrains.
func valuesBound(a *Arg) uint64 {
	best := uint64(max(defaultStringHint, defaultListHint))
	for _, f := range a.Fields {
		if b, ok := declaredBound(f); ok && b > best {
			best = b
		}
	}
	return best
}

// sizeBound is the largest size the constraints allow, or the default:
// the bound boundInput enforces before the expression runs.
func sizeBound(a *Arg, t *types.Type) uint64 {
	if b, ok := declaredBound(a); ok {
		return b
	}
	switch t.Kind() {
	case types.ListKind, types.MapKind, types.StructKind:
		return defaultListHint
	}
	return defaultStringHint
}

// placeOf maps a CEL error location (1-based line, 0-based column, in the
// expression's characters) to the file: inside a quoted string, escapes are
// counted; inside a heredoc, lines map to lines. Otherwise the whole string.
func (e *Expr) placeOf(line, col int) hcl.Range {
	raw := e.raw
	at := func(off int, lineAdd int, colRunes int) hcl.Range {
		start := hcl.Pos{Line: e.Range.Start.Line + lineAdd, Column: colRunes, Byte: e.Range.Start.Byte + off}
		end := start
		end.Column++
		end.Byte++
		return hcl.Range{Filename: e.Range.Filename, Start: start, End: end}
	}
	switch {
	case len(raw) >= 2 && raw[0] == '"':
		dl, dc := 1, 0
		i := 1
		for i < len(raw)-1 {
			if dl == line && dc == col {
				break
			}
			r, w := rune(raw[i]), 1
			switch {
			case raw[i] == '\\' && i+1 < len(raw):
				switch raw[i+1] {
				case 'u':
					w = 6
				case 'U':
					w = 10
				case 'n':
					r, w = '\n', 2
				default:
					w = 2
				}
			case (raw[i] == '$' || raw[i] == '%') && i+2 < len(raw) && raw[i+1] == raw[i] && raw[i+2] == '{':
				w = 2
			default:
				r, w = utf8.DecodeRune(raw[i:])
			}
			if r == '\n' {
				dl, dc = dl+1, 0
			} else {
				dc++
			}
			i += min(w, len(raw)-1-i)
		}
		return at(i, 0, e.Range.Start.Column+utf8.RuneCount(raw[:i]))
	case bytes.HasPrefix(raw, []byte("<<")):
		lines := bytes.Split(raw, []byte("\n"))
		dec := strings.Split(e.Source, "\n")
		if line < 1 || line >= len(lines) || line > len(dec) {
			return e.Range
		}
		src, text := lines[line], dec[line-1]
		k := 0
		if bytes.HasSuffix(src, []byte(text)) {
			k = len(src) - len(text)
		}
		off := 0
		for n := 0; n < col && off < len(text); n++ {
			_, w := utf8.DecodeRuneInString(text[off:])
			off += w
		}
		lineStart := 0
		for _, l := range lines[:line] {
			lineStart += len(l) + 1
		}
		return at(lineStart+k+off, line, 1+utf8.RuneCount(src[:min(k+off, len(src))]))
	}
	return e.Range
}
