package settings

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

var errUsage = errors.New("usage")

func usage(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errUsage}, a...)...)
}

// TestPrecedence: a flag's value comes from the command line, else its
// PLANLOCK_ variable, else the config file, else its default; a file name
// in the config file is relative to the file.
func TestPrecedence(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	cfg := filepath.Join(dir, "planlock", "config.hcl")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("mode = \"from-config\"\nkey_file = \"k.pub\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		env  string
		mode string
		src  string
	}{
		{name: "config", mode: "from-config", src: "config"},
		{name: "env over config", env: "from-env", mode: "from-env", src: ""},
		{name: "flag over env", args: []string{"--mode", "from-flag"}, env: "from-env", mode: "from-flag", src: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PLANLOCK_MODE", tc.env)
			if tc.env == "" {
				os.Unsetenv("PLANLOCK_MODE")
			}
			var mode, key string
			var sources map[string]Source
			cmd := &cli.Command{Name: "run", Flags: []cli.Flag{
				&cli.StringFlag{Name: "mode", Value: "default", Destination: &mode},
				&cli.StringFlag{Name: "key-file", TakesFile: true, Destination: &key},
			}, Action: func(c *cli.Context) error {
				sources, _ = c.App.Metadata[SourcesKey].(map[string]Source)
				return nil
			}}
			Apply([]*cli.Command{cmd}, Options{Usage: usage})
			app := &cli.App{Name: "planlock", Commands: []*cli.Command{cmd}}
			if err := app.Run(append([]string{"planlock", "run"}, tc.args...)); err != nil {
				t.Fatal(err)
			}
			if mode != tc.mode {
				t.Errorf("mode %q, want %q", mode, tc.mode)
			}
			if got := sources["mode"].Kind; got != tc.src {
				t.Errorf("mode's source %q, want %q", got, tc.src)
			}
			if want := filepath.Join(dir, "planlock", "k.pub"); key != want {
				t.Errorf("key-file %q, want %q (relative to the config file)", key, want)
			}
		})
	}
}

// TestConfigErrors: an unknown or mistyped setting is a usage error naming
// the file, line and column.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct{ config, want string }{
		{`mod = "x"`, `config.hcl:1:1: unknown setting "mod" (did you mean mode?)`},
		{`mode = ["a"]`, "config.hcl:1:1: mode takes one value, not a list"},
		{`mode = {}`, "mode: want a string, number, bool or list of strings"},
	} {
		cfg := filepath.Join(t.TempDir(), "config.hcl")
		if err := os.WriteFile(cfg, []byte(tc.config+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := &cli.Command{Name: "run", Flags: []cli.Flag{&cli.StringFlag{Name: "mode"}}, Action: func(*cli.Context) error { return nil }}
		Apply([]*cli.Command{cmd}, Options{Usage: usage})
		app := &cli.App{Name: "planlock", Commands: []*cli.Command{cmd}}
		err := app.Run([]string{"planlock", "run", "--config", cfg})
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a usage error %q", tc.config, err, tc.want)
		}
	}
}
