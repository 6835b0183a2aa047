// Package peers lets Go tests drive the real MCP peers pinned in test/peers
// (the official TypeScript SDK client as a scripted agent, the reference
// servers, the Inspector CLI, the conformance suite) and the repository's own
// Go MCP servers. Missing npm packages fail the test: run scripts/install-peers.
package peers

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/planlock/planlock/internal/testkit/leakcheck"
)

// Packages of the repository's Go MCP commands, for BuildCommands.
const (
	PkgTestUpstream  = "./internal/testkit/testupstream/cmd/testupstream"
	PkgRefundServer  = "./examples/refund/server"
	PkgPassthrough   = "./bench/passthrough"
	PkgPlanlock      = "./cmd/planlock"
	PkgGitHubStandIn = "./internal/testkit/githubstandin"
)

const modulePath = "github.com/planlock/planlock"

// startTimeout bounds how long a peer may take to come up. It is a guard
// against hanging tests, not an assertion about speed.
const startTimeout = 60 * time.Second

// RepoRoot finds the repository root by walking up from the working
// directory to the go.mod of the planlock module.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(bytes.TrimSpace(b), []byte("module "+modulePath+"\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repository root (go.mod of " + modulePath + ") not found above the working directory")
		}
		dir = parent
	}
}

// Root is RepoRoot for tests.
func Root(t testing.TB) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatalf("peers: %v", err)
	}
	return root
}

// Dir returns test/peers with its node_modules installed, or fails the test.
func Dir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(Root(t), "test", "peers")
	for _, p := range []string{
		"@modelcontextprotocol/sdk/package.json",
		"@modelcontextprotocol/server-everything/dist/index.js",
		"@modelcontextprotocol/server-filesystem/dist/index.js",
		"@modelcontextprotocol/inspector/cli/build/cli.js",
		"@modelcontextprotocol/conformance/dist/index.js",
		"@modelcontextprotocol/client/package.json",
		"@modelcontextprotocol/server/package.json",
		"conformance-2026/dist/index.js",
		"inspector-2/clients/cli/build/index.js",
	} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", p)); err != nil {
			t.Fatalf("peers: npm MCP peers are not installed (%v): run scripts/install-peers", err)
		}
	}
	return dir
}

// Node returns the path of the node executable, or fails the test.
func Node(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("peers: node not found on PATH (%v): install Node.js 20 or newer", err)
	}
	return p
}

// EverythingStdio is the command line of server-everything over stdio.
func EverythingStdio(t testing.TB) []string {
	t.Helper()
	return []string{Node(t), filepath.Join(Dir(t), "node_modules/@modelcontextprotocol/server-everything/dist/index.js"), "stdio"}
}

// FilesystemStdio is the command line of server-filesystem over stdio,
// allowed to reach dirs.
func FilesystemStdio(t testing.TB, dirs ...string) []string {
	t.Helper()
	return append([]string{Node(t), filepath.Join(Dir(t), "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")}, dirs...)
}

// StartEverythingHTTP starts server-everything in streamable HTTP mode on a
// free loopback port and returns its endpoint URL (http://127.0.0.1:PORT/mcp)
// once it listens. The server is stopped when the test ends.
func StartEverythingHTTP(t testing.TB) string {
	t.Helper()
	argv := []string{Node(t), filepath.Join(Dir(t), "node_modules/@modelcontextprotocol/server-everything/dist/index.js"), "streamableHttp"}
	// server-everything only takes a fixed PORT, so pick a free one; another
	// process could take it in between, hence the retries.
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatalf("peers: %v", err)
		}
		p, err := startProcess(t, argv, []string{"PORT=" + port}, "listening on port")
		if err != nil {
			lastErr = err
			continue
		}
		url := "http://127.0.0.1:" + port + "/mcp"
		if err := waitDial("127.0.0.1:"+port, p); err != nil {
			lastErr = err
			continue
		}
		return url
	}
	t.Fatalf("peers: start server-everything over HTTP: %v", lastErr)
	return ""
}

// StartHTTP starts one of the repository's Go MCP commands (built with
// BuildCommands) as `bin --http 127.0.0.1:0 args...` and returns the URL it
// announces. The process is stopped when the test ends.
func StartHTTP(t testing.TB, bin string, args ...string) string {
	t.Helper()
	return StartListening(t, append([]string{bin, "--http", "127.0.0.1:0"}, args...), nil)
}

// BuildCommands builds the given main packages (e.g. PkgTestUpstream) of the
// repository into outDir with one go build and returns package → binary path.
// It takes no testing.TB so that TestMain can build once per test binary.
// The commands are built without -race even in a -race run: the race
// detector multiplies their memory, and the abuse tests bound the proxy's
// peak RSS.
func BuildCommands(outDir string, pkgs ...string) (map[string]string, error) {
	return BuildCommandsProgress(outDir, nil, 0, pkgs...)
}

