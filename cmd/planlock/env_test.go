package main

import (
	"bytes"
	"context"
	"github.com/urfave/cli/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestHelpListsEnv: each command's --help names every variable on its
// list, and every flag's EnvVars.
func TestHelpListsEnv(t *testing.T) {
	app := testApp()
	for path, vars := range commandEnv() {
		t.Run(path, func(t *testing.T) {
			cmd, _ := resolve(app, strings.Fields(path))
			if cmd == nil {
				t.Fatalf("no command %q", path)
			}
			var out, errb bytes.Buffer
			args := append(append([]string{"planlock"}, strings.Fields(path)...), "--help")
			if code := run(context.Background(), args, streams{in: strings.NewReader(""), out: &out, err: &errb}); code != 0 {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			for _, v := range vars {
				if !regexp.MustCompile(`(?m)^\s+` + v.name + `\s`).MatchString(out.String()) {
					t.Errorf("planlock %s --help does not list %s:\n%s", path, v.name, out.String())
				}
			}
			for _, f := range cmd.Flags {
				if vf, ok := f.(cli.VisibleFlag); ok && !vf.IsVisible() {
					continue // a hidden flag (for tests) has no help line
				}
				if ev, ok := f.(interface{ GetEnvVars() []string }); ok {
					for _, name := range ev.GetEnvVars() {
						if !strings.Contains(out.String(), "$"+name) {
							t.Errorf("planlock %s --help does not show $%s of --%s", path, name, f.Names()[0])
						}
					}
				}
			}
		})
	}
}

// TestEveryEnvReadIsListed scans the packages the binary is made of for
// the variables they read by name, and fails for one that no command's
// list names: a new os.Getenv("X") needs a line in some --help.
func TestEveryEnvReadIsListed(t *testing.T) {
	listed := map[string]bool{}
	for _, vars := range commandEnv() {
		for _, v := range vars {
			listed[v.name] = true
		}
	}
	read := regexp.MustCompile(`(?:Getenv|LookupEnv|getenv|lookup)\("([A-Z][A-Z0-9_]*)"\)`)
	found := 0
	for _, dir := range []string{".", "../../sign", "../../gitapprove", "../../hclplan", "../../proxy"} {
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range read.FindAllStringSubmatch(string(src), -1) {
				found++
				if !listed[m[1]] {
					t.Errorf("%s reads %s, which no command's --help lists (env.go)", path, m[1])
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if found < 10 {
		t.Fatalf("found only %d reads: the scan is broken", found)
	}
}
