package hclplan

import (
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/env"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
)

// CEL numbers compare as decimals, exactly as min, max, eq and enum do.
//
// CEL has int, uint and double; compared as CEL compares them, an argument
// of 30.000000000000001 is the double 30 and passes `self <= 30`, which
// max = 30 refuses. So planlock gives the comparison operators (<, <=, >,
// >=, ==, !=) its own implementation: two numbers compare by their exact
// values, where an int or uint is itself and a double is the shortest
// decimal that prints as it (30.1 is 30.1, not 30.10000000000000142...);
// anything else compares as CEL does. An argument number that neither an
// int nor a double holds exactly (30.000000000000001, 1e400, integers past
// int64 that are no such double) is a decimal value: it compares exactly,
// is typed double, and arithmetic on it (written with it first: `self *
// 1.5`) is double arithmetic on its nearest double; beyond double's range
// that is an error, so the call is refused. A double literal in
// an expression must be the number it is written as (validate refuses
// 0.10000000000000001 or 1e-400, which CEL would read as 0.1 and 0).

// exactComparisons are the comparison operators planlock implements.
var exactComparisons = []string{
	operators.Less, operators.LessEquals, operators.Greater, operators.GreaterEquals,
	operators.Equals, operators.NotEquals,
}

// exactCompareOptions replace the standard library's comparison operators
// with exact ones, keeping their overloads (so type-checking is unchanged).
func exactCompareOptions() ([]cel.EnvOption, error) {
	std, err := cel.NewEnv(cel.CrossTypeNumericComparisons(true))
	if err != nil {
		return nil, err
	}
	subset := env.NewLibrarySubset()
	var opts []cel.EnvOption
	for _, name := range exactComparisons {
		fd, ok := std.Functions()[name]
		if !ok {
			return nil, fmt.Errorf("no standard function %s", name)
		}
		subset.AddExcludedFunctions(&env.Function{Name: name})
		var fo []cel.FunctionOpt
		for _, o := range fd.OverloadDecls() {
			if o.IsMemberFunction() {
				fo = append(fo, cel.MemberOverload(o.ID(), o.ArgTypes(), o.ResultType()))
			} else {
				fo = append(fo, cel.Overload(o.ID(), o.ArgTypes(), o.ResultType()))
			}
		}
		fo = append(fo, cel.SingletonBinaryBinding(exactBinary(name)))
		opts = append(opts, cel.Function(name, fo...))
	}
	return append([]cel.EnvOption{cel.StdLib(cel.StdLibSubset(subset))}, opts...), nil
}

func exactBinary(op string) func(l, r ref.Val) ref.Val {
	return func(l, r ref.Val) ref.Val {
		switch op {
		case operators.Equals, operators.NotEquals:
			eq := exactEqual(l, r)
			if types.IsError(eq) || op == operators.Equals {
				return eq
			}
			return !eq.(types.Bool)
		}
		c, ok := exactCompare(l, r)
		if !ok {
			cmp, isCmp := l.(traits.Comparer)
			if !isCmp {
				return types.MaybeNoSuchOverloadErr(l)
			}
			out := cmp.Compare(r)
			if types.IsError(out) || types.IsUnknown(out) {
				return out
			}
			ci, isInt := out.(types.Int)
			if !isInt {
				return types.MaybeNoSuchOverloadErr(out)
			}
			c = int(ci)
			if c == int(types.IntNegOne) && isNaNCompare(l, r) {
				return types.False // NaN is neither less nor more than anything
			}
		}
		switch op {
		case operators.Less:
			return types.Bool(c < 0)
		case operators.LessEquals:
			return types.Bool(c <= 0)
		case operators.Greater:
			return types.Bool(c > 0)
		default:
			return types.Bool(c >= 0)
		}
	}
}

func isNaNCompare(l, r ref.Val) bool {
	for _, v := range []ref.Val{l, r} {
		if d, ok := v.(types.Double); ok && math.IsNaN(float64(d)) {
			return true
		}
	}
	return false
}

// exactEqual is CEL equality with numbers compared exactly.
func exactEqual(l, r ref.Val) ref.Val {
	if c, ok := exactCompare(l, r); ok {
		return types.Bool(c == 0)
	}
	if isNumeric(l) && isNumeric(r) {
		return types.False // NaN
	}
	return l.Equal(r)
}

func isNumeric(v ref.Val) bool {
	switch v.(type) {
	case types.Int, types.Uint, types.Double, decimalNum:
		return true
	}
	return false
}

