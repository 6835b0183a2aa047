package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

// runSettings runs a one-command app with a flag of each kind through
// applySettings, as the real commands are, and returns what the action saw.
func runSettings(t *testing.T, args ...string) (map[string]string, error) {
	t.Helper()
	got := map[string]string{}
	cmds := []*cli.Command{{
		Name: "serve",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "state-root", TakesFile: true},
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:1"},
			&cli.BoolFlag{Name: "audit-redact"},
			&cli.DurationFlag{Name: "call-timeout", Value: time.Minute},
			&cli.StringSliceFlag{Name: "env"},
			&cli.StringFlag{Name: "key", EnvVars: []string{"PLANLOCK_SIGNING_KEY"}, TakesFile: true},
		},
		Action: func(c *cli.Context) error {
			got["state-root"] = c.String("state-root")
			got["listen"] = c.String("listen")
			got["audit-redact"] = fmt.Sprint(c.Bool("audit-redact"))
			got["call-timeout"] = c.Duration("call-timeout").String()
			got["env"] = strings.Join(c.StringSlice("env"), ",")
			got["key"] = c.String("key")
			return nil
		},
	}}
	applySettings(cmds, nil)
	app := &cli.App{Name: "t", Commands: cmds, ExitErrHandler: func(*cli.Context, error) {}}
	err := app.RunContext(context.Background(), append([]string{"t", "serve"}, args...))
	return got, err
}

func TestSettingsPrecedence(t *testing.T) {
	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "xdg", "planlock")
	if err := os.MkdirAll(cfgDir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeConfig := func(t *testing.T, src string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(cfgDir, "config.hcl"), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	full := `
state_root   = "state"
listen       = "127.0.0.1:3"
audit_redact = true
call_timeout = "5s"
env          = ["A", "B"]
signing_key  = "~/k.pem"
`
	home, _ := os.UserHomeDir()
	tests := []struct {
		name   string
		config string
		env    map[string]string
		args   []string
		want   map[string]string
	}{
		{name: "defaults", want: map[string]string{"listen": "127.0.0.1:1", "audit-redact": "false", "call-timeout": "1m0s", "state-root": "", "env": ""}},
		{name: "config over default", config: full, want: map[string]string{
			"listen": "127.0.0.1:3", "audit-redact": "true", "call-timeout": "5s", "env": "A,B",
			"state-root": filepath.Join(cfgDir, "state"), // relative to the config file
			"key":        filepath.Join(home, "k.pem"),
		}},
		{name: "env over config", config: full,
			env:  map[string]string{"PLANLOCK_LISTEN": "127.0.0.1:4", "PLANLOCK_AUDIT_REDACT": "false", "PLANLOCK_STATE_ROOT": "rel"},
			want: map[string]string{"listen": "127.0.0.1:4", "audit-redact": "false", "state-root": "rel", "call-timeout": "5s"}},
		{name: "flag over env and config", config: full,
			env:  map[string]string{"PLANLOCK_LISTEN": "127.0.0.1:4"},
			args: []string{"--listen", "127.0.0.1:5", "--env", "C", "--call-timeout", "2s"},
			want: map[string]string{"listen": "127.0.0.1:5", "env": "C", "call-timeout": "2s"}},
		{name: "a declared variable", env: map[string]string{"PLANLOCK_SIGNING_KEY": "k1", "PLANLOCK_KEY": "ignored"},
			want: map[string]string{"key": "k1"}},
		{name: "explicit config file", env: map[string]string{"PLANLOCK_CONFIG": filepath.Join(dir, "other.hcl")},
			want: map[string]string{"listen": "127.0.0.1:9"}},
		{name: "--config wins over PLANLOCK_CONFIG", env: map[string]string{"PLANLOCK_CONFIG": "/nonexistent.hcl"},
			args: []string{"--config", filepath.Join(dir, "other.hcl")},
			want: map[string]string{"listen": "127.0.0.1:9"}},
	}
	if err := os.WriteFile(filepath.Join(dir, "other.hcl"), []byte(`listen = "127.0.0.1:9"`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "xdg"))
			for _, k := range []string{"PLANLOCK_LISTEN", "PLANLOCK_AUDIT_REDACT", "PLANLOCK_STATE_ROOT", "PLANLOCK_SIGNING_KEY", "PLANLOCK_KEY", "PLANLOCK_CONFIG", "PLANLOCK_ENV", "PLANLOCK_CALL_TIMEOUT"} {
				t.Setenv(k, "")
				os.Unsetenv(k)
			}
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			os.Remove(filepath.Join(cfgDir, "config.hcl"))
			if tt.config != "" {
				writeConfig(t, tt.config)
			}
			got, err := runSettings(t, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

func TestSettingsConfigErrors(t *testing.T) {
	tests := []struct {
		name   string
		config string
		want   string // the whole one-line message after the file name
	}{
		{"syntax", "listen = \n", `:1:10: Invalid expression; Expected the start of an expression, but found an invalid expression token.`},
		{"unknown setting", "\nlisten = \"x\"\nlistn = \"y\"\n", `:3:1: unknown setting "listn" (did you mean listen?)`},
		{"block", "trust {\n}\n", `:1:1: Unexpected "trust" block; Blocks are not allowed here.`},
		{"variable", "listen = var.x\n", `:1:10: Variables not allowed; Variables may not be used here.`},
		{"list for one value", "listen = [\"a\"]\n", `:1:1: listen takes one value, not a list`},
		{"bad duration", "call_timeout = \"soon\"\n", `:1:1: call_timeout = "soon": want a duration such as 30s or 2m`},
		{"bad bool", "audit_redact = \"maybe\"\n", `:1:1: audit_redact = "maybe": want true or false`},
		{"object", "listen = { a = 1 }\n", `:1:10: listen: want a string, number, bool or list of strings`},
		{"list of numbers", "env = [1]\n", `:1:7: env: a list may hold strings only`},
		{"null", "listen = null\n", `:1:10: listen: a value is required`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.hcl")
			if err := os.WriteFile(path, []byte(tt.config), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := runSettings(t, "--config", path)
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != exitUsage {
				t.Fatalf("error %v, want a usage error", err)
			}
			if want := path + tt.want; ee.msg != want {
				t.Fatalf("message\n %q\nwant\n %q", ee.msg, want)
			}
		})
	}
	// A named config file that does not exist is an error; the default one
	// missing is no config.
	_, err := runSettings(t, "--config", filepath.Join(t.TempDir(), "missing.hcl"))
	if err == nil || !strings.Contains(err.Error(), "missing.hcl: no such file") {
		t.Fatalf("missing named config: %v", err)
	}
}

// BenchmarkSettings is one command run through the settings layer with a
// config file setting every flag (parse, apply, action).
func BenchmarkSettings(b *testing.B) {
	path := filepath.Join(b.TempDir(), "c.hcl")
	src := "state_root = \"s\"\nlisten = \"127.0.0.1:3\"\naudit_redact = true\ncall_timeout = \"5s\"\nenv = [\"A\", \"B\"]\nsigning_key = \"k\"\n"
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		b.Fatal(err)
	}
	t := &testing.T{}
	for b.Loop() {
		if _, err := runSettings(t, "--config", path); err != nil {
			b.Fatal(err)
		}
	}
}
