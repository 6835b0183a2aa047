package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/planlock/planlock/internal/authn"
	"github.com/planlock/planlock/internal/wire"
	"github.com/planlock/planlock/proxy/ledger"
)

// inputPlan lets the multi-round test upstream's "ask" ask for a password
// and a confirmation (form elicitation) and an LLM completion, in at most
// two rounds; the call may be made once. URL elicitation and roots are
// not allowed.
const inputPlan = `
plan "mr" {
  goal  = "multi-round calls"
  order = "any"
  step "ask" {
    tool      = "ask"
    max_calls = 1
    arg "resultType" { max_length = 20 }
    input {
      max_rounds = 2
      elicitation {
        field "password" {
          type       = "string"
          max_length = 16
          optional   = true
        }
        field "sure" {
          type     = "boolean"
          optional = true
        }
      }
      sampling { max_tokens = 100 }
    }
  }
  prompt "ask" {
    arg "resultType" { max_length = 20 }
    max_calls = 1
    input {
      elicitation {
        field "password" {
          type       = "string"
          max_length = 16
        }
      }
    }
  }
}`

// answering are a client's elicitation and sampling handlers that answer
// what each form asks.
type answering struct {
	elicited, sampled atomic.Int32
	password          string
}

func (h *answering) Elicit(_ context.Context, r mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	h.elicited.Add(1)
	content := map[string]any{}
	if s, ok := r.Params.RequestedSchema.(map[string]any); ok {
		props, _ := s["properties"].(map[string]any)
		if _, ok := props["password"]; ok {
			content["password"] = h.password
		}
		if _, ok := props["sure"]; ok {
			content["sure"] = true
		}
	}
	res := &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept}}
	if len(content) > 0 {
		res.Content = content
	}
	return res, nil
}

func (h *answering) CreateMessage(context.Context, mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	h.sampled.Add(1)
	return &mcp.CreateMessageResult{SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent("the secret")}, Model: "m"}, nil
}

// auditCounts counts an audit log's records by type (decision records by
// decision), and collects the errors of failed outcomes.
func auditCounts(t *testing.T, path string) (map[string]int, []string) {
	t.Helper()
	n := map[string]int{}
	var errs []string
	for _, r := range readAudit(t, path) {
		typ, _ := r["type"].(string)
		if d, _ := r["decision"].(string); d != "" {
			typ = d
		}
		if typ == "outcome" {
			if ok, _ := r["ok"].(bool); !ok {
				typ = "failed"
				e, _ := r["error"].(string)
				errs = append(errs, e)
			}
		}
		n[typ]++
	}
	return n, errs
}

