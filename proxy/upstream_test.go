package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

func TestToolsListIsReadRawAcrossPages(t *testing.T) {
	s := server.NewMCPServer("paged", "1", server.WithToolCapabilities(false), server.WithPaginationLimit(2))
	schemas := map[string]string{}
	for i := range 5 {
		name := fmt.Sprintf("tool%d", i)
		// Keywords a typed decoder drops, in an order a re-encoder would change.
		schemas[name] = fmt.Sprintf(`{"type":"object","$schema":"http://json-schema.org/draft-07/schema#","properties":{"x":{"anyOf":[{"type":"string"},{"type":"number","minimum":%d}]}},"additionalProperties":false}`, i)
		s.AddTool(mcp.NewToolWithRawSchema(name, "d", json.RawMessage(schemas[name])), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("ok"), nil
		})
	}
	ts := httptest.NewServer(server.NewStreamableHTTPServer(s))
	defer ts.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	raw, err := FetchTools(ctx, UpstreamConfig{URL: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != 5 {
		t.Fatalf("got %d tools, want 5 (over 3 pages)", len(raw))
	}
	for _, r := range raw {
		tool, err := rawTool(r)
		if err != nil {
			t.Fatal(err)
		}
		if string(tool.RawInputSchema) != schemas[tool.Name] {
			t.Errorf("%s: schema\n got %s\nwant %s", tool.Name, tool.RawInputSchema, schemas[tool.Name])
		}
		// Re-exposed as is.
		out, err := json.Marshal(tool)
		if err != nil {
			t.Fatal(err)
		}
		var back struct{ InputSchema json.RawMessage }
		_ = json.Unmarshal(out, &back)
		if string(back.InputSchema) != schemas[tool.Name] {
			t.Errorf("%s: re-exposed schema %s", tool.Name, back.InputSchema)
		}
	}
}

func TestUpstreamEnv(t *testing.T) {
	env := map[string]string{"PATH": "/bin", "HOME": "/home/u", "TOKEN_A": "a", "GITHUB_TOKEN": "g", "OTHER": "o"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		names   []string
		want    string
		wantErr string
	}{
		{names: nil, want: "[HOME=/home/u PATH=/bin]"},
		{names: []string{"TOKEN_A", "UNSET"}, want: "[HOME=/home/u PATH=/bin TOKEN_A=a]"},
		{names: []string{"GITHUB_TOKEN"}, wantErr: "refusing to pass GITHUB_TOKEN to the upstream: it is planlock's own secret"},
		{names: []string{"PLANLOCK_LISTEN_TOKEN"}, wantErr: "refusing to pass PLANLOCK_LISTEN_TOKEN"},
		{names: []string{"SIGSTORE_ID_TOKEN"}, wantErr: "refusing to pass SIGSTORE_ID_TOKEN"},
		{names: []string{"VAULT_TOKEN"}, wantErr: "refusing to pass VAULT_TOKEN to the upstream: it is planlock's own secret"},
		{names: []string{"TOKEN_A", "BAO_TOKEN"}, wantErr: "refusing to pass BAO_TOKEN"},
		{names: []string{"VAULT_ADDR"}, wantErr: "refusing to pass VAULT_ADDR"},
		{names: []string{"VAULT_NAMESPACE"}, wantErr: "refusing to pass VAULT_NAMESPACE"},
		{names: []string{"ACTIONS_ID_TOKEN_REQUEST_URL"}, wantErr: "refusing to pass ACTIONS_ID_TOKEN_REQUEST_URL"},
		{names: []string{"GH_TOKEN"}, wantErr: "refusing to pass GH_TOKEN"},
		{names: []string{"A=B"}, wantErr: `invalid environment variable name "A=B"`},
	}
	for _, tt := range tests {
		got, err := UpstreamEnv(tt.names, lookup)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%v: error %v, want %q", tt.names, err, tt.wantErr)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != tt.want {
			t.Errorf("%v: got %v %v, want %s", tt.names, got, err, tt.want)
		}
	}
}
