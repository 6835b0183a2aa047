package proxy

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestReadsAndGetsHaveOneRoadToTheUpstream proves by the package's source
// that resources/read and prompts/get reach the upstream only from
// readResource and getPrompt, each after its durable reservation
// (reserveExtra) or, for a multi-round retry, the check of the first
// round's sealed reservation (openRetry), and that every upstream Request
// names a constant method.
func TestReadsAndGetsHaveOneRoadToTheUpstream(t *testing.T) {
	pkg, err := build.Default.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	senders := map[string][]string{} // method → functions
	var checked []string
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			reservedAt := token.NoPos
			ast.Inspect(fd, func(n ast.Node) bool {
				c, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := c.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if (sel.Sel.Name == "reserveExtra" || sel.Sel.Name == "openRetry") && reservedAt == token.NoPos {
					reservedAt = c.Pos()
				}
				x, ok := sel.X.(*ast.SelectorExpr)
				if sel.Sel.Name != "Request" || !ok || x.Sel.Name != "up" {
					return true
				}
				lit, ok := c.Args[1].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Errorf("%s: %s calls the upstream with a method that is not a constant", fset.Position(c.Pos()), fd.Name.Name)
					return true
				}
				m, _ := strconv.Unquote(lit.Value)
				senders[m] = append(senders[m], fd.Name.Name)
				if m == "resources/read" || m == "prompts/get" {
					if reservedAt == token.NoPos || reservedAt > c.Pos() {
						t.Errorf("%s: %s sends %s before reserveExtra or openRetry", fset.Position(c.Pos()), fd.Name.Name, m)
					}
					checked = append(checked, m)
				}
				return true
			})
		}
	}
	for m, want := range map[string]string{"resources/read": "readResource", "prompts/get": "getPrompt"} {
		if got := senders[m]; !slices.Equal(got, []string{want}) {
			t.Errorf("%s reaches the upstream from %v, want only %s", m, got, want)
		}
	}
	if strings.Join(checked, ",") == "" {
		t.Fatal("found no read or get sent upstream: the test is looking at the wrong code")
	}
}
