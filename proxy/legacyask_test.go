package proxy

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/testkit/peers"
	"github.com/planlock/planlock/internal/testkit/testplans"
	"github.com/planlock/planlock/proxy/ledger"
)

// TestLegacyUpstreamAsksThroughTheGate: server-everything (protocol
// 2025-era only, over stdio and HTTP) asks for sampling during a call with
// a server-to-client request. Through planlock (stdio and HTTP fronts) a
// legacy client's sampling handler gets it when the step's input block
// allows it (max_tokens 100 of 200), the answer reaches the upstream and
// is recorded as an input record; one over the bound (1000 tokens) reaches
// no handler and ends the call with the plan's error, as does any request
// to a client of 2026-07-28, which cannot be asked during a call.
func TestLegacyUpstreamAsksThroughTheGate(t *testing.T) {
	ups := []struct {
		name  string
		start func(t *testing.T) UpstreamConfig
	}{
		{"everything-stdio", func(t *testing.T) UpstreamConfig { return UpstreamConfig{Command: peers.EverythingStdio(t)} }},
		{"everything-http", func(t *testing.T) UpstreamConfig { return UpstreamConfig{URL: peers.StartEverythingHTTP(t)} }},
	}
	for _, up := range ups {
		for _, front := range []string{"stdio", "http"} {
			t.Run(up.name+"/"+front+"/legacy-client", func(t *testing.T) {
				p, dir := eraProxyState(t, testplans.LegacySampling, up.start(t))
				h := &askedHandlers{}
				c := eraClientWith(t, p, front, mcp.LATEST_LEGACY_PROTOCOL_VERSION, h)
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				res, err := callTool(ctx, c, "trigger-sampling-request", map[string]any{"prompt": "hi", "maxTokens": 100})
				if refused(res, err) || !strings.Contains(resultText(res), "the secret") || h.sampled.Load() != 1 {
					t.Fatalf("allowed sampling: %v %q, sampled %d times, want the handler's answer once", err, text(res), h.sampled.Load())
				}
				res, err = callTool(ctx, c, "trigger-sampling-request", map[string]any{"prompt": "hi", "maxTokens": 1000})
				if err != nil || !res.IsError || !strings.Contains(resultText(res), "the upstream asked for input this plan does not allow (sampling/createMessage: ") || h.sampled.Load() != 1 {
					t.Fatalf("sampling over max_tokens: %v %q, sampled %d times, want the plan's error and no handler", err, text(res), h.sampled.Load())
				}
				n, errs := auditCounts(t, filepath.Join(dir, "audit.jsonl"))
				if n["allow"] != 2 || n["input"] != 1 || n["outcome"] != 1 || n["failed"] != 1 {
					t.Errorf("audit records %v (failed: %v), want two allowed calls, one input record, one outcome of each kind", n, errs)
				}
			})
			t.Run(up.name+"/"+front+"/modern-client", func(t *testing.T) {
				p, _ := eraProxyState(t, testplans.LegacySampling, up.start(t))
				h := &askedHandlers{}
				c := eraClientWith(t, p, front, "", h)
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				res, err := callTool(ctx, c, "trigger-sampling-request", map[string]any{"prompt": "hi", "maxTokens": 100})
				if err != nil || !res.IsError || !strings.Contains(resultText(res), "a client of protocol 2026-07-28 cannot be asked during a call") || h.sampled.Load() != 0 {
					t.Fatalf("sampling for a modern client: %v %q, sampled %d times, want the plan's error and no handler", err, text(res), h.sampled.Load())
				}
			})
		}
	}
}

func text(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	return resultText(res)
}

// legacyElicitPlan allows the test upstream's elicitation tool with a form
// of a username and an email.
const legacyElicitPlan = `
plan "legacy-elicit" {
  goal  = "a legacy upstream's elicitation within the plan's bounds"
  order = "any"
  step "elicit" {
    tool      = "test_elicitation"
    max_calls = 10
    arg "message" { max_length = 50 }
    input {
      elicitation {
        field "username" {
          type       = "string"
          max_length = 40
        }
        field "email" {
          type       = "string"
          max_length = 80
        }
      }
    }
  }
}`

