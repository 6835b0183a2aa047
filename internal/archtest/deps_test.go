package archtest

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/planlock/planlock"

// forbidden are dependency edges the design rules out: package → import
// path prefixes none of its dependencies (direct or not) may have. The
// GitHub client is package gitapprove's own; sigstore comes with package
// sign.
var forbidden = []struct {
	pkg string
	not []string
	why string
}{
	{"proxy", []string{"github.com/go-git/", "github.com/sigstore/", module + "/gitapprove", module + "/sign"},
		"the relay forwards calls; approval pull requests reach it through proxy/holdreq only"},
	{"proxy/gate", []string{"github.com/go-git/", "github.com/sigstore/", module + "/gitapprove", module + "/sign", module + "/proxy/ledger"},
		"the decision is pure: no I/O, no state"},
	{"proxy/ledger", []string{"github.com/go-git/", "github.com/sigstore/", module + "/gitapprove", module + "/sign", module + "/hclplan"},
		"the durable state takes canonical JSON from internal/canonjson, not the plan language"},
	{"proxy/ledger", []string{"github.com/jackc/"},
		"the embedded journal needs no database driver; the PostgreSQL state is proxy/ledger/pgstate, chosen by the command"},
	{"proxy/holdreq", []string{"github.com/go-git/", "github.com/sigstore/", module + "/gitapprove", module + "/sign"},
		"the approver contract is a leaf"},
	{"hclplan", []string{"github.com/go-git/", "github.com/sigstore/", module + "/gitapprove", module + "/sign", module + "/proxy"},
		"the plan language knows nothing of Git, signatures or the proxy"},
}

// deps lists the import paths pkg depends on, itself included.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	// The go command on PATH: the one running these tests.
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", module+"/"+pkg)
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, msg)
	}
	return strings.Fields(string(out))
}

// violations are the dependencies of list that have one of the prefixes.
func violations(list, prefixes []string) []string {
	var bad []string
	for _, d := range list {
		if slices.ContainsFunc(prefixes, func(p string) bool { return d == strings.TrimSuffix(p, "/") || strings.HasPrefix(d, p) }) {
			bad = append(bad, d)
		}
	}
	return bad
}

func TestDependencyEdges(t *testing.T) {
	for _, f := range forbidden {
		t.Run(f.pkg, func(t *testing.T) {
			if bad := violations(deps(t, f.pkg), f.not); len(bad) > 0 {
				t.Errorf("%s depends on %d forbidden packages (%s), e.g. %s", f.pkg, len(bad), f.why, strings.Join(bad[:min(len(bad), 5)], ", "))
			}
		})
	}
}

// The check sees the edges it forbids: the hold-PR backend does depend on
// Git, GitHub (package gitapprove's client) and sigstore.
func TestDependencyCheckSeesForbiddenEdges(t *testing.T) {
	bad := violations(deps(t, "internal/approvals"), forbidden[0].not)
	for _, want := range forbidden[0].not {
		if !slices.ContainsFunc(bad, func(d string) bool { return strings.HasPrefix(d, want) }) {
			t.Errorf("internal/approvals: no dependency under %s found; the check would miss one", want)
		}
	}
}

// testOnly are the trees of test doubles, harnesses and end-to-end tests.
// examples/ and bench/ drive the product with them (the demo runs real SDK
// peers through internal/testkit/peers), so they may import them.
var testOnly = []string{module + "/internal/testkit/", module + "/test/"}

// No product package (nor anything it depends on) imports a test double:
// fakes of GitHub, sigstore, Vault or OAuth, the test upstream and the
// harnesses stay out of the binary.
func TestNoProductPackageImportsATestDouble(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}", "./...")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	product := 0
	for _, pkg := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
		if violations([]string{pkg}, append(testOnly, module+"/examples/", module+"/bench")) != nil {
			continue
		}
		product++
		if bad := violations(deps(t, rel), testOnly); len(bad) > 0 {
			t.Errorf("product package %s depends on test code: %s", pkg, strings.Join(bad, ", "))
		}
	}
	if product < 30 {
		t.Fatalf("only %d product packages found: the check sees nothing", product)
	}
}