func upstreamCalls(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// TestMultiRoundRetryRealClients: an mcp-go v1.2.1 client with elicitation
// and sampling handlers, modern and legacy, over stdio and HTTP, runs an
// upstream's multi-round call through planlock where the plan allows its
// input requests: the client's handlers run once a round, the upstream gets
// the answers with its own requestState, the call counts once (max_calls =
// 1 is enough for two rounds), and the audit has one allow, the answers and
// one outcome. An input request the plan does not allow (URL elicitation)
// ends the call with the plan's error and reaches no handler.
func TestMultiRoundRetryRealClients(t *testing.T) {
	for _, front := range []string{"stdio", "http"} {
		for _, version := range []string{"", mcp.LATEST_LEGACY_PROTOCOL_VERSION} {
			name := front + "/modern"
			if version != "" {
				name = front + "/legacy"
			}
			for _, tc := range []struct {
				rt                string
				elicited, sampled int32
				want              string // in the call's text
				refused           bool
			}{
				{"elicit", 1, 0, `answers {"password":{"action":"accept","content":{"password":"hunter2"}}}`, false},
				{"sample", 0, 1, `"llm":{"role":"assistant","content":{"type":"text","text":"the secret"},"model":"m"}`, false},
				{"twice", 2, 0, `state upstream-state-2; answers {"confirm":{"action":"accept","content":{"sure":true}}}`, false},
				{"url", 0, 0, `the upstream asked for input this plan does not allow (input request "login": elicitation (url): the plan does not allow it here)`, true},
			} {
				t.Run(name+"/"+tc.rt, func(t *testing.T) {
					if front == "http" && version != "" && tc.rt == "sample" {
						// mcp-go v1.2.1's own legacy HTTP client never
						// answers a bridged sampling/createMessage (its
						// handler is not run); elicitation works.
						t.Skip("mcp-go v1.2.1's legacy HTTP client does not answer a server's sampling request")
					}
					calls := filepath.Join(t.TempDir(), "calls.jsonl")
					h := &answering{password: "hunter2"}
					cl, p, audit := realClient(t, inputPlan, front, version, h, "--mode", "multi-round", "--calls-log", calls)
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					req := mcp.CallToolRequest{}
					req.Params.Name = "ask"
					req.Params.Arguments = map[string]any{"resultType": tc.rt}
					before := p.fastTaken.Load()
					res, err := cl.CallTool(ctx, req)
					if err != nil {
						t.Fatalf("call: %v", err)
					}
					text := firstText(res)
					if !strings.Contains(text, tc.want) || res.IsError != tc.refused {
						t.Errorf("call answered (isError %v) %s\nwant %s", res.IsError, text, tc.want)
					}
					if e, s := h.elicited.Load(), h.sampled.Load(); e != tc.elicited || s != tc.sampled {
						t.Errorf("the client elicited %d and sampled %d times, want %d and %d", e, s, tc.elicited, tc.sampled)
					}
					plan := p.cur.Load().plan
					if n := p.cfg.State.Progress(plan.Digest).Calls(0); n != 1 {
						t.Errorf("counted %d calls, want 1", n)
					}
					// A lane writes a success's outcome record after its answer.
					n, errs := auditCounts(t, audit)
					for deadline := time.Now().Add(10 * time.Second); n["outcome"]+n["failed"] == 0 && time.Now().Before(deadline); n, errs = auditCounts(t, audit) {
						time.Sleep(time.Millisecond)
					}
					rounds := int(tc.elicited + tc.sampled)
					// The lanes take every round: over HTTP, a legacy
					// client's call, asked on the POST's stream, is the
					// server's.
					want := int64(1)
					if version == "" {
						want += int64(rounds)
					} else if front == "http" {
						want = 0
					}
					if got := p.fastTaken.Load() - before; got != want {
						t.Errorf("the fast lane took %d of the call's requests, want %d", got, want)
					}
					if n["allow"] != 1 || n["input"] != rounds || n["block"] != 0 || n["outcome"]+n["failed"] != 1 || (n["failed"] == 1) != tc.refused {
						t.Errorf("audit records %v (failed: %v), want one allow, %d input, one outcome", n, errs, rounds)
					}
					up := upstreamCalls(t, calls)
					if len(up) != 1+rounds {
						t.Errorf("the upstream got %d requests, want %d:\n%s", len(up), 1+rounds, strings.Join(up, "\n"))
					}
					for i, line := range up[1:] {
						if !strings.Contains(line, `"requestState":"upstream-state-`) || strings.Contains(line, "planlock.1.") {
							t.Errorf("retry %d reached the upstream without its own requestState: %s", i+1, line)
						}
					}
				})
			}
		}
	}
}

// TestMultiRoundRetryRefused: a retry is taken only with the requestState
// planlock gave, once, before it expires, from the caller it was given
// to, with the same arguments and answers to what was asked within the
// plan's bounds; any other is refused with a one-line reason, audited, and
// not forwarded. The call then completes with a good retry, counted once.
func TestMultiRoundRetryRefused(t *testing.T) {
	calls := filepath.Join(t.TempDir(), "calls.jsonl")
	_, p, audit := realClient(t, inputPlan, "stdio", "", &askedHandlers{}, "--mode", "multi-round", "--calls-log", calls)
	now := fixedNow()
	p.cfg.Now = func() time.Time { return now }
	// Modern requests of clients that can answer a form.
	modern := server.WithRequestProtocolInfo(context.Background(), &server.RequestProtocolInfo{Modern: true, ProtocolVersion: mcp.ProtocolVersion20260728,
		ClientCapabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{}}})
	alice := authn.WithIdentity(modern, authn.Identity{Subject: "token:alice", Plans: []string{"*"}})
	bob := authn.WithIdentity(modern, authn.Identity{Subject: "token:bob", Plans: []string{"*"}})
	// A refused retry is a JSON-RPC error: its message as a tool error here.
	call := func(ctx context.Context, rt, state string, answers string) *mcp.CallToolResult {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name = "ask"
		req.Params.RawArguments = json.RawMessage(`{"resultType":"` + rt + `"}`)
		req.Params.RequestState = state
		if answers != "" {
			if err := json.Unmarshal([]byte(answers), &req.Params.InputResponses); err != nil {
				t.Fatal(err)
			}
		}
		res, err := p.handleCall(ctx, req)
		var blocked *BlockedError
		if errors.As(err, &blocked) {
			return errorResult(blocked.Reason)
		}
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := call(alice, "elicit", "", "")
	if first.ResultType != mcp.ResultTypeInputRequired || len(first.InputRequests) != 1 || !strings.HasPrefix(first.RequestState, "planlock.1.") {
		t.Fatalf("first round answered %+v", first)
	}
	if strings.Contains(first.RequestState, "upstream-state") {
		t.Fatal("planlock's requestState shows the upstream's in the clear")
	}
	good := `{"password":{"action":"accept","content":{"password":"hunter2"}}}`
	st := first.RequestState
	tampered := []byte(st)
	tampered[len(tampered)-3] ^= 1
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		rt      string
		state   string
		answers string
		want    string
	}{
		{"forged", alice, "elicit", "upstream-state-1", good, "the requestState is not one planlock issued"},
		{"tampered", alice, "elicit", string(tampered), good, "the requestState does not verify"},
		{"no state", alice, "elicit", "", good, "it carries inputResponses without a requestState"},
		{"other caller", bob, "elicit", st, good, "the requestState was issued to another caller"},
		{"changed arguments", alice, "sample", st, good, "the arguments differ from the call's first round"},
		{"answer not asked", alice, "elicit", st, `{"password":{"action":"accept","content":{"password":"x"}},"llm":{"role":"assistant","content":{"type":"text","text":"x"},"model":"m"}}`, `inputResponses answers "llm", which was not asked`},
		{"field not asked", alice, "elicit", st, `{"password":{"action":"accept","content":{"password":"x","sure":true}}}`, `field "sure" was not asked for`},
		{"out of bounds", alice, "elicit", st, `{"password":{"action":"accept","content":{"password":"` + strings.Repeat("x", 17) + `"}}}`, "17 characters, the plan allows 16"},
	} {
		res := call(tc.ctx, tc.rt, tc.state, tc.answers)
		text := firstText(res)
		if !res.IsError || !strings.Contains(text, tc.want) || strings.Contains(text, "\n") {
			t.Errorf("%s: answered %s, want an error with %q", tc.name, text, tc.want)
		}
	}
	res := call(alice, "elicit", st, good)
	if res.IsError || !strings.Contains(firstText(res), `state upstream-state-1; answers `+good) {
		t.Fatalf("the good retry answered %s", firstText(res))
	}
	if res := call(alice, "elicit", st, good); !res.IsError || !strings.Contains(firstText(res), "the requestState was used already") {
		t.Errorf("replayed: %s", firstText(res))
	}
	// Expired: a new call is refused by max_calls = 1, so expiry is shown
	// on a state sealed now and opened after the TTL.
	sealed, err := p.rounds.seal(roundState{Method: "tools/call", Name: "ask"}, now)
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(DefaultRoundTTL + time.Second)
	if res := call(alice, "elicit", sealed, good); !res.IsError || !strings.Contains(firstText(res), "the requestState expired at") {
		t.Errorf("expired: %s", firstText(res))
	}
	n, _ := auditCounts(t, audit)
	if n["allow"] != 1 || n["input"] != 1 || n["outcome"] != 1 || n["block"] != 10 {
		t.Errorf("audit records %v, want one allow, one input, one outcome, ten blocks", n)
	}
	if up := upstreamCalls(t, calls); len(up) != 2 {
		t.Errorf("the upstream got %d requests, want 2:\n%s", len(up), strings.Join(up, "\n"))
	}
	if got := p.cfg.State.Progress(p.cur.Load().plan.Digest).Calls(0); got != 1 {
		t.Errorf("counted %d calls, want 1", got)
	}
}

