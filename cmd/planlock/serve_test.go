package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/planlock/planlock/internal/authn"
	"github.com/planlock/planlock/internal/testkit/peers"
)

// waitLog polls the log for re; the deadline guards against a hang.
func waitLog(t *testing.T, log *peers.SyncBuffer, re string) []string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if m := rx.FindStringSubmatch(log.String()); m != nil {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("log never matched %s:\n%s", re, log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeRepo: planlock serve --repo serves the signed plans of the
// repository's plans directory, picks up a plan merged and signed later,
// and stops serving one deleted from the branch.
func TestServeRepo(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	up := server.NewMCPServer("upstream", "1.0.0")
	up.AddTool(mcp.NewTool("echo", mcp.WithString("message")), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("echo"), nil
	})
	ups := httptest.NewServer(server.NewStreamableHTTPServer(up, server.WithStateLess(true)))
	t.Cleanup(ups.Close)

	root := t.TempDir()
	origin, work := filepath.Join(root, "origin.git"), filepath.Join(root, "work")
	rgit(t, root, "init", "--bare", "-q", "-b", "main", origin)
	rgit(t, root, "clone", "-q", origin, work)
	rgit(t, work, "checkout", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(work, "README.md"), []byte("# plans\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rgit(t, work, "add", "-A")
	rgit(t, work, "commit", "-q", "-m", "initial")
	keys := filepath.Join(root, "keys")
	if code, _, e := planlockRun(t, "keygen", "--out-dir", keys, "--name", "ci"); code != 0 {
		t.Fatalf("keygen: %s", e)
	}
	plan := func(name string) string {
		return `plan "` + name + `" {
  goal  = "echo"
  order = "any"
  upstream {
    url = "` + ups.URL + `/mcp"
  }
  step "say" {
    tool = "echo"
    arg "message" { max_length = 10 }
  }
}
`
	}
	// merge commits a plan on main, signs it and publishes its bundle on the
	// approvals branch, as the sign-on-merge workflow does.
	merge := func(name string) {
		t.Helper()
		rgit(t, work, "checkout", "-q", "main")
		p := filepath.Join(work, "plans", name+".hcl")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(plan(name)), 0o644); err != nil {
			t.Fatal(err)
		}
		rgit(t, work, "add", "-A")
		rgit(t, work, "commit", "-q", "-m", "merge "+name)
		rgit(t, work, "push", "-q", "origin", "main")
		bundle := filepath.Join(root, name+".sigstore.json")
		if code, _, e := planlockRun(t, "sign", "--key", filepath.Join(keys, "ci.key"), "--tlog-upload=false", "--out", bundle, p); code != 0 {
			t.Fatalf("sign: %s", e)
		}
		b, err := os.ReadFile(bundle)
		if err != nil {
			t.Fatal(err)
		}
		if rgit(t, work, "branch", "--list", "planlock/approvals") == "" {
			rgit(t, work, "checkout", "-q", "--orphan", "planlock/approvals")
			rgit(t, work, "rm", "-rq", "--cached", ".")
			rgit(t, work, "clean", "-fdq")
		} else {
			rgit(t, work, "checkout", "-q", "planlock/approvals")
		}
		if err := os.MkdirAll(filepath.Join(work, "plans"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, "plans", name+".hcl.sigstore.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		rgit(t, work, "add", "-A")
		rgit(t, work, "commit", "-q", "-m", "sign "+name)
		rgit(t, work, "push", "-q", "origin", "planlock/approvals")
	}
	merge("gitops")

	tokens := filepath.Join(root, "tokens")
	if err := os.WriteFile(tokens, []byte(authn.HashToken("tok")+" ops *\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(root, "state")
	log := &peers.SyncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"planlock", "serve", "--repo", "file://" + origin, "--plans", "plans", "--key", filepath.Join(keys, "ci.pub"),
			"--tokens", tokens, "--state", state, "--listen", "127.0.0.1:0", "--reload-interval", "50ms", "--repo-interval", "100ms"},
			streams{in: strings.NewReader(""), out: io.Discard, err: log})
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d:\n%s", code, log.String())
		}
	}()
	base := waitLog(t, log, `at (http://127\.0\.0\.1:\d+)/mcp/<plan>`)[1]
	waitLog(t, log, `msg="plan served" plan=gitops`)
	status := func(plan string) int {
		req, _ := http.NewRequest("POST", base+"/mcp/"+plan, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Authorization", "Bearer tok")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := status("gitops"); code != 200 {
		t.Fatalf("gitops: HTTP %d", code)
	}
	if code := status("second"); code != 404 {
		t.Fatalf("second before its merge: HTTP %d", code)
	}

	merge("second")
	waitLog(t, log, `msg="plan served" plan=second`)
	if code := status("second"); code != 200 {
		t.Fatalf("second after its merge: HTTP %d", code)
	}

	rgit(t, work, "checkout", "-q", "main")
	rgit(t, work, "rm", "-q", "plans/gitops.hcl")
	rgit(t, work, "commit", "-q", "-m", "retire gitops")
	rgit(t, work, "push", "-q", "origin", "main")
	waitLog(t, log, `plan file removed: plan no longer served" plan=gitops`)
	if code := status("gitops"); code != 404 {
		t.Fatalf("gitops after its removal: HTTP %d", code)
	}
}
