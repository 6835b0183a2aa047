package archtest

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// pkgRef finds the package paths a document names: a path under one of the
// module's roots (in prose, backticks or a diagram), or a bare root in
// backticks. A file name (proxy/call.go) is not a package path.
var pkgRef = regexp.MustCompile("(?:^|[\\s`(│├└─►,])((?:cmd|internal|proxy|hclplan|sign|gitapprove)(?:/[a-z0-9]+)+)(?:[\\s`),:;]|\\.(?:\\s|$)|$)|`(hclplan|sign|gitapprove|proxy)`")

// packagesNamed lists the package paths doc names, in order, once each.
func packagesNamed(doc string) []string {
	var out []string
	for _, m := range pkgRef.FindAllStringSubmatch(doc, -1) {
		p := m[1] + m[2]
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// isPackage reports whether dir (relative to the module root) holds Go code.
func isPackage(root, dir string) bool {
	files, _ := filepath.Glob(filepath.Join(root, dir, "*.go"))
	return len(files) > 0
}

// TestArchitectureDocNamesRealPackages fails when docs/architecture.md names
// a package that is gone (moved or deleted without updating the page), or
// leaves out one of the four public packages.
func TestArchitectureDocNamesRealPackages(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	named := packagesNamed(string(doc))
	if len(named) < 10 {
		t.Fatalf("docs/architecture.md names only %d packages (%v): is the pattern still right?", len(named), named)
	}
	for _, p := range named {
		if !isPackage(root, p) {
			t.Errorf("docs/architecture.md names package %s, which does not exist", p)
		}
	}
	for _, public := range []string{"hclplan", "sign", "gitapprove", "proxy"} {
		if !slices.Contains(named, public) {
			t.Errorf("docs/architecture.md does not name the public package %s", public)
		}
	}
}

func TestPackagesNamed(t *testing.T) {
	doc := strings.Join([]string{
		"`hclplan` and `proxy/gate`; proxy/ledger (read) and proxy/call.go;",
		" ├─► internal/approvals.",
		"sign a plan; `internal/nosuch` is gone",
	}, "\n")
	want := []string{"hclplan", "proxy/gate", "proxy/ledger", "internal/approvals", "internal/nosuch"}
	if got := packagesNamed(doc); !slices.Equal(got, want) {
		t.Fatalf("packagesNamed = %v, want %v", got, want)
	}
	if isPackage(filepath.Join("..", ".."), "internal/nosuch") {
		t.Fatal("isPackage accepts a directory that does not exist")
	}
}