// TestMultiRoundRetryPrompt: a prompts/get whose upstream asks for a
// password the prompt's input block allows completes through planlock for
// a modern client over stdio and HTTP, counted once (max_calls = 1).
func TestMultiRoundRetryPrompt(t *testing.T) {
	for _, front := range []string{"stdio", "http"} {
		t.Run(front, func(t *testing.T) {
			calls := filepath.Join(t.TempDir(), "calls.jsonl")
			h := &answering{password: "hunter2"}
			c, p, audit := realClient(t, inputPlan, front, "", h, "--mode", "multi-round", "--calls-log", calls)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			gr := mcp.GetPromptRequest{}
			gr.Params.Name = "ask"
			gr.Params.Arguments = map[string]string{"resultType": "elicit"}
			res, err := c.GetPrompt(ctx, gr)
			if err != nil {
				t.Fatalf("get: %v", err)
			}
			text := ""
			if len(res.Messages) == 1 {
				text, _ = wire.ContentText(res.Messages[0].Content)
			}
			if !strings.Contains(text, `prompt done; state upstream-state-1; answers {"password":{"action":"accept","content":{"password":"hunter2"}}}`) {
				t.Errorf("get answered %+v", res)
			}
			if e := h.elicited.Load(); e != 1 {
				t.Errorf("elicited %d times, want 1", e)
			}
			plan := p.cur.Load().plan
			if n := p.cfg.State.Progress(plan.Digest).Calls(promptIndex(plan, 0)); n != 1 {
				t.Errorf("counted %d gets, want 1", n)
			}
			n, errs := auditCounts(t, audit)
			if n["allow"] != 1 || n["input"] != 1 || n["outcome"] != 1 || n["failed"] != 0 {
				t.Errorf("audit records %v (%v), want one allow, one input, one outcome", n, errs)
			}
			// Another get is refused by max_calls: the two rounds counted once.
			if _, err := c.GetPrompt(ctx, gr); err == nil || !strings.Contains(err.Error(), "max_calls 1 used up") {
				t.Errorf("a second get: %v, want max_calls used up", err)
			}
		})
	}
}