// formHandlers answer an elicitation with the form's two fields.
type formHandlers struct{ askedHandlers }

func (h *formHandlers) Elicit(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	h.elicited.Add(1)
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept,
		Content: map[string]any{"username": "ada", "email": "ada@example.com"}}}, nil
}

// TestLegacyUpstreamElicitsThroughTheGate: the test upstream spoken to in
// its legacy era (mcp-go's server) asks for a form during a call. A legacy
// client's answer with the asked fields reaches the upstream; an answer
// with a field never asked (a password) is refused, the upstream gets an
// error instead of it, and the call ends with the plan's error, over
// stdio and HTTP.
func TestLegacyUpstreamElicitsThroughTheGate(t *testing.T) {
	for _, front := range []string{"stdio", "http"} {
		for _, tc := range []struct {
			name string
			h    interface {
				clientHandlers
				count() int32
			}
			want string // in the result
			ok   bool
		}{
			{"asked-fields", &formHandlers{}, `User response: action=accept, content={"email":"ada@example.com","username":"ada"}`, true},
			{"field-never-asked", &askedHandlers{}, `the upstream asked for input this plan does not allow (elicitation/create: the client's answer: `, false},
		} {
			t.Run(front+"/"+tc.name, func(t *testing.T) {
				env, _ := UpstreamEnv(nil, func(string) (string, bool) { return "", false })
				cfg := UpstreamConfig{Command: []string{testUpstreamBin, "--conformance"}, Env: env,
					PreferModern: func() bool { return false }} // its legacy era: server-to-client requests
				p, dir := eraProxyState(t, legacyElicitPlan, cfg)
				c := eraClientWith(t, p, front, mcp.LATEST_LEGACY_PROTOCOL_VERSION, tc.h)
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				res, err := callTool(ctx, c, "test_elicitation", map[string]any{"message": "who are you?"})
				if err != nil || res.IsError == tc.ok || !strings.Contains(resultText(res), tc.want) || tc.h.count() != 1 {
					t.Fatalf("%v %q (handler asked %d times), want %q", err, text(res), tc.h.count(), tc.want)
				}
				n, _ := auditCounts(t, filepath.Join(dir, "audit.jsonl"))
				if wantInput := map[bool]int{true: 1, false: 0}[tc.ok]; n["allow"] != 1 || n["input"] != wantInput {
					t.Errorf("audit records %v, want one allowed call and %d input record", n, wantInput)
				}
			})
		}
	}
}

func (h *askedHandlers) count() int32 { return h.elicited.Load() + h.sampled.Load() }

// TestUpstreamRequestOfNoCall: a legacy upstream's request that names no
// call (over stdio, or on an HTTP GET stream) belongs to the one call that
// may ask only while that call's is the only request in flight to the
// upstream: with none, with two calls that may ask, or with another
// request in flight (a call of a step without an input block could have
// caused it), it is refused and asks no client.
func TestUpstreamRequestOfNoCall(t *testing.T) {
	p := &Proxy{up: &Upstream{}}
	params := []byte(`{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":10}`)
	ask := func() error {
		_, err := p.answerUpstream(context.Background(), "sampling/createMessage", params)
		return err
	}
	p.up.busy.Store(1)
	if err := ask(); err == nil || !strings.Contains(err.Error(), "no call in flight may ask for input") {
		t.Fatalf("no call in flight: %v", err)
	}
	rules := &hclplan.InputRules{Sampling: &hclplan.SamplingRule{MaxTokens: 100, MaxMessages: 10}}
	_, a, doneA := p.asking.start(context.Background(), rules, ledger.Call{Tool: "a"}, 1)
	p.up.busy.Store(2) // a's request and another
	if err := ask(); err == nil || a.rounds != 0 {
		t.Fatalf("another request in flight: %v (rounds %d), want a refusal asking no one", err, a.rounds)
	}
	_, _, doneB := p.asking.start(context.Background(), rules, ledger.Call{Tool: "b"}, 2)
	if err := ask(); err == nil || a.rounds != 0 {
		t.Fatalf("two calls that may ask: %v (rounds %d), want a refusal asking no one", err, a.rounds)
	}
	doneB()
	p.up.busy.Store(1)
	// The only request: a's. (Its client, none here, cannot be asked.)
	if err := ask(); err == nil || a.rounds != 1 || !strings.Contains(err.Error(), "session cannot carry") {
		t.Fatalf("a's request alone: %v (rounds %d), want it taken as a's", err, a.rounds)
	}
	doneA()
}

