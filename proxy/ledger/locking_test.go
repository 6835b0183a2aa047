package ledger

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestLockingDiscipline holds the package to its one way of taking its
// mutexes, mu and the journal's wmu (see writer.go): Lock is followed at
// once by a deferred Unlock, no function unlocks by hand, and a function
// named …Locked never takes the lock it expects its caller to hold.
//
// TryLock has one form, `if x.wmu.TryLock() { defer x.wmu.Unlock(); … }`
// on a function's top level: the deferred Unlock is the body's first
// statement, so the lock is held exactly until the function returns, as
// after Lock, and the else branch (if any) runs without it. A TryLock
// anywhere else (its result stored, negated, in a condition with others)
// could leave the lock held on a path the reader does not see.
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
			tryLocks := map[ast.Expr]bool{} // the TryLock calls in the one allowed form
			for i, s := range stmts {
				if mu := muCall(s, "Lock"); mu != "" {
					if locked {
						t.Errorf("%s: %s takes %s, but a …Locked function runs with mu held", fset.Position(s.Pos()), fn.Name.Name, mu)
					}
					if i+1 >= len(stmts) || !isDeferUnlock(stmts[i+1], mu) {
						t.Errorf("%s: %s: %s.Lock() not followed by defer l.%s.Unlock()", fset.Position(s.Pos()), fn.Name.Name, mu, mu)
					}
				}
				if is, ok := s.(*ast.IfStmt); ok && is.Init == nil {
					if mu := muCallExpr(is.Cond, "TryLock"); mu != "" {
						if locked {
							t.Errorf("%s: %s takes %s, but a …Locked function runs with mu held", fset.Position(s.Pos()), fn.Name.Name, mu)
						}
						if len(is.Body.List) == 0 || !isDeferUnlock(is.Body.List[0], mu) {
							t.Errorf("%s: %s: if %s.TryLock() { not followed by defer l.%s.Unlock()", fset.Position(s.Pos()), fn.Name.Name, mu, mu)
						}
						tryLocks[is.Cond] = true
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
					if mu := muCall(n, "Unlock"); mu != "" {
						t.Errorf("%s: %s unlocks %s by hand", fset.Position(n.Pos()), fn.Name.Name, mu)
					}
					if mu := muCall(n, "Lock"); mu != "" && !onTop(stmts, n) {
						t.Errorf("%s: %s takes %s inside a block: take it in a helper of its own", fset.Position(n.Pos()), fn.Name.Name, mu)
					}
				case *ast.CallExpr:
					if mu := muCallExpr(n, "TryLock"); mu != "" && !tryLocks[n] {
						t.Errorf("%s: %s: %s.TryLock() outside `if l.%s.TryLock() { defer l.%s.Unlock(); … }` on the function's top level", fset.Position(n.Pos()), fn.Name.Name, mu, mu, mu)
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

// lockNames are the package's mutexes the discipline covers.
var lockNames = map[string]bool{"mu": true, "wmu": true}

// muCall returns which mutex s, the statement <x>.<mutex>.<method>(), calls
// ("" when it is not such a statement).
func muCall(s ast.Stmt, method string) string {
	es, ok := s.(*ast.ExprStmt)
	if !ok {
		return ""
	}
	return muCallExpr(es.X, method)
}

func muCallExpr(e ast.Expr, method string) string {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return ""
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != method {
		return ""
	}
	inner, ok := sel.X.(*ast.SelectorExpr)
	if !ok || !lockNames[inner.Sel.Name] {
		return ""
	}
	return inner.Sel.Name
}

func isDeferUnlock(s ast.Stmt, mu string) bool {
	d, ok := s.(*ast.DeferStmt)
	return ok && muCallExpr(d.Call, "Unlock") == mu
}
