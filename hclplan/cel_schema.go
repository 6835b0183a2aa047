package hclplan

import (
	"encoding/json"
	"fmt"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
)

// With the upstream's tool list, validate type-checks every expression
// against the tool's inputSchema: `args` (and `self`) get types derived from
// the schema, so reading an argument or field the schema does not have, or
// comparing a string with a number, is an error before the plan is approved.
//
// Types: string → string, integer → int, number → double, boolean → bool,
// array → list of its items' type, object with properties → a struct type
// with exactly those fields (unless additionalProperties allows others, then
// a map), anything else (several types, no type) → dyn. At run time numbers
// are int when whole, so a `number` compares freely with ints but arithmetic
// needs double(...).

// closed reports whether an object schema lists all the keys it allows.
func (s *Schema) closed() bool {
	ap := strings.TrimSpace(string(s.AdditionalProperties))
	return len(s.Properties) > 0 && (ap == "" || ap == "false")
}

// schemaProvider adds the struct types made from a schema's objects to CEL's
// standard type registry.
type schemaProvider struct {
	*types.Registry
	structs map[string]map[string]*types.Type
	order   map[string][]string
}

func (p *schemaProvider) FindStructType(name string) (*types.Type, bool) {
	if _, ok := p.structs[name]; ok {
		return types.NewTypeTypeWithParam(types.NewObjectType(name)), true
	}
	return p.Registry.FindStructType(name)
}

func (p *schemaProvider) FindStructFieldNames(name string) ([]string, bool) {
	if _, ok := p.structs[name]; ok {
		return p.order[name], true
	}
	return p.Registry.FindStructFieldNames(name)
}

func (p *schemaProvider) FindStructFieldType(name, field string) (*types.FieldType, bool) {
	fs, ok := p.structs[name]
	if !ok {
		return p.Registry.FindStructFieldType(name, field)
	}
	t, ok := fs[field]
	if !ok {
		return nil, false
	}
	// Only type-checking uses these types; evaluation sees maps.
	return &types.FieldType{Type: t,
		IsSet:   func(any) bool { return false },
		GetFrom: func(any) (any, error) { return nil, fmt.Errorf("field %s is only for type-checking", field) },
	}, true
}

// celType derives the CEL type of values the schema allows.
func (p *schemaProvider) celType(s *Schema) *types.Type {
	ts := s.types()
	if s != nil && len(ts) == 0 && len(s.Properties) > 0 {
		ts = []string{"object"}
	}
	if len(ts) != 1 {
		return types.DynType
	}
	switch ts[0] {
	case "string":
		return types.StringType
	case "integer":
		return types.IntType
	case "number":
		return types.DoubleType
	case "boolean":
		return types.BoolType
	case "null":
		return types.NullType
	case "array":
		if it := s.items(); it != nil {
			return types.NewListType(p.celType(it))
		}
		return types.NewListType(types.DynType)
	case "object":
		if !s.closed() {
			return types.NewMapType(types.StringType, types.DynType)
		}
		name := fmt.Sprintf("planlock.schema.t%d", len(p.structs))
		fields := map[string]*types.Type{}
		p.structs[name] = fields
		for k, ps := range s.Properties {
			fields[k] = p.celType(ps)
			p.order[name] = append(p.order[name], k)
		}
		return types.NewObjectType(name)
	}
	return types.DynType
}

// checkExprTypes type-checks the expressions of step s against the tool's
// input schema.
func (d *decoder) checkExprTypes(s *Step, schema json.RawMessage) {
	var root Schema
	if len(schema) > 0 && decodeSchema(schema, &root) != nil {
		return
	}
	reg, err := types.NewRegistry()
	if err != nil {
		return
	}
	p := &schemaProvider{Registry: reg, structs: map[string]map[string]*types.Type{}, order: map[string][]string{}}
	if len(root.Type) == 0 {
		root.Type = json.RawMessage(`"object"`)
	}
	argsType := p.celType(&root)
	for _, a := range s.Args {
		d.checkArgTypes(p, s, a, root.Properties[a.Name], `argument "`+a.Name+`"`)
	}
	for _, c := range s.Checks {
		d.typeCheck(p, s, c, varArgs, argsType)
	}
}

// checkArgTypes checks one constraint set against its schema: the v2
// constraints' JSON types, fields the schema does not have, and expressions.
func (d *decoder) checkArgTypes(p *schemaProvider, s *Step, a *Arg, sch *Schema, where string) {
	if sch == nil {
		sch = &Schema{}
	}
	allowed := sch.types()
	if msg := contradictionV2(a, allowed); msg != "" {
		d.errorf(a.DeclRange, "Constraint contradicts the tool's schema", "%s of %q %s.", where, s.Tool, msg)
	}
	if a.Expr != nil {
		d.typeCheck(p, s, a.Expr, varSelf, p.celType(sch))
	}
	if a.Items != nil {
		it := sch.items()
		if it != nil {
			if msg := contradiction(a.Items, it.types()); msg != "" {
				d.errorf(a.Items.DeclRange, "Constraint contradicts the tool's schema", "The items of %s of %q are %s.", where, s.Tool, strings.TrimPrefix(msg, "is "))
			}
		}
		d.checkArgTypes(p, s, a.Items, it, where+" items")
	}
	for _, f := range a.Fields {
		fs := sch.Properties[f.Name]
		if fs == nil && sch.closed() {
			names := make([]string, 0, len(sch.Properties))
			for n := range sch.Properties {
				names = append(names, n)
			}
			d.errorf(f.DeclRange, "Unknown field", "In %s of %q there is no field %q.%s", where, s.Tool, f.Name, didYouMean(f.Name, names))
			continue
		}
		if fs != nil {
			if msg := contradiction(f, fs.types()); msg != "" {
				d.errorf(f.DeclRange, "Constraint contradicts the tool's schema", "Field %q of %s of %q %s.", f.Name, where, s.Tool, msg)
			}
		}
		d.checkArgTypes(p, s, f, fs, where+" field \""+f.Name+"\"")
	}
}

// contradictionV2 says how a's array and object constraints conflict with
// the schema's types, or returns "".
func contradictionV2(a *Arg, allowed []string) string {
	if len(allowed) == 0 {
		return ""
	}
	has := func(k string) bool {
		for _, t := range allowed {
			if t == k {
				return true
			}
		}
		return false
	}
	want := strings.Join(allowed, " or ")
	if (a.Items != nil || a.MinItems != nil || a.MaxItems != nil) && !has("array") {
		return fmt.Sprintf("is of type %s, but items/min_items/max_items need an array", want)
	}
	if len(a.Fields) > 0 && !has("object") {
		return fmt.Sprintf("is of type %s, but field blocks need an object", want)
	}
	return ""
}

// typeCheck compiles e again with its variable typed from the schema.
func (d *decoder) typeCheck(p *schemaProvider, s *Step, e *Expr, variable string, t *types.Type) {
	env, err := cel.NewCustomEnv(append(celBaseOptions(), cel.CustomTypeProvider(p), cel.Variable(variable, t))...)
	if err != nil {
		d.errorf(e.Range, "CEL unavailable", "%s.", err)
		return
	}
	_, iss := env.Compile(e.Source)
	if iss == nil || iss.Err() == nil {
		return
	}
	for _, ce := range iss.Errors() {
		rng := e.Range
		if ce.Location != nil && ce.Location.Line() > 0 {
			rng = e.placeOf(ce.Location.Line(), ce.Location.Column())
		}
		d.errorf(rng, "Expression does not fit the tool's schema", "In step %q (tool %q): %s.", s.Name, s.Tool, celMessage(ce.Message))
	}
}