// inputResourcePlan allows the multi-round upstream's resources with a
// form asking for the password.
const inputResourcePlan = `
plan "mr" {
  goal  = "multi-round reads"
  order = "any"
  resource "ask" {
    uri_pattern = "test://ask/.*"
    max_reads   = 1
    input {
      max_rounds = 2
      elicitation {
        field "password" {
          type       = "string"
          max_length = 16
          optional   = true
        }
        field "sure" {
          type     = "boolean"
          optional = true
        }
      }
    }
  }
}`

// TestMultiRoundRetryResource: a resources/read the upstream answers with
// input_required reaches a modern client only as the resource's input block
// allows; the client's retry, bound to planlock's requestState, completes
// the read with the upstream's own state and the answers, counted once; a
// read whose upstream asks what the block does not allow (sampling) ends
// with the plan's error and nothing shown.
func TestMultiRoundRetryResource(t *testing.T) {
	for _, tc := range []struct{ name, front, version string }{
		{"stdio/modern", "stdio", ""},
		{"http/modern", "http", ""},
		// A legacy client gets the old server-to-client requests, on
		// the HTTP front's session and on planlock's stdio session.
		{"http/legacy", "http", mcp.LATEST_LEGACY_PROTOCOL_VERSION},
		{"stdio/legacy", "stdio", mcp.LATEST_LEGACY_PROTOCOL_VERSION},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := filepath.Join(t.TempDir(), "calls.jsonl")
			h := &answering{password: "hunter2"}
			c, p, audit := realClient(t, inputResourcePlan, tc.front, tc.version, h, "--mode", "multi-round", "--calls-log", calls)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			rr := mcp.ReadResourceRequest{}
			rr.Params.URI = "test://ask/twice"
			res, err := c.ReadResource(ctx, rr)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			text := ""
			if len(res.Contents) == 1 {
				if tc, ok := res.Contents[0].(mcp.TextResourceContents); ok {
					text = tc.Text
				}
			}
			if !strings.Contains(text, `read done; state upstream-state-2; answers {"confirm":{"action":"accept","content":{"sure":true}}}`) {
				t.Errorf("read answered %+v", res)
			}
			if e := h.elicited.Load(); e != 2 {
				t.Errorf("elicited %d times, want 2 (two rounds)", e)
			}
			plan := p.cur.Load().plan
			if n := p.cfg.State.Progress(plan.Digest).Calls(resourceIndex(plan, 0)); n != 1 {
				t.Errorf("counted %d reads, want 1", n)
			}
			n, errs := auditCounts(t, audit)
			if n["allow"] != 1 || n["input"] != 2 || n["outcome"] != 1 || n["failed"] != 0 {
				t.Errorf("audit records %v (%v), want one allow, two inputs, one outcome", n, errs)
			}
			b, err := os.ReadFile(calls)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Count(string(b), "\n"); got != 3 || !strings.Contains(string(b), "upstream-state-2") {
				t.Errorf("the upstream got %d requests, want the read and two retries with its own state:\n%s", got, b)
			}
			// The read used up max_reads once; the next is refused.
			rr.Params.URI = "test://ask/sample"
			if _, err := c.ReadResource(ctx, rr); err == nil || !strings.Contains(err.Error(), "max_reads 1 used up") {
				t.Errorf("a second read: %v, want max_reads used up", err)
			}
		})
	}
}

