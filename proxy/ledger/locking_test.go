package ledger

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestLockingDiscipline holds the package to its one way of taking mu (see
// writer.go): Lock is followed at once by a deferred Unlock, no function
// unlocks by hand, and a function named …Locked never takes the lock it
// expects its caller to hold.
func TestLockingDiscipline(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			checked++
			locked := strings.HasSuffix(fn.Name.Name, "Locked")
			stmts := fn.Body.List
			for i, s := range stmts {
				if isMuCall(s, "Lock") {
					if locked {
						t.Errorf("%s: %s takes mu, but a …Locked function runs with it held", fset.Position(s.Pos()), fn.Name.Name)
					}
					if i+1 >= len(stmts) || !isDeferUnlock(stmts[i+1]) {
						t.Errorf("%s: %s: mu.Lock() not followed by defer l.mu.Unlock()", fset.Position(s.Pos()), fn.Name.Name)
					}
				}
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.DeferStmt:
					return false // a deferred Unlock is the rule
				case *ast.FuncLit:
					return true
				case *ast.ExprStmt:
					if isMuCall(n, "Unlock") {
						t.Errorf("%s: %s unlocks mu by hand", fset.Position(n.Pos()), fn.Name.Name)
					}
					if isMuCall(n, "Lock") && !onTop(stmts, n) {
						t.Errorf("%s: %s takes mu inside a block: take it in a helper of its own", fset.Position(n.Pos()), fn.Name.Name)
					}
				}
				return true
			})
		}
	}
	if checked < 50 {
		t.Fatalf("checked only %d functions: the test no longer reads the package", checked)
	}
}

func onTop(stmts []ast.Stmt, s ast.Stmt) bool {
	for _, t := range stmts {
		if t == s {
			return true
		}
	}
	return false
}

// isMuCall reports whether s is the statement <x>.mu.<method>().
func isMuCall(s ast.Stmt, method string) bool {
	es, ok := s.(*ast.ExprStmt)
	if !ok {
		return false
	}
	return isMuCallExpr(es.X, method)
}

func isMuCallExpr(e ast.Expr, method string) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != method {
		return false
	}
	inner, ok := sel.X.(*ast.SelectorExpr)
	return ok && inner.Sel.Name == "mu"
}

func isDeferUnlock(s ast.Stmt) bool {
	d, ok := s.(*ast.DeferStmt)
	return ok && isMuCallExpr(d.Call, "Unlock")
}
