package proxy

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// pkgFuncs parses the package's non-test sources and returns every
// top-level function by funcKey.
func pkgFuncs(t *testing.T) (map[string]*ast.FuncDecl, *token.FileSet) {
	t.Helper()
	fset := token.NewFileSet()
	pkg, err := build.Default.ImportDir(".", 0) // the files this platform builds
	if err != nil {
		t.Fatal(err)
	}
	files := pkg.GoFiles
	funcs := map[string]*ast.FuncDecl{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				funcs[funcKey(fd)] = fd
			}
		}
	}
	return funcs, fset
}

// funcKey is a function's name, or Type.name for a method.
func funcKey(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if st, ok := t.(*ast.StarExpr); ok {
		t = st.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// calls returns the calls of a method or function named name inside fn.
func calls(fn *ast.FuncDecl, name string) []*ast.CallExpr {
	var out []*ast.CallExpr
	ast.Inspect(fn, func(n ast.Node) bool {
		c, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		switch f := c.Fun.(type) {
		case *ast.SelectorExpr:
			if f.Sel.Name == name {
				out = append(out, c)
			}
		case *ast.Ident:
			if f.Name == name {
				out = append(out, c)
			}
		}
		return true
	})
	return out
}

// TestOneRoadToTheUpstream proves by the package's own source that every
// client tools/call forwarded upstream passed the pin check and the durable
// reservation:
//   - upstream Requests are only made with a constant method, and
//     "tools/call" only from forward and readPin;
//   - readPin sends the pin's tool and arguments (from the signed plan);
//   - forward takes a grant, and only run builds a grant value, after its
//     readPin (when the decision asks for it) and its Reserve;
//   - forward is called from run only (and observe's and a multi-round
//     retry's: retryCall, after openRetry verified its first round's ticket).
func TestOneRoadToTheUpstream(t *testing.T) {
	funcs, fset := pkgFuncs(t)
	var toolCallers []string
	for name, fn := range funcs {
		// Request(ctx, method, params) waits for the answer; Go(method,
		// params, done) does not (the stdio fast lane).
		sends := append(calls(fn, "Request"), calls(fn, "Go")...)
		for _, c := range sends {
			sel := c.Fun.(*ast.SelectorExpr)
			if x, ok := sel.X.(*ast.SelectorExpr); !ok || x.Sel.Name != "up" {
				continue // not the upstream client
			}
			method := 1
			if sel.Sel.Name == "Go" {
				method = 0
			}
			lit, ok := c.Args[method].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				t.Fatalf("%s: %s calls the upstream with a method that is not a constant", fset.Position(c.Pos()), name)
			}
			if m, _ := strconv.Unquote(lit.Value); m == "tools/call" {
				toolCallers = append(toolCallers, name)
			}
		}
	}
	slices.Sort(toolCallers)
	toolCallers = slices.Compact(toolCallers)
	if !slices.Equal(toolCallers, []string{"Proxy.forward", "Proxy.readPin"}) {
		t.Fatalf("tools/call reaches the upstream from %v, want only forward and readPin", toolCallers)
	}

	// readPin: the name sent is the pin's tool, the arguments the pin's.
	rp := calls(funcs["Proxy.readPin"], "Request")[0]
	params, ok := rp.Args[2].(*ast.CompositeLit)
	if !ok {
		t.Fatal("readPin: the pin request's params are not a literal")
	}
	for _, e := range params.Elts {
		kv := e.(*ast.KeyValueExpr)
		k, _ := strconv.Unquote(kv.Key.(*ast.BasicLit).Value)
		v, ok := kv.Value.(*ast.SelectorExpr)
		if !ok || v.X.(*ast.Ident).Name != "pin" {
			t.Fatalf("readPin: %q is not taken from the plan's pin", k)
		}
	}

	// forward needs a grant.
	fw := funcs["Proxy.forward"]
	hasGrant := false
	for _, f := range fw.Type.Params.List {
		if id, ok := f.Type.(*ast.Ident); ok && id.Name == "grant" {
			hasGrant = true
		}
	}
	if !hasGrant {
		t.Fatal("forward does not take a grant")
	}
	// Only run builds a grant, after readPin and Reserve, and never an
	// observed one. The one other grant is observe's, always observed: true,
	// and observe is reached only from act under the operator's observe
	// setting (checked below).
	for name, fn := range funcs {
		ast.Inspect(fn, func(n ast.Node) bool {
			cl, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			if id, ok := cl.Type.(*ast.Ident); ok && id.Name == "grant" {
				observed := grantField(cl, "observed")
				switch name {
				case "Proxy.run":
					if observed != "" {
						t.Errorf("%s: run builds a grant with observed = %s", fset.Position(cl.Pos()), observed)
					}
					pins, reserves := calls(fn, "readPin"), calls(fn, "Reserve")
					if len(pins) != 1 || len(reserves) != 1 || pins[0].Pos() > reserves[0].Pos() || reserves[0].Pos() > cl.Pos() {
						t.Errorf("%s: run must read the pin, then Reserve, then build the grant", fset.Position(cl.Pos()))
					}
				case "Proxy.retryCall":
					// A multi-round retry: the grant of its first round,
					// whose sealed ticket openRetry verified.
					if observed != "" {
						t.Errorf("%s: retryCall builds a grant with observed = %s", fset.Position(cl.Pos()), observed)
					}
					if opens := calls(fn, "openRetry"); len(opens) != 1 || opens[0].Pos() > cl.Pos() {
						t.Errorf("%s: retryCall must verify the retry (openRetry) before it builds the grant", fset.Position(cl.Pos()))
					}
				case "Proxy.observe":
					if observed != "true" {
						t.Errorf("%s: observe builds a grant that is not observed: true", fset.Position(cl.Pos()))
					}
					if len(calls(fn, "Observe")) != 1 || calls(fn, "Observe")[0].Pos() > cl.Pos() {
						t.Errorf("%s: observe must audit the call (Observe) before it builds the grant", fset.Position(cl.Pos()))
					}
				default:
					t.Errorf("%s: %s builds a grant; only run (and observe, observed) may", fset.Position(cl.Pos()), name)
				}
			}
			return true
		})
		if name != "Proxy.run" && name != "Proxy.observe" && name != "Proxy.retryCall" && len(calls(fn, "forward")) > 0 {
			t.Errorf("%s calls forward; only run, observe and retryCall may", name)
		}
		if name != "Proxy.act" && len(calls(fn, "observe")) > 0 {
			t.Errorf("%s calls observe; only act may", name)
		}
	}
	// act calls observe only inside `if p.cfg.Observe.Enabled() && ...`.
	ast.Inspect(funcs["Proxy.act"], func(n ast.Node) bool {
		is, ok := n.(*ast.IfStmt)
		if !ok {
			return true
		}
		if len(calls(&ast.FuncDecl{Body: is.Body, Name: ast.NewIdent("x"), Type: &ast.FuncType{}}, "observe")) == 0 {
			return true
		}
		b, ok := is.Cond.(*ast.BinaryExpr)
		if !ok || b.Op != token.LAND {
			t.Errorf("%s: act calls observe outside p.cfg.Observe.Enabled() && ...", fset.Position(is.Pos()))
			return false
		}
		c, ok := b.X.(*ast.CallExpr)
		sel, ok2 := c.Fun.(*ast.SelectorExpr)
		if !ok || !ok2 || sel.Sel.Name != "Enabled" || exprString(sel.X) != "p.cfg.Observe" {
			t.Errorf("%s: act calls observe outside p.cfg.Observe.Enabled() && ...", fset.Position(is.Pos()))
		}
		return false
	})
	if n := len(calls(funcs["Proxy.act"], "observe")); n != 1 {
		t.Errorf("act calls observe %d times, want once", n)
	}
	// Nor is a grant made any other way: no var of type grant, no new(grant).
	for name, fn := range funcs {
		ast.Inspect(fn, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				if id, ok := n.Type.(*ast.Ident); ok && id.Name == "grant" {
					t.Errorf("%s: %s declares a grant variable", fset.Position(n.Pos()), name)
				}
			case *ast.CallExpr:
				if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "new" && len(n.Args) == 1 {
					if a, ok := n.Args[0].(*ast.Ident); ok && a.Name == "grant" {
						t.Errorf("%s: %s calls new(grant)", fset.Position(n.Pos()), name)
					}
				}
			}
			return true
		})
	}
}

// TestGitSideNeverReachesTheLedger: the Git/GitHub side of holds
// (gitapprove) sits behind the proxy's hold interface and cannot call back
// into the durable state: it does not import the ledger at all.
func TestGitSideNeverReachesTheLedger(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/planlock/planlock/gitapprove").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/planlock/planlock/gitapprove") {
		t.Fatalf("go list printed no gitapprove: %s", out)
	}
	for _, d := range deps {
		if strings.HasPrefix(d, "github.com/planlock/planlock/proxy") {
			t.Errorf("gitapprove depends on %s", d)
		}
	}
}

// grantField is the source of a field's value in a grant literal ("" unset).
func grantField(cl *ast.CompositeLit, field string) string {
	for _, e := range cl.Elts {
		if kv, ok := e.(*ast.KeyValueExpr); ok {
			if k, ok := kv.Key.(*ast.Ident); ok && k.Name == field {
				return exprString(kv.Value)
			}
		}
	}
	return ""
}

// exprString spells a selector or identifier expression (p.cfg.Observe).
func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	}
	return "?"
}
