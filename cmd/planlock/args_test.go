package main

import (
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

func testApp() *cli.App {
	return newApp(streams{in: strings.NewReader(""), out: io.Discard, err: io.Discard})
}

func TestNormalizeArgs(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
		path string
	}{
		{"verify key after file", "verify plan.hcl --key k.pub", "verify --key k.pub plan.hcl", "verify"},
		{"validate tools after file", "plan validate plan.hcl --tools t.json", "plan validate --tools t.json plan.hcl", "plan validate"},
		{"show json after file", "plan show plan.hcl --json", "plan show --json plan.hcl", "plan show"},
		{"value with =", "sign a.hcl --key=k b.hcl", "sign --key=k a.hcl b.hcl", "sign"},
		{"value that looks like a flag", "verify a.hcl --certificate-identity-regexp -x", "verify --certificate-identity-regexp -x a.hcl", "verify"},
		{"bool does not take the next argument", "plan fmt --check dir --diff", "plan fmt --check --diff dir", "plan fmt"},
		{"alias", "plan init read-docs -o plans/x.hcl -- npx -y srv /d", "plan init -o plans/x.hcl read-docs -- npx -y srv /d", "plan init"},
		{"-- ends flags: the upstream is untouched", "tools --json -- node s.js --key x -o y", "tools --json -- node s.js --key x -o y", "tools"},
		{"flags before and after --", "proxy --plan p.hcl -- srv --plan q", "proxy --plan p.hcl -- srv --plan q", "proxy"},
		{"stdin dash is an argument", "plan fmt - --check", "plan fmt --check -", "plan fmt"},
		{"unknown flag kept for urfave to name", "plan show a.hcl --nope", "plan show --nope a.hcl", "plan show"},
		{"root flags", "--help", "--help", ""},
		{"help command: the command's --help", "help plan init", "plan init --help", "plan init"},
		{"help alone", "help", "--help", ""},
		{"required flag not needed for help", "proxy --help", "proxy --help", "proxy"},
		{"parent level only", "plan", "plan", "plan"},
		{"subcommand flags", "holds show ID --json --state d", "holds show --json --state d ID", "holds show"},
		{"completion request untouched", "verify a.hcl --ke --generate-bash-completion", "verify a.hcl --ke --generate-bash-completion", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl, err := normalizeArgs(testApp(), append([]string{"planlock"}, strings.Fields(tt.in)...))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(cl.args[1:], " "); got != tt.want {
				t.Errorf("args = %q, want %q", got, tt.want)
			}
			if got := strings.Join(cl.path, " "); got != tt.path {
				t.Errorf("path = %q, want %q", got, tt.path)
			}
		})
	}
}

// TestNormalizeArgsEveryCommand puts every flag of every command after a
// positional argument and checks that it is moved before it with its
// value, from the command's own flag definitions.
func TestNormalizeArgsEveryCommand(t *testing.T) {
	app := testApp()
	var walk func(path []string, cmds []*cli.Command)
	n := 0
	walk = func(path []string, cmds []*cli.Command) {
		for _, c := range cmds {
			p := append(slices.Clone(path), c.Name)
			if len(c.Subcommands) > 0 {
				walk(p, c.Subcommands)
				continue
			}
			var req []string // required flags, given first
			for _, f := range c.Flags {
				if r, ok := f.(cli.RequiredFlag); ok && r.IsRequired() {
					req = append(req, "--"+f.Names()[0], "REQ")
				}
			}
			for _, f := range c.Flags {
				name := f.Names()[0]
				takes := f.(cli.DocGenerationFlag).TakesValue()
				flag := []string{"--" + name}
				if takes {
					flag = append(flag, "VALUE")
				}
				in := append(append(append(append([]string{"planlock"}, p...), req...), "ARG"), flag...)
				in = append(in, "--", "up", "--"+name)
				want := append(append(append(append([]string{"planlock"}, p...), req...), flag...), "ARG", "--", "up", "--"+name)
				t.Run(strings.Join(p, "_")+"/"+name, func(t *testing.T) {
					cl, err := normalizeArgs(app, in)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(cl.args, want) {
						t.Errorf("normalizeArgs(%q) = %q, want %q", in, cl.args, want)
					}
				})
				n++
			}
		}
	}
	walk(nil, app.Commands)
	if n < 50 {
		t.Fatalf("only %d flags checked: commands not found", n)
	}
}

func TestNormalizeArgsErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"prxy", `unknown command "prxy" for "planlock"; did you mean proxy?`},
		{"verfy x", `unknown command "verfy" for "planlock"; did you mean verify?`},
		{"plan vaildate x", `unknown command "vaildate" for "planlock plan"; did you mean validate?`},
		{"plan sh", `unknown command "sh" for "planlock plan"; did you mean show?`},
		{"zzzzzz", `unknown command "zzzzzz" for "planlock"`},
		{"sign x.hcl --key", `flag needs an argument: --key`},
		{"proxy -- node s.js", `required flag --plan not set`},
		{"mcp-config --key k -- node s.js --plan p", `required flag --plan not set`},
		{"help prxy", `unknown command "prxy" for "planlock"; did you mean proxy?`},
	}
	for _, tt := range tests {
		_, err := normalizeArgs(testApp(), append([]string{"planlock"}, strings.Fields(tt.in)...))
		if err == nil || err.Error() != tt.want {
			t.Errorf("%s: err = %v, want %s", tt.in, err, tt.want)
		}
	}
}