// TestMultiRoundResourceRefused: what the resource's input block does not
// allow (sampling, here) never reaches the client; the read ends with the
// plan's error, counted once and recorded as failed.
func TestMultiRoundResourceRefused(t *testing.T) {
	for _, tc := range []struct{ name, front, version, uri, want string }{
		{"stdio/modern/sampling", "stdio", "", "test://ask/sample", "sampling"},
		{"http/modern/sampling", "http", "", "test://ask/sample", "sampling"},
		{"http/legacy/sampling", "http", mcp.LATEST_LEGACY_PROTOCOL_VERSION, "test://ask/sample", "sampling"},
		{"stdio/legacy/sampling", "stdio", mcp.LATEST_LEGACY_PROTOCOL_VERSION, "test://ask/sample", "sampling"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &answering{password: "hunter2"}
			c, p, _ := realClient(t, inputResourcePlan, tc.front, tc.version, h, "--mode", "multi-round")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			rr := mcp.ReadResourceRequest{}
			rr.Params.URI = tc.uri
			if _, err := c.ReadResource(ctx, rr); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("read: %v, want the plan's refusal (%s)", err, tc.want)
			}
			if e, s := h.elicited.Load(), h.sampled.Load(); e != 0 || s != 0 {
				t.Errorf("the client ran its elicitation handler %d times and its sampling handler %d times", e, s)
			}
			plan := p.cur.Load().plan
			if n := p.cfg.State.Progress(plan.Digest).Calls(resourceIndex(plan, 0)); n != 1 {
				t.Errorf("counted %d reads, want 1", n)
			}
		})
	}
}

