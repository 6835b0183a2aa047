package main

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// Every flag of every command is bound to a field of its options struct,
// so no value can only be reached by name.
func TestEveryFlagHasDestination(t *testing.T) {
	var walk func(path string, cmds []*cli.Command)
	walk = func(path string, cmds []*cli.Command) {
		for _, cmd := range cmds {
			p := strings.TrimSpace(path + " " + cmd.Name)
			for _, f := range cmd.Flags {
				dst := reflect.ValueOf(f).Elem().FieldByName("Destination")
				if !dst.IsValid() || dst.IsNil() {
					t.Errorf("%s --%s: no Destination; bind it to a field of the command's options struct", p, f.Names()[0])
				}
			}
			walk(p, cmd.Subcommands)
		}
	}
	walk("", commands())
}

// The value of a flag reaches the options struct from each layer: the
// command line, a PLANLOCK_* variable and the operator config file (which
// config.go applies with c.Set, through Destination), in that precedence.
func TestOptionsFromEveryLayer(t *testing.T) {
	dir := t.TempDir()
	xdg := filepath.Join(dir, "xdg")
	if err := os.MkdirAll(filepath.Join(xdg, "planlock"), 0o700); err != nil {
		t.Fatal(err)
	}
	// name from the config file; type from the environment over the config
	// file; out-dir from the command line over both.
	cfg := "name = \"fromconfig\"\ntype = \"rsa-2048\"\nout_dir = \"ignored\"\n"
	if err := os.WriteFile(filepath.Join(xdg, "planlock", "config.hcl"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CONFIG_HOME", xdg)
	t.Setenv("PLANLOCK_TYPE", "ed25519")
	out := filepath.Join(dir, "keys")
	code, stdout, stderr := runCLI(t, "keygen", "--out-dir", out)
	if code != 0 {
		t.Fatalf("keygen: exit %d, stderr %q", code, stderr)
	}
	if !strings.Contains(stdout, filepath.Join(out, "fromconfig.key")) {
		t.Fatalf("stdout %q: want the key named by the config file in the --out-dir directory", stdout)
	}
	pub, err := os.ReadFile(filepath.Join(out, "fromconfig.pub"))
	if err != nil {
		t.Fatal(err)
	}
	// An Ed25519 SubjectPublicKeyInfo is 44 bytes, 60 base64 characters in
	// one line; an RSA key's is far longer.
	if lines := strings.Split(strings.TrimSpace(string(pub)), "\n"); len(lines) != 3 {
		t.Fatalf("public key %q: want an ed25519 key (PLANLOCK_TYPE), not the config file's rsa-2048", pub)
	}
	if _, err := os.Stat(filepath.Join(xdg, "planlock", "ignored")); err == nil {
		t.Fatal("the config file's out_dir was used over --out-dir")
	}

	// A shared group (the trust flags) from the config file: its relative
	// file name is resolved against the config file's directory.
	if err := os.WriteFile(filepath.Join(xdg, "planlock", "config.hcl"), []byte("key = \"trust.pub\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCLI(t, "verify", filepath.Join(dir, "plan.hcl"))
	if code != exitFailure || !strings.Contains(stderr, filepath.Join(xdg, "planlock", "trust.pub")) {
		t.Fatalf("verify with key from the config file: exit %d, stderr %q; want it to read %s", code, stderr, filepath.Join(xdg, "planlock", "trust.pub"))
	}
}

// given refuses a name the command has no flag for: a misspelt name must
// not quietly read "not set".
func TestGivenChecksTheName(t *testing.T) {
	var seen string
	o := &verifyOptions{}
	cmd := &cli.Command{Name: "verify", Flags: o.flags(), Action: action(o, func(_ context.Context, o *verifyOptions) error {
		if !o.given("bundle") || o.given("path") {
			seen = "wrong given"
		}
		defer func() { seen += "|" + toString(recover()) }()
		o.given("bundel")
		return nil
	})}
	app := &cli.App{Name: "t", Commands: []*cli.Command{cmd}, ExitErrHandler: func(*cli.Context, error) {}}
	if err := app.Run([]string{"t", "verify", "--bundle", "b.json", "x.hcl"}); err != nil {
		t.Fatal(err)
	}
	if seen != "|planlock: no flag --bundel on this command" {
		t.Fatalf("given: %q", seen)
	}
}

func toString(v any) string {
	s, _ := v.(string)
	return s
}
