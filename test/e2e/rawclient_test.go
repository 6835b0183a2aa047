//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/planlock/planlock/internal/testkit/peers"
)

// rawClient drives the planlock binary over stdio with hand-written JSON-RPC
// lines, so that tests can send what no SDK would: repeated keys, invalid
// UTF-8, 100 MB lines, 100k-deep nesting, pipelined floods.
type rawClient struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	wmu    sync.Mutex
	nextID atomic.Int64

	mu      sync.Mutex
	pending map[string]chan rpcAnswer
	nullIDs chan rpcAnswer // answers the proxy could not tie to a request
	notes   atomic.Int64   // notifications received
	stderr  *peers.SyncBuffer
	readErr chan error
}

type rpcAnswer struct {
	Result *struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	raw []byte
}

// text is the answer in one line: the tool result's text, or the JSON-RPC
// error as "rpc error CODE: MESSAGE".
func (a rpcAnswer) text() string {
	if a.Error != nil {
		return fmt.Sprintf("rpc error %d: %s", a.Error.Code, a.Error.Message)
	}
	if a.Result == nil {
		return "(no result) " + string(a.raw)
	}
	var b strings.Builder
	for _, c := range a.Result.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// allowed reports a successful tool result.
func (a rpcAnswer) allowed() bool { return a.Result != nil && !a.Result.IsError }

// startRaw runs planlock with args and initialises an MCP session.
func startRaw(t *testing.T, args ...string) *rawClient {
	t.Helper()
	c := &rawClient{t: t, pending: map[string]chan rpcAnswer{}, nullIDs: make(chan rpcAnswer, 16),
		stderr: &peers.SyncBuffer{}, readErr: make(chan error, 1)}
	c.cmd = exec.Command(planlockBin, args...)
	c.cmd.Env = os.Environ()
	c.cmd.Stderr = c.stderr
	var err error
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go c.read(stdout)
	t.Cleanup(func() {
		// Stdin's end lets the proxy end its upstream's process group
		// itself; a kill at once would leave that group running.
		c.stdin.Close()
		done := make(chan struct{})
		go func() { _ = c.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = c.cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("proxy stderr:\n%s", c.stderr.String())
		}
	})
	a := c.request("initialize", `{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"abuse","version":"1"}}`)
	if a.Error != nil {
		t.Fatalf("initialize: %s", a.text())
	}
	c.writeLine([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	return c
}

func (c *rawClient) read(r io.Reader) {
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			c.dispatch(line)
		}
		if err != nil {
			c.readErr <- err
			c.mu.Lock()
			for id, ch := range c.pending {
				close(ch)
				delete(c.pending, id)
			}
			c.mu.Unlock()
			return
		}
	}
}

func (c *rawClient) dispatch(line []byte) {
	var head struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		c.t.Errorf("the proxy wrote a line that is not JSON: %q", truncate(line))
		return
	}
	if head.Method != "" {
		if len(head.ID) == 0 {
			c.notes.Add(1)
		}
		return // notifications and server requests are not what these tests wait for
	}
	var a rpcAnswer
	if err := json.Unmarshal(line, &a); err != nil {
		c.t.Errorf("bad answer %q: %v", truncate(line), err)
		return
	}
	a.raw = line
	id := string(head.ID)
	if id == "" || id == "null" {
		c.nullIDs <- a
		return
	}
	c.mu.Lock()
	ch := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if ch == nil {
		c.t.Errorf("answer to an unknown id %s: %q", id, truncate(line))
		return
	}
	ch <- a
}

func truncate(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

func (c *rawClient) writeLine(line []byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.stdin.Write(append(line, '\n')); err != nil {
		c.t.Fatalf("write to the proxy: %v", err)
	}
}

// sendRaw writes one request line whose id is id and returns where its
// answer arrives.
func (c *rawClient) sendRaw(id int64, line []byte) <-chan rpcAnswer {
	ch := make(chan rpcAnswer, 1)
	c.mu.Lock()
	c.pending[strconv.FormatInt(id, 10)] = ch
	c.mu.Unlock()
	c.writeLine(line)
	return ch
}

func (c *rawClient) request(method, params string) rpcAnswer {
	c.t.Helper()
	id := c.nextID.Add(1)
	line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params)
	return c.wait(c.sendRaw(id, []byte(line)))
}

func (c *rawClient) wait(ch <-chan rpcAnswer) rpcAnswer {
	c.t.Helper()
	var a rpcAnswer
	ok := true
	select {
	case a, ok = <-ch:
	case a = <-c.nullIDs:
		// A message the proxy could not parse gets an error with a null
		// id; the tests that send one wait for it alone.
	}
	if !ok {
		c.t.Fatalf("the proxy closed its output without answering (did it crash?)\nstderr:\n%s", c.stderr.String())
	}
	return a
}

// callLine is a tools/call request line; args is raw JSON ("" = no arguments).
func callLine(id int64, tool, args string) []byte {
	name, _ := json.Marshal(tool)
	if args == "" {
		return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%s}}`, id, name)
	}
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%s,"arguments":%s}}`, id, name, args)
}

func (c *rawClient) call(tool, args string) rpcAnswer {
	c.t.Helper()
	id := c.nextID.Add(1)
	return c.wait(c.sendRaw(id, callLine(id, tool, args)))
}

// peakRSS is the proxy's peak resident set size (VmHWM) in bytes.
func (c *rawClient) peakRSS() int64 { return vmHWM(c.t, c.cmd.Process.Pid) }

func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read the proxy's memory: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// kill9 kills the proxy without warning and waits for it.
func (c *rawClient) kill9() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	_ = c.cmd.Wait()
}

// alive reports whether the proxy process is still running.
func (c *rawClient) alive() bool {
	return c.cmd.ProcessState == nil && c.cmd.Process.Signal(syscall.Signal(0)) == nil
}