// legacyPromptPlan allows a prompt whose get asks for a topic.
const legacyPromptPlan = `
plan "legacy-prompt" {
  goal  = "a legacy upstream's elicitation during a prompts/get"
  order = "any"
  step "echo" {
    tool      = "echo"
    max_calls = 1
  }
  prompt "topic" {
    max_calls = 5
    input {
      elicitation {
        field "topic" {
          type       = "string"
          max_length = 20
        }
      }
    }
  }
}`

// topicHandlers answer an elicitation with a topic.
type topicHandlers struct {
	askedHandlers
	topic string
}

func (h *topicHandlers) Elicit(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	h.elicited.Add(1)
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept,
		Content: map[string]any{"topic": h.topic}}}, nil
}

// TestLegacyUpstreamAsksDuringAGet: an mcp-go server spoken to in its
// legacy era asks for a form while it builds a prompt. Under the prompt's
// input block a legacy client's answer reaches it (through planlock's
// stdio and HTTP fronts); an answer over the field's max_length does not,
// and the get fails with the plan's error.
func TestLegacyUpstreamAsksDuringAGet(t *testing.T) {
	s := server.NewMCPServer("asking", "1", server.WithPromptCapabilities(true), server.WithElicitation())
	s.AddTool(mcp.NewTool("echo"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("echo"), nil
	})
	s.AddPrompt(mcp.NewPrompt("topic"), func(ctx context.Context, _ mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		er := mcp.ElicitationRequest{}
		er.Params.Message = "Which topic?"
		er.Params.RequestedSchema = map[string]any{"type": "object", "properties": map[string]any{"topic": map[string]any{"type": "string"}}}
		res, err := s.RequestElicitation(ctx, er)
		if err != nil {
			return nil, fmt.Errorf("elicitation failed: %w", err)
		}
		return mcp.NewGetPromptResult("topic", []mcp.PromptMessage{mcp.NewPromptMessage(mcp.RoleUser,
			mcp.NewTextContent(fmt.Sprintf("Write about %v", res.Content)))}), nil
	})
	ts := httptest.NewServer(server.NewStreamableHTTPServer(s))
	t.Cleanup(ts.Close)
	for _, front := range []string{"stdio", "http"} {
		for _, tc := range []struct {
			topic string
			ok    bool
		}{{"owls", true}, {strings.Repeat("x", 21), false}} {
			t.Run(front+"/"+map[bool]string{true: "within-bounds", false: "too-long"}[tc.ok], func(t *testing.T) {
				p, _ := eraProxyState(t, legacyPromptPlan, UpstreamConfig{URL: ts.URL + "/mcp", PreferModern: func() bool { return false }})
				h := &topicHandlers{topic: tc.topic}
				c := eraClientWith(t, p, front, mcp.LATEST_LEGACY_PROTOCOL_VERSION, h)
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				req := mcp.GetPromptRequest{}
				req.Params.Name = "topic"
				res, err := c.GetPrompt(ctx, req)
				if tc.ok {
					if err != nil || len(res.Messages) != 1 || !strings.Contains(fmt.Sprint(res.Messages[0].Content), "Write about map[topic:owls]") {
						t.Fatalf("get: %v %+v", err, res)
					}
				} else if err == nil || !strings.Contains(err.Error(), "the upstream asked for input this plan does not allow") {
					t.Fatalf("get with an answer over max_length: %v %+v, want the plan's error", err, res)
				}
				if h.elicited.Load() != 1 {
					t.Errorf("the client was asked %d times, want once", h.elicited.Load())
				}
			})
		}
	}
}
