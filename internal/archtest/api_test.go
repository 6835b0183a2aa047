package archtest

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/api.txt from the source")

// publicPackages are the packages an embedder uses: their exported API is
// pinned in testdata/api.txt, so that a change to it is deliberate.
var publicPackages = []string{
	"gitapprove",
	"hclplan",
	"hclplan/plandiff",
	"hclplan/toolpin",
	"proxy",
	"proxy/gate",
	"proxy/holdreq",
	"proxy/ledger",
	"proxy/ledger/pgstate",
	"proxy/planload",
	"sign",
}

// apiOf lists a package's exported declarations, one per line, sorted:
// functions and methods with their signatures, types with their exported
// fields and methods' sets as declared, constants and variables with their
// types. It also returns every use of an internal package's identifier in
// that API: a public declaration that needs one cannot be used from
// outside the module.
func apiOf(t *testing.T, pkg string) (lines, internal []string) {
	t.Helper()
	// The files go list names: the build as it is on this platform.
	cmd := exec.Command("go", "list", "-f", "{{.Dir}}\n{{join .GoFiles \"\\n\"}}", module+"/"+pkg)
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pkg, err)
	}
	names := strings.Split(strings.TrimSpace(string(out)), "\n")
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	for _, name := range names[1:] {
		f, err := parser.ParseFile(fset, filepath.Join(names[0], name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parse %s: %v", name, err)
		}
		files[name] = f
	}
	print := func(n any) string {
		var b bytes.Buffer
		if err := (&printer.Config{Mode: printer.RawFormat}).Fprint(&b, fset, n); err != nil {
			t.Fatal(err)
		}
		return strings.Join(strings.Fields(b.String()), " ")
	}
	for fname, f := range files {
		imports := map[string]string{}
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			local := path[strings.LastIndex(path, "/")+1:]
			if im.Name != nil {
				local = im.Name.Name
			}
			imports[local] = path
		}
		// needs records the internal packages a public node names.
		needs := func(what string, n ast.Node) {
			ast.Inspect(n, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if id, ok := sel.X.(*ast.Ident); ok {
						if path := imports[id.Name]; strings.Contains(path, "/internal/") {
							internal = append(internal, fmt.Sprintf("%s: %s needs %s.%s (%s)", filepath.Base(fname), what, id.Name, sel.Sel.Name, path))
						}
					}
				}
				return true
			})
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				recv := ""
				if d.Recv != nil && len(d.Recv.List) == 1 {
					rt := d.Recv.List[0].Type
					base := rt
					if s, ok := base.(*ast.StarExpr); ok {
						base = s.X
					}
					if ix, ok := base.(*ast.IndexExpr); ok {
						base = ix.X
					}
					if id, ok := base.(*ast.Ident); !ok || !id.IsExported() {
						continue
					}
					recv = "(" + print(rt) + ") "
				}
				sig := print(d.Type)
				what := "func " + recv + d.Name.Name + strings.TrimPrefix(sig, "func")
				lines = append(lines, what)
				needs(what, d.Type)
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						kind := "type " + s.Name.Name
						if s.Assign.IsValid() {
							// An alias re-exports the type: what it names is
							// usable through it.
							lines = append(lines, kind+" = "+print(s.Type))
							continue
						}
						switch ty := s.Type.(type) {
						case *ast.StructType:
							lines = append(lines, kind+" struct")
							for _, fl := range ty.Fields.List {
								names := fl.Names
								if len(names) == 0 { // embedded
									lines = append(lines, kind+" embeds "+print(fl.Type))
									needs(kind+" embeds", fl.Type)
									continue
								}
								for _, n := range names {
									if n.IsExported() {
										what := kind + "." + n.Name + " " + print(fl.Type)
										lines = append(lines, what)
										needs(what, fl.Type)
									}
								}
							}
						case *ast.InterfaceType:
							lines = append(lines, kind+" interface")
							for _, m := range ty.Methods.List {
								for _, n := range m.Names {
									what := kind + "." + n.Name + strings.TrimPrefix(print(m.Type), "func")
									lines = append(lines, what)
									needs(what, m.Type)
								}
								if len(m.Names) == 0 {
									lines = append(lines, kind+" embeds "+print(m.Type))
									needs(kind, m.Type)
								}
							}
						default:
							what := kind + " " + print(s.Type)
							lines = append(lines, what)
							needs(what, s.Type)
						}
					case *ast.ValueSpec:
						for i, n := range s.Names {
							if !n.IsExported() {
								continue
							}
							kw := "var"
							if d.Tok == token.CONST {
								kw = "const"
							}
							what := kw + " " + n.Name
							if s.Type != nil {
								what += " " + print(s.Type)
								needs(what, s.Type)
							} else if i < len(s.Values) && d.Tok == token.VAR {
								// A constant's value is a value; a
								// variable's may carry an internal type.
								needs(what, s.Values[i])
							}
							lines = append(lines, what)
						}
					}
				}
			}
		}
	}
	slices.Sort(lines)
	slices.Sort(internal)
	return lines, internal
}

// TestPublicAPI pins the exported API of the public packages
// (testdata/api.txt; go test ./internal/archtest -run TestPublicAPI -update
// rewrites it) and checks that none of it needs an internal type.
func TestPublicAPI(t *testing.T) {
	var b strings.Builder
	var internal []string
	for _, pkg := range publicPackages {
		lines, in := apiOf(t, pkg)
		fmt.Fprintf(&b, "# %s (%d)\n", pkg, len(lines))
		for _, l := range lines {
			b.WriteString(l + "\n")
		}
		for _, i := range in {
			internal = append(internal, pkg+": "+i)
		}
	}
	if len(internal) > 0 {
		t.Errorf("the public API needs %d internal identifiers, which no program outside the module can name:\n%s", len(internal), strings.Join(internal, "\n"))
	}
	golden := filepath.Join("testdata", "api.txt")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test ./internal/archtest -run TestPublicAPI -update writes it)", err)
	}
	if got := b.String(); got != string(want) {
		t.Errorf("the public API differs from %s: if the change is deliberate, run go test ./internal/archtest -run TestPublicAPI -update and review the diff\n%s", golden, lineDiff(string(want), got))
	}
}

// lineDiff lists the lines only one of a and b has.
func lineDiff(a, b string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	ia, ib := in(a), in(b)
	var out []string
	for _, l := range strings.Split(a, "\n") {
		if !ib[l] {
			out = append(out, "- "+l)
		}
	}
	for _, l := range strings.Split(b, "\n") {
		if !ia[l] {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}
