package hclplan

import (
	"fmt"
	"strconv"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
)

// boundInput checks, before e runs, that every value e can read fits the
// size its cost estimate assumed (sizeHints.EstimateSize): a string has at
// most its bound of characters, an array its bound of items, an object its
// bound of keys (each key a string of at most defaultStringHint
// characters), and nothing nests deeper than maxExprDepth. The bound of a
// value is the plan's max_length, max_items or closed field blocks where
// it declares them, else the defaults. CEL checks its cost limit only
// between operations, so one operation on an unbounded value (a split of a
// 15 MiB string) could cost any amount of memory and time before the limit
// applies; with the inputs bounded, the estimate validate accepted bounds
// every evaluation.
//
// A step check is bounded on the arguments it can read (argsRead): a large
// argument no expression reads is left to its own constraints.
//
// It returns "" or, for the first value beyond its bound, the argument it
// is in (for a step check; "" for self), the path below it and the reason.
func (e *Expr) boundInput(v any) (arg, path, reason string) {
	h := e.hints
	if h == nil {
		return "", "", "has a check without input bounds, so the call is refused"
	}
	if e.variable == varSelf {
		path, reason = boundValue(v, h.self, 0)
		return "", path, reason
	}
	args, ok := v.(map[string]any)
	if !ok {
		return "", "", "arguments are not an object"
	}
	if e.readsAll && len(args) > len(h.args) {
		return "", "", fmt.Sprintf("has %d arguments, more than the %d the plan declares", len(args), len(h.args))
	}
	for _, a := range h.args {
		av, ok := args[a.Name]
		if !ok || !e.readsAll && !e.reads[a.Name] {
			continue // the expression cannot read it
		}
		if path, reason := boundValue(av, a, 1); reason != "" {
			return a.Name, path, reason
		}
	}
	return "", "", ""
}

// boundValue checks v, read through the plan's constraints a (nil where
// the plan declares none), at nesting depth.
func boundValue(v any, a *Arg, depth int) (path, reason string) {
	if depth > maxExprDepth {
		return "", fmt.Sprintf("nests deeper than %d levels, the most an expression may read", maxExprDepth)
	}
	switch t := v.(type) {
	case string:
		limit := inputBound(a, defaultStringHint)
		if n := len(t); uint64(n) > limit {
			if n := utf8.RuneCountInString(t); uint64(n) > limit {
				return "", fmt.Sprintf("has %d characters, more than the %d an expression may read%s", n, limit, raiseHint(a, "max_length"))
			}
		}
	case []any:
		limit := inputBound(a, defaultListHint)
		if uint64(len(t)) > limit {
			return "", fmt.Sprintf("has %d items, more than the %d an expression may read%s", len(t), limit, raiseHint(a, "max_items"))
		}
		var items *Arg
		if a != nil {
			items = a.Items
		}
		for i, x := range t {
			if p, r := boundValue(x, items, depth+1); r != "" {
				return "[" + strconv.Itoa(i) + "]" + p, r
			}
		}
	case map[string]any:
		limit := inputBound(a, defaultListHint)
		if uint64(len(t)) > limit {
			return "", fmt.Sprintf("has %d keys, more than the %d an expression may read", len(t), limit)
		}
		for k, x := range t {
			if len(k) > defaultStringHint {
				if n := utf8.RuneCountInString(k); n > defaultStringHint {
					return "", fmt.Sprintf("has a key of %d characters, more than the %d an expression may read", n, defaultStringHint)
				}
			}
			var f *Arg
			if a != nil {
				f = a.field(k)
			}
			if p, r := boundValue(x, f, depth+1); r != "" {
				return keyPath(k) + p, r
			}
		}
	}
	return "", ""
}

// argsRead finds which arguments an `args` expression can read: those it
// selects by a constant name (args.amount, args["amount"]), or all of them
// when it uses args any other way (size(args), args.all(...), args[k]).
func argsRead(a *cel.Ast) (names map[string]bool, all bool) {
	names = map[string]bool{}
	isArgs := func(e celast.NavigableExpr) bool {
		return e.Kind() == celast.IdentKind && e.AsIdent() == varArgs
	}
	for _, e := range celast.MatchDescendants(celast.NavigateAST(a.NativeRep()), isArgs) {
		p, ok := e.Parent()
		switch {
		case !ok:
			all = true
		case p.Kind() == celast.SelectKind:
			names[p.AsSelect().FieldName()] = true
		case p.Kind() == celast.CallKind && p.AsCall().FunctionName() == operators.Index && len(p.AsCall().Args()) == 2 &&
			p.AsCall().Args()[0].ID() == e.ID() && p.AsCall().Args()[1].Kind() == celast.LiteralKind:
			k, isStr := p.AsCall().Args()[1].AsLiteral().(types.String)
			if !isStr {
				all = true
				continue
			}
			names[string(k)] = true
		default:
			all = true
		}
	}
	return names, all
}

// inputBound is the size bound of a value the constraints a allow: the one
// sizeBound gives the cost estimate, with def where a declares none.
func inputBound(a *Arg, def uint64) uint64 {
	if b, ok := declaredBound(a); ok {
		return b
	}
	return def
}

// raiseHint tells how to allow more, where the plan can.
func raiseHint(a *Arg, attr string) string {
	if _, ok := declaredBound(a); ok {
		return ""
	}
	return " (set " + attr + " to allow more)"
}