// TestRoundKey: with a state key every process derives the same key, so a
// requestState one sealed opens in another (replicas of a shared state);
// without one, a state directory keeps its own across restarts, and
// another directory's key does not open it.
func TestRoundKey(t *testing.T) {
	sk, err := ledger.ParseStateKey([]byte(strings.Repeat("ab", 16) + strings.Repeat("cd", 16)))
	if err != nil {
		t.Fatal(err)
	}
	a, err := RoundKey(sk, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := RoundKey(sk, "")
	if len(a) != 32 || !bytes.Equal(a, b) {
		t.Fatal("two processes with the same state key derive different keys")
	}
	dir := t.TempDir()
	d1, err := RoundKey(nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	d2, _ := RoundKey(nil, dir)
	other, _ := RoundKey(nil, t.TempDir())
	if !bytes.Equal(d1, d2) || bytes.Equal(d1, other) || bytes.Equal(d1, a) {
		t.Fatal("a state directory's key is not kept, or is shared")
	}
	if fi, err := os.Stat(filepath.Join(dir, RoundKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	now := fixedNow()
	sealed, err := newRoundKeeper(a, 0).seal(roundState{Method: "tools/call", Name: "ask"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := newRoundKeeper(b, 0).open(sealed, now); err != nil || st.Name != "ask" {
		t.Fatalf("a replica with the same key: %v", err)
	}
	if _, err := newRoundKeeper(d1, 0).open(sealed, now); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Fatalf("another key: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, RoundKeyFile), []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := RoundKey(nil, dir); err == nil || !strings.Contains(err.Error(), "not a 32-byte key") {
		t.Fatalf("a broken key file: %v", err)
	}
}

// refusing is a client whose elicitation and sampling handlers fail.
type refusing struct{ asked atomic.Int32 }

func (h *refusing) Elicit(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	h.asked.Add(1)
	return nil, errors.New("no one at the keyboard")
}

func (h *refusing) CreateMessage(context.Context, mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	h.asked.Add(1)
	return nil, errors.New("no model here")
}

// TestLegacyClientLeavesARoundUnanswered: when a legacy client, asked
// with the requests of its era for a round the plan allows, does not
// answer, the call ends with an error result naming why, counted once,
// with a failed outcome in the audit, and no retry reaches the upstream.
func TestLegacyClientLeavesARoundUnanswered(t *testing.T) {
	for _, front := range []string{"stdio", "http"} {
		t.Run(front, func(t *testing.T) {
			calls := filepath.Join(t.TempDir(), "calls.jsonl")
			h := &refusing{}
			cl, p, audit := realClient(t, inputPlan, front, mcp.LATEST_LEGACY_PROTOCOL_VERSION, h, "--mode", "multi-round", "--calls-log", calls)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			req := mcp.CallToolRequest{}
			req.Params.Name = "ask"
			req.Params.Arguments = map[string]any{"resultType": "elicit"}
			res, err := cl.CallTool(ctx, req)
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			want := `input request "password": the client did not answer: elicitation/create`
			if text := firstText(res); !res.IsError || !strings.Contains(text, want) || !strings.Contains(text, `the call ended, counted (step "ask", 1 of max_calls 1)`) {
				t.Errorf("call answered (isError %v) %s\nwant an error with %q", res.IsError, text, want)
			}
			if n := h.asked.Load(); n != 1 {
				t.Errorf("the client was asked %d times, want 1", n)
			}
			if n := p.cfg.State.Progress(p.cur.Load().plan.Digest).Calls(0); n != 1 {
				t.Errorf("counted %d calls, want 1", n)
			}
			n, errs := auditCounts(t, audit)
			if n["allow"] != 1 || n["failed"] != 1 || n["outcome"] != 0 || n["input"] != 0 || len(errs) != 1 || !strings.Contains(errs[0], want) {
				t.Errorf("audit records %v (failed: %q), want one allow and one failed outcome", n, errs)
			}
			if up := upstreamCalls(t, calls); len(up) != 1 {
				t.Errorf("the upstream got %d requests, want the first round only:\n%s", len(up), strings.Join(up, "\n"))
			}
		})
	}
}