// BuildCommandsProgress is BuildCommands telling progress on w (nil: none),
// so that a cold build, minutes long, does not look hung: a line per ten
// packages go build compiles (go build -v names each), and every interval
// a line saying it is still building, how long and how far.
func BuildCommandsProgress(outDir string, w io.Writer, interval time.Duration, pkgs ...string) (map[string]string, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	// A guard against a hung build, generous for a cold -race build on a
	// small machine.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	args := []string{"build", "-o", outDir + string(filepath.Separator)}
	if w != nil {
		args = append(args, "-v")
	}
	cmd := exec.CommandContext(ctx, "go", append(args, pkgs...)...)
	cmd.Dir = root
	var out []byte
	if w == nil {
		out, err = cmd.CombinedOutput()
	} else {
		var ticks <-chan time.Time
		if interval > 0 {
			t := time.NewTicker(interval)
			defer t.Stop()
			ticks = t.C
		}
		start := time.Now()
		out, err = BuildWithProgress(cmd, w, ticks, func() time.Duration { return time.Since(start) })
	}
	if err != nil {
		return nil, fmt.Errorf("go build %s: %w\n%s", strings.Join(pkgs, " "), err, out)
	}
	bins := make(map[string]string, len(pkgs))
	for _, pkg := range pkgs {
		p := filepath.Join(outDir, filepath.Base(pkg))
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("built %s but %s is missing: %w", pkg, p, err)
		}
		bins[pkg] = p
	}
	return bins, nil
}

// BuildWithProgress runs a go build -v command (cmd, not started), writing
// progress on w: a line per ten packages it names as it compiles them, and
// on each tick a line saying it is still building after elapsed(), so far;
// at the end, how many it compiled. It returns the command's combined
// output (for the error of a failed build).
func BuildWithProgress(cmd *exec.Cmd, w io.Writer, ticks <-chan time.Time, elapsed func() time.Duration) ([]byte, error) {
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		pw.Close()
		done <- err
	}()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, pr) // an overlong line: keep the build from blocking
	}()
	var out bytes.Buffer
	n, last := 0, ""
	for lines != nil {
		select {
		case l, ok := <-lines:
			if !ok {
				lines = nil
				continue
			}
			out.WriteString(l + "\n")
			if !importPathRE.MatchString(l) {
				continue // a compiler message, for the error
			}
			n, last = n+1, l
			if n%10 == 0 {
				fmt.Fprintf(w, "  %d packages compiled (%s)\n", n, l)
			}
		case <-ticks:
			if n == 0 {
				fmt.Fprintf(w, "  still building (%s)\n", elapsed().Round(time.Second))
			} else {
				fmt.Fprintf(w, "  still building (%s, %s compiled, last %s)\n", elapsed().Round(time.Second), packages(n), last)
			}
		}
	}
	err := <-done
	if err == nil {
		if n == 0 {
			fmt.Fprintf(w, "  built in %s (nothing to compile: all cached)\n", elapsed().Round(time.Second))
		} else {
			fmt.Fprintf(w, "  built in %s (%s compiled)\n", elapsed().Round(time.Second), packages(n))
		}
	}
	return out.Bytes(), err
}

func packages(n int) string {
	if n == 1 {
		return "1 package"
	}
	return fmt.Sprintf("%d packages", n)
}

// importPathRE is a line of go build -v: the import path of a package it
// compiles (compiler messages have spaces or colons).
var importPathRE = regexp.MustCompile(`^[A-Za-z0-9_.~\-]+(/[A-Za-z0-9_.~\-]+)*$`)

type process struct {
	cmd       *exec.Cmd
	readyLine string
	exited    chan struct{}
	stderr    *SyncBuffer
}

// startProcess starts argv and waits for a stderr line containing ready.
// The process is killed and reaped when the test ends; its stderr is logged
// on failure.
func startProcess(t testing.TB, argv, env []string, ready string) (*process, error) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	// Keep stdin open (and empty) so a server that reads it does not exit.
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("pipe: %w", err)
	}
	cmd.Stdin = stdinR
	leakcheck.OwnGroup(cmd) // what the server starts ends with it
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	stdinR.Close()
	p := &process{cmd: cmd, exited: make(chan struct{}), stderr: &SyncBuffer{}}
	readyc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			_, _ = p.stderr.Write([]byte(line + "\n"))
			if !sent && strings.Contains(line, ready) {
				readyc <- line
				sent = true
			}
		}
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		leakcheck.KillGroup(cmd)
		<-p.exited
		stdinW.Close()
		if t.Failed() {
			t.Logf("stderr of %s:\n%s", strings.Join(argv, " "), p.stderr.String())
		}
	})
	select {
	case line := <-readyc:
		p.readyLine = line
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("%s exited before it was ready (%v):\n%s", argv[0], cmd.ProcessState, p.stderr.String())
	case <-time.After(startTimeout):
		return nil, fmt.Errorf("%s not ready after %s:\n%s", argv[0], startTimeout, p.stderr.String())
	}
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	_, port, err := net.SplitHostPort(ln.Addr().String())
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	return port, nil
}

// waitDial waits until addr accepts connections (the ready line can precede
// the listen on some servers) or the process dies.
func waitDial(addr string, p *process) error {
	deadline := time.Now().Add(startTimeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("server exited: %s", p.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not accepting connections: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// SyncBuffer is a writer that goroutines (a server's log, a process's
// stderr) and the test reading it share.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Reset empties the buffer.
func (s *SyncBuffer) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Reset()
}
