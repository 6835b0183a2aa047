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

// TestEveryGovernedMethodIsDecidedFirst proves by the package's source that
// every request the plan governs besides tools/call reaches the upstream
// only after the gate decided it (gate.DecideOp, through decideOp) in the
// function that receives it from the client:
//   - resources/read and prompts/get only from readResource and getPrompt,
//     after decideOp (or, for a multi-round retry, openRetry, which finds
//     the first round's decision again with gate.Reopen);
//   - completion/complete only from complete, which only the two
//     completers call, each after decideOp;
//   - resources/subscribe only from subscribeAs (and onConnect, which
//     subscribes a new upstream connection again to what subscribeAs
//     recorded), which only subscribe and filterListen call, each after
//     decideOp; subscriptions/listen toward a modern upstream is made of
//     those same recorded URIs (Relisten, from subscribeAs, and from
//     relistenLater after a subscription was taken back).
func TestEveryGovernedMethodIsDecidedFirst(t *testing.T) {
	funcs, fset := pkgFuncs(t)
	// first returns the position of fn's first call of any of names.
	first := func(fn *ast.FuncDecl, names ...string) token.Pos {
		pos := token.NoPos
		for _, n := range names {
			for _, c := range calls(fn, n) {
				if pos == token.NoPos || c.Pos() < pos {
					pos = c.Pos()
				}
			}
		}
		return pos
	}
	senders := map[string][]string{} // governed method → functions sending it
	governed := map[string]bool{"resources/read": true, "prompts/get": true, "completion/complete": true, "resources/subscribe": true}
	for name, fn := range funcs {
		ast.Inspect(fn, func(n ast.Node) bool {
			c, ok := n.(*ast.CallExpr)
			if !ok || len(c.Args) < 2 {
				return true
			}
			var fun string
			switch f := c.Fun.(type) {
			case *ast.SelectorExpr:
				if x, ok := f.X.(*ast.SelectorExpr); ok && x.Sel.Name == "up" && f.Sel.Name == "Request" {
					fun = "Request"
				}
			case *ast.Ident:
				if f.Name == "send" {
					fun = "send"
				}
			}
			if fun == "" {
				return true
			}
			lit, ok := c.Args[1].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				if fun == "send" {
					return true // listAll's pages: a list, filtered by the plan
				}
				t.Errorf("%s: %s calls the upstream with a method that is not a constant", fset.Position(c.Pos()), name)
				return true
			}
			if m, _ := strconv.Unquote(lit.Value); governed[m] {
				senders[m] = append(senders[m], name)
			}
			return true
		})
	}
	for m, want := range map[string][]string{
		"resources/read":      {"Proxy.readResource"},
		"prompts/get":         {"Proxy.getPrompt"},
		"completion/complete": {"Proxy.complete"},
		"resources/subscribe": {"Proxy.onConnect", "Proxy.subscribeAs"},
	} {
		got := slices.Clone(senders[m])
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s reaches the upstream from %v, want only %v", m, got, want)
		}
	}
	// The receiving functions decide first.
	for _, tt := range []struct {
		fn      string
		before  string   // the call that must come after the decision
		decides []string // the decision's calls
	}{
		{"Proxy.readResource", "Request", []string{"decideOp", "openRetry"}},
		{"Proxy.getPrompt", "Request", []string{"decideOp", "openRetry"}},
		{"promptCompleter.CompletePromptArgument", "complete", []string{"decideOp"}},
		{"resourceCompleter.CompleteResourceArgument", "complete", []string{"decideOp"}},
		{"Proxy.subscribe", "subscribeAs", []string{"decideOp"}},
		{"Proxy.filterListen", "subscribeAs", []string{"decideOp"}},
	} {
		fn := funcs[tt.fn]
		if fn == nil {
			t.Errorf("no function %s: the test is looking at the wrong code", tt.fn)
			continue
		}
		d, use := first(fn, tt.decides...), first(fn, tt.before)
		if use == token.NoPos || d == token.NoPos || d > use {
			t.Errorf("%s: calls %s before the gate decides (%v)", tt.fn, tt.before, tt.decides)
		}
	}
	// Only those call the functions that send.
	for callee, want := range map[string][]string{
		"complete":    {"promptCompleter.CompletePromptArgument", "resourceCompleter.CompleteResourceArgument"},
		"subscribeAs": {"Proxy.filterListen", "Proxy.subscribe"},
		"Relisten":    {"Proxy.relistenLater", "Proxy.subscribeAs"},
	} {
		var got []string
		for name, fn := range funcs {
			if len(calls(fn, callee)) > 0 && name != "Proxy."+callee {
				got = append(got, name)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s is called from %v, want only %v", callee, got, want)
		}
	}
	// decideOp is the gate's DecideOp, on the pinned plan's gate.
	if len(calls(funcs["Proxy.decideOp"], "DecideOp")) != 1 {
		t.Error("decideOp does not ask the gate (DecideOp)")
	}
}

// TestCallPipelineNamesNoTransport proves by the source that call.go, the
// tools/call pipeline, uses no type or function declared by a transport's
// file (the stdio and HTTP fronts and their fast lanes): a transport
// reaches the pipeline only through the responder interfaces call.go
// declares, so a protocol change to one front is made once.
func TestCallPipelineNamesNoTransport(t *testing.T) {
	transports := []string{"fastlane.go", "httpfast.go", "httpfront.go", "stdio.go", "laneera.go"}
	fset := token.NewFileSet()
	declared := map[string]string{} // name → file
	for _, name := range transports {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					declared[d.Name.Name] = name
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok {
						declared[ts.Name.Name] = name
					}
				}
			}
		}
	}
	if len(declared) < 10 {
		t.Fatalf("found only %d declarations in the transports' files: the list of files is stale", len(declared))
	}
	f, err := parser.ParseFile(fset, "call.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var named []string
	ast.Inspect(f, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok {
			if file, ok := declared[id.Name]; ok {
				named = append(named, fset.Position(id.Pos()).String()+": "+id.Name+" ("+file+")")
			}
		}
		return true
	})
	if len(named) > 0 {
		t.Fatalf("call.go names what a transport declares:\n%s", strings.Join(slices.Compact(named), "\n"))
	}
}
