package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// flagGetters are the *cli.Context methods that read a flag by its name: a
// misspelt name reads the zero value without a word. Commands read their
// options struct instead (options.go), and ask cmdline.given, which checks
// the name, whether a flag was set.
var flagGetters = map[string]bool{
	"String": true, "Bool": true, "Int": true, "Int64": true, "Uint": true, "Uint64": true,
	"Float64": true, "Duration": true, "Timestamp": true, "Generic": true, "Path": true,
	"StringSlice": true, "IntSlice": true, "Int64Slice": true, "UintSlice": true,
	"Uint64Slice": true, "Float64Slice": true, "Value": true, "Count": true, "IsSet": true,
}

// flagReadAllowed are the files that may read flags by name: the settings
// code works on every flag of every command generically (the config file,
// config show).
var flagReadAllowed = map[string]string{
	"config.go":        "applies the config file to whatever flags a command has",
	"config_cmd.go":    "prints every flag of a command with its source",
	"options.go":       "cmdline.given checks the name before asking",
	"trust_sources.go": "settles contradicting trust settings of whatever flags a command has",
}

// TestNoFlagReadByName fails when a command reads a flag by string key
// (c.String("…"), c.Bool("…"), c.IsSet("…")...) instead of from its
// options struct.
func TestNoFlagReadByName(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var found []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := flagReadAllowed[name]; ok {
			continue
		}
		for _, r := range flagReads(f) {
			found = append(found, fset.Position(r.Pos()).String()+": "+r.Sel.Name)
		}
	}
	sort.Strings(found)
	if len(found) > 0 {
		t.Errorf("%d flags read by name; read the command's options struct instead (see options.go):\n%s", len(found), strings.Join(found, "\n"))
	}
}

// The scan finds what it must: it is only as good as this.
func TestFlagReadsFinds(t *testing.T) {
	src := `package main
func a(c *cli.Context) error { _ = c.String("plan"); return nil }
var b = &cli.Command{Action: func(ctx *cli.Context) error { if ctx.IsSet("x") || ctx.Bool("y") {}; return nil }}
func d(o *opts, c *cli.Context) { _ = o.String(); _ = c.Args().First(); _ = c.NArg() }
`
	f, err := parser.ParseFile(token.NewFileSet(), "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range flagReads(f) {
		got = append(got, r.Sel.Name)
	}
	if strings.Join(got, ",") != "String,IsSet,Bool" {
		t.Fatalf("flagReads = %v; want String, IsSet, Bool", got)
	}
}

// flagReads are the calls of a flag getter on a *cli.Context parameter.
func flagReads(f *ast.File) []*ast.SelectorExpr {
	var out []*ast.SelectorExpr
	var visit func(n ast.Node, ctxNames map[string]bool)
	visit = func(n ast.Node, ctxNames map[string]bool) {
		ast.Inspect(n, func(n ast.Node) bool {
			var ft *ast.FuncType
			var body *ast.BlockStmt
			switch fn := n.(type) {
			case *ast.FuncDecl:
				ft, body = fn.Type, fn.Body
			case *ast.FuncLit:
				ft, body = fn.Type, fn.Body
			case *ast.CallExpr:
				sel, ok := fn.Fun.(*ast.SelectorExpr)
				if !ok || !flagGetters[sel.Sel.Name] {
					return true
				}
				if id, ok := sel.X.(*ast.Ident); ok && ctxNames[id.Name] {
					out = append(out, sel)
				}
				return true
			default:
				return true
			}
			if body == nil {
				return false
			}
			inner := map[string]bool{}
			for k, v := range ctxNames {
				inner[k] = v
			}
			for _, p := range ft.Params.List {
				isCtx := isCliContext(p.Type)
				for _, id := range p.Names {
					inner[id.Name] = isCtx
				}
			}
			visit(body, inner)
			return false
		})
	}
	visit(f, map[string]bool{})
	return out
}

func isCliContext(e ast.Expr) bool {
	star, ok := e.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "cli" && sel.Sel.Name == "Context"
}