// exactCompare compares two numbers exactly; ok is false when either is
// not a number or is NaN. Infinities (only from arithmetic) order as usual.
func exactCompare(l, r ref.Val) (int, bool) {
	if !isNumeric(l) || !isNumeric(r) {
		return 0, false
	}
	li, lok := l.(types.Int)
	ri, rok := r.(types.Int)
	if lok && rok {
		return cmpInt(int64(li), int64(ri)), true
	}
	lr, lInf, ok := exactRat(l)
	if !ok {
		return 0, false
	}
	rr, rInf, ok := exactRat(r)
	if !ok {
		return 0, false
	}
	if lInf != 0 || rInf != 0 {
		return cmpInt(int64(lInf), int64(rInf)), true
	}
	return lr.Cmp(rr), true
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// exactRat is a number's exact value; inf is -1 or 1 for an infinity.
func exactRat(v ref.Val) (r *big.Rat, inf int, ok bool) {
	switch t := v.(type) {
	case types.Int:
		return new(big.Rat).SetInt64(int64(t)), 0, true
	case types.Uint:
		return new(big.Rat).SetUint64(uint64(t)), 0, true
	case decimalNum:
		return t.r, 0, true
	case types.Double:
		f := float64(t)
		switch {
		case math.IsNaN(f):
			return nil, 0, false
		case math.IsInf(f, 1):
			return nil, 1, true
		case math.IsInf(f, -1):
			return nil, -1, true
		}
		r, ok := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
		return r, 0, ok
	}
	return nil, 0, false
}

// exactNumber is the CEL value of an exact number: an int when it is whole
// and fits int64, a double when the double prints as exactly this number,
// else a decimal value.
func exactNumber(r *big.Rat, text string) ref.Val {
	if r.IsInt() && r.Num().IsInt64() {
		return types.Int(r.Num().Int64())
	}
	f, _ := r.Float64()
	if !math.IsInf(f, 0) {
		if back, ok := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64)); ok && back.Cmp(r) == 0 {
			return types.Double(f)
		}
	}
	return decimalNum{r: r, text: text, f: f}
}

// decimalNum is an argument number CEL's int and double cannot hold
// exactly. It is typed double; comparisons use its exact value.
type decimalNum struct {
	r    *big.Rat
	text string  // the JSON text
	f    float64 // the nearest double (±Inf beyond its range)
}

var (
	_ traits.Comparer   = decimalNum{}
	_ traits.Adder      = decimalNum{}
	_ traits.Subtractor = decimalNum{}
	_ traits.Multiplier = decimalNum{}
	_ traits.Divider    = decimalNum{}
	_ traits.Negater    = decimalNum{}
)

func (d decimalNum) ConvertToNative(t reflect.Type) (any, error) {
	return types.Double(d.f).ConvertToNative(t)
}

func (d decimalNum) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case types.StringType:
		return types.String(d.text)
	case types.TypeType:
		return types.DoubleType
	}
	f, err := d.double()
	if err != nil {
		return err
	}
	return f.ConvertToType(t)
}

func (d decimalNum) Equal(other ref.Val) ref.Val { return exactEqual(d, other) }

func (d decimalNum) Compare(other ref.Val) ref.Val {
	c, ok := exactCompare(d, other)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return types.Int(c)
}

func (d decimalNum) Type() ref.Type { return types.DoubleType }
func (d decimalNum) Value() any     { return d.f }

// inexactLiteral returns the first double literal of the expression whose
// value is not the number written (0.10000000000000001 is read as 0.1,
// 1e-400 as 0): compared as decimals, it would not mean what it says. It
// returns the literal's text and the number CEL holds; "" when none.
func inexactLiteral(a *cel.Ast, src string) (text, holds string) {
	native := a.NativeRep()
	runes := []rune(src)
	for _, e := range celast.MatchDescendants(celast.NavigateAST(native), celast.ConstantValueMatcher()) {
		d, ok := e.AsLiteral().(types.Double)
		if !ok {
			continue
		}
		rng, ok := native.SourceInfo().GetOffsetRange(e.ID())
		if !ok || rng.Start < 0 || int(rng.Start) >= len(runes) {
			continue
		}
		end := int(rng.Start)
		for end < len(runes) && (runes[end] >= '0' && runes[end] <= '9' || strings.ContainsRune(".eE+-", runes[end])) {
			if (runes[end] == '+' || runes[end] == '-') && end > int(rng.Start) && runes[end-1] != 'e' && runes[end-1] != 'E' {
				break
			}
			end++
		}
		lit := string(runes[rng.Start:end])
		want, ok := new(big.Rat).SetString(lit)
		if !ok {
			continue
		}
		shortest := strconv.FormatFloat(float64(d), 'g', -1, 64)
		got, _ := new(big.Rat).SetString(shortest)
		if got == nil || want.Cmp(got) != 0 {
			return lit, shortest
		}
	}
	return "", ""
}

// Arithmetic on a decimal value is double arithmetic on its nearest double
// (as for any double); beyond double's range it is an error.
func (d decimalNum) double() (types.Double, ref.Val) {
	if math.IsInf(d.f, 0) {
		return 0, types.NewErr("number %s is beyond the range of double", d.text)
	}
	return types.Double(d.f), nil
}

func (d decimalNum) Add(o ref.Val) ref.Val {
	f, err := d.double()
	if err != nil {
		return err
	}
	return f.Add(o)
}

func (d decimalNum) Subtract(o ref.Val) ref.Val {
	f, err := d.double()
	if err != nil {
		return err
	}
	return f.Subtract(o)
}

func (d decimalNum) Multiply(o ref.Val) ref.Val {
	f, err := d.double()
	if err != nil {
		return err
	}
	return f.Multiply(o)
}

func (d decimalNum) Divide(o ref.Val) ref.Val {
	f, err := d.double()
	if err != nil {
		return err
	}
	return f.Divide(o)
}

func (d decimalNum) Negate() ref.Val {
	f, err := d.double()
	if err != nil {
		return err
	}
	return f.Negate()
}
