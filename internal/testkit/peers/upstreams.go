package peers

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// StartListening starts argv (with extra KEY=VALUE env) and waits for the
// "listening on http://…" line that the repository's servers print on stderr
// (see internal/mcpserve); it returns that URL. The process is stopped when
// the test ends. StartHTTP is the shorthand for the repository's Go commands.
func StartListening(t testing.TB, argv, env []string) string {
	t.Helper()
	p, err := startProcess(t, argv, env, "listening on http://")
	if err != nil {
		t.Fatalf("peers: start %s: %v", filepath.Base(argv[0]), err)
	}
	i := strings.Index(p.readyLine, "listening on ")
	return strings.TrimSpace(p.readyLine[i+len("listening on "):])
}

// CallRecord is one line of a calls log written by the refund server or the
// test upstream (--calls-log): a tools/call that reached the upstream.
type CallRecord struct {
	Time      time.Time       `json:"time"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
}

// ReadCalls reads a calls log; a missing file means no call arrived.
func ReadCalls(t testing.TB, path string) []CallRecord {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("peers: read calls log: %v", err)
	}
	defer f.Close()
	var calls []CallRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 256<<20)
	for sc.Scan() {
		var c CallRecord
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("peers: calls log line %q: %v", sc.Text(), err)
		}
		calls = append(calls, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("peers: read calls log: %v", err)
	}
	return calls
}

// Refund is one refund server set-up for a test: its hash file and calls
// log live in a temporary directory.
type Refund struct {
	Bin      string // the built examples/refund/server
	HashFile string
	CallsLog string
}

// NewRefund prepares a refund server (bin from BuildCommands with
// PkgRefundServer) whose script hash starts at the example plan's pin.
func NewRefund(t testing.TB, bin string) *Refund {
	t.Helper()
	dir := t.TempDir()
	r := &Refund{Bin: bin, HashFile: filepath.Join(dir, "hash"), CallsLog: filepath.Join(dir, "calls.jsonl")}
	r.SetHash(t, "9f86d081884c7d65")
	return r
}

// Args are the server's flags for this set-up.
func (r *Refund) Args() []string {
	return []string{"--hash-file", r.HashFile, "--calls-log", r.CallsLog}
}

// Argv is the stdio command line of the server.
func (r *Refund) Argv() []string { return append([]string{r.Bin}, r.Args()...) }

// StartHTTP starts the server over streamable HTTP and returns its URL.
func (r *Refund) StartHTTP(t testing.TB) string {
	t.Helper()
	return StartHTTP(t, r.Bin, r.Args()...)
}

// SetHash changes the refund script's hash, as a colleague redeploying it would.
func (r *Refund) SetHash(t testing.TB, hash string) {
	t.Helper()
	if err := os.WriteFile(r.HashFile, []byte(hash+"\n"), 0o644); err != nil {
		t.Fatalf("peers: write hash file: %v", err)
	}
}

// Calls are the tools/call requests that reached the server so far.
func (r *Refund) Calls(t testing.TB) []CallRecord {
	t.Helper()
	return ReadCalls(t, r.CallsLog)
}

// ModernStdio is the command line of test/peers/modern-server.mjs over
// stdio: a server of protocol 2026-07-28 only (the TypeScript SDK v2 with
// legacy traffic rejected), with its extra args (--calls-log FILE).
func ModernStdio(t testing.TB, args ...string) []string {
	t.Helper()
	return append([]string{Node(t), filepath.Join(Dir(t), "modern-server.mjs")}, args...)
}

// StartModernHTTP starts test/peers/modern-server.mjs over streamable HTTP
// on a free loopback port and returns its endpoint URL. The server is
// stopped when the test ends.
func StartModernHTTP(t testing.TB, args ...string) string {
	t.Helper()
	return StartListening(t, append(ModernStdio(t, "--http"), args...), nil)
}
