package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// helpExamples returns the planlock command lines of every command's
// "Examples:" section (and the root description), continuation lines
// joined, keyed by the command that shows them.
func helpExamples(app *cli.App) map[string][]string {
	out := map[string][]string{}
	add := func(where, desc string) {
		lines := strings.Split(desc, "\n")
		for i := 0; i < len(lines); i++ {
			// Examples are indented; prose that names a command is not.
			if !strings.HasPrefix(lines[i], " ") {
				continue
			}
			l := strings.TrimSpace(lines[i])
			for strings.HasSuffix(l, "\\") && i+1 < len(lines) {
				i++
				l = strings.TrimSuffix(l, "\\") + " " + strings.TrimSpace(lines[i])
			}
			if exampleStart.MatchString(l) {
				out[where] = append(out[where], l)
			}
		}
	}
	add("planlock", app.Description)
	var walk func(path string, cmds []*cli.Command)
	walk = func(path string, cmds []*cli.Command) {
		for _, c := range cmds {
			p := path + " " + c.Name
			add(p, c.Description)
			walk(p, c.Subcommands)
		}
	}
	walk("planlock", app.Commands)
	return out
}

// exampleStart finds where planlock starts in an example line, also after
// an environment assignment, a pipe or a process substitution.
var exampleStart = regexp.MustCompile(`(?:^|[\s(|])planlock\s`)

// words splits a shell command line the simple way the examples are
// written: single and double quotes, no escapes; it stops at a comment,
// a pipe, a redirection or a command separator.
func words(line string) []string {
	var out []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		case !inWord && strings.ContainsRune("#|><&;", r):
			return out
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

// TestHelpExamples checks every example of every --help text against the
// command definitions: the command exists, each flag is one of its flags,
// and a flag that takes a value has one. (Running them needs GitHub,
// Vault or a keyless signer for most; the documentation test runs the
// README's and docs' commands.)
func TestHelpExamples(t *testing.T) {
	app := testApp()
	all := helpExamples(app)
	n := 0
	for where, examples := range all {
		for _, ex := range examples {
			n++
			if err := checkExample(app, ex); err != nil {
				t.Errorf("%s --help: %q: %v", where, ex, err)
			}
		}
	}
	if n < 25 {
		t.Fatalf("only %d help examples found; the extraction is broken", n)
	}
}

func resolve(app *cli.App, path []string) (*cli.Command, map[string]bool) {
	cmds := app.Commands
	var cmd *cli.Command
	for _, name := range path {
		cmd = findCommand(cmds, name)
		if cmd == nil {
			return nil, nil
		}
		cmds = cmd.Subcommands
	}
	if cmd == nil {
		return nil, nil
	}
	return cmd, flagArity(append(slices.Clone(cmd.Flags), cli.HelpFlag))
}

// checkExample parses one example with the command's own definitions.
func checkExample(app *cli.App, ex string) error {
	loc := exampleStart.FindStringIndex(ex)
	if loc == nil {
		return fmt.Errorf("runs no planlock command")
	}
	cl, err := normalizeArgs(app, words(strings.TrimLeft(ex[loc[0]:], " (|")))
	if err != nil {
		return err
	}
	cmd, flags := resolve(app, cl.path)
	if cmd == nil || cmd.Action == nil && len(cmd.Subcommands) > 0 {
		return fmt.Errorf("names no command")
	}
	if cmd.SkipFlagParsing {
		// "config show COMMAND FLAGS": check the command line it names.
		rest := cl.args[1+len(cl.path):]
		if len(rest) == 0 {
			return nil
		}
		err := checkExample(app, "planlock "+strings.Join(rest, " "))
		if err != nil && strings.Contains(err.Error(), "required flag") {
			return nil // config show reports a missing flag itself
		}
		return err
	}
	rest := cl.args[1+len(cl.path):]
	if i := slices.Index(rest, "--"); i >= 0 {
		rest = rest[:i]
	}
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if !isFlag(a) {
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		takes, ok := flags[name]
		switch {
		case !ok:
			return fmt.Errorf("%s is not a flag of planlock %s", a, strings.Join(cl.path, " "))
		case takes && !hasValue && i+1 >= len(rest):
			return fmt.Errorf("%s needs a value", a)
		case takes && !hasValue:
			i++
		}
	}
	return nil
}

// The checker finds each kind of wrong example.
func TestHelpExamplesCatch(t *testing.T) {
	app := testApp()
	tests := []struct{ ex, want string }{
		{"planlock plan valdate x.hcl", "unknown command"},
		{"planlock plan", "names no command"},
		{"planlock verify --nope x.hcl", "--nope is not a flag of planlock verify"},
		{"planlock sign x.hcl --key", "flag needs an argument: --key"},
		{"planlock sign --key", "flag needs an argument: --key"},
		{"planlock verify x.hcl --key k.pub | jq .", ""},
		{"planlock tools -- node s.js --nope", ""},
	}
	for _, tt := range tests {
		err := checkExample(app, tt.ex)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%q: err = %v, want %q", tt.ex, err, tt.want)
		}
	}
}
