package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain lets testscript run the real CLI as the "planlock" command, in a
// child process, exactly as a user types it.
func TestMain(m *testing.M) {
	cmds := testCommands() // mcpcall_test.go
	cmds["planlock"] = func() {
		os.Exit(run(context.Background(), os.Args, streams{in: os.Stdin, out: os.Stdout, err: os.Stderr}))
	}
	cmds["npx"] = func() { os.Exit(npxMain(os.Args[1:])) }
	testscript.Main(m, cmds)
}

func TestScript(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Cmds: map[string]func(*testscript.TestScript, bool, []string){
			"exits":          cmdExits,
			"sign-unchecked": cmdSignUnchecked,
			"capture":        cmdCapture,
			"waitfor":        cmdWaitFor,
			"statedir":       cmdStateDir, // state_identity_test.go
		},
		Setup: func(env *testscript.Env) error {
			env.Setenv("NO_COLOR", "1")
			if err := setupVault(env); err != nil {
				return err
			}
			return setupSigstore(env)
		},
	})
}

// cmdCapture sets an environment variable from the last command's stdout:
//
//	capture HOLD 'hold ([0-9a-f]{16})'
func cmdCapture(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: capture NAME REGEXP")
	}
	m := regexp.MustCompile(args[1]).FindStringSubmatch(ts.ReadFile("stdout"))
	if len(m) < 2 {
		ts.Fatalf("capture: %q does not match stdout", args[1])
	}
	ts.Setenv(args[0], m[1])
}

// cmdWaitFor waits until a file's content matches a regexp, for a process
// started in the background (&) to be ready; it gives up after a minute.
//
//	waitfor state/a/lock 'planlock proxy'
func cmdWaitFor(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitfor FILE REGEXP")
	}
	re := regexp.MustCompile(args[1])
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(ts.MkAbs(args[0])); err == nil && re.Match(b) {
			return
		}
	}
	ts.Fatalf("waitfor: %s does not match %q after a minute", args[0], args[1])
}

// cmdExits runs a command and checks its exit status, since the contract's
// exit codes (1 failure, 2 usage, 3 unformatted) are part of the interface:
//
//	exits 2 planlock plan validate
func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits CODE COMMAND [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits: %v", err)
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("exits: %v", err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("exit status %d, want %d", got, want)
	}
}
