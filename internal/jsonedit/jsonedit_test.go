package jsonedit

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestSetMember(t *testing.T) {
	// An MCP client's server entry, as planlock mcp-config --write adds it.
	entry := struct {
		Command string   `json:"command"`
		Args    []string `json:"args"`
	}{Command: "/bin/planlock", Args: []string{"proxy", "--plan", "/p.hcl"}}
	tests := []struct {
		name, key, doc, want, err string
	}{
		{name: "empty file", key: "mcpServers", doc: "",
			want: "{\n  \"mcpServers\": {\n    \"new\": {\n      \"command\": \"/bin/planlock\",\n      \"args\": [\n        \"proxy\",\n        \"--plan\",\n        \"/p.hcl\"\n      ]\n    }\n  }\n}\n"},
		{name: "other entries kept byte for byte", key: "mcpServers",
			doc:  "{\n  \"mcpServers\": {\n    \"other\": {\"command\":\"x\",   \"args\": [ ]}\n  },\n  \"theme\" : \"dark\"\n}\n",
			want: "{\n  \"mcpServers\": {\n    \"other\": {\"command\":\"x\",   \"args\": [ ]},\n    \"new\": {\n      \"command\": \"/bin/planlock\",\n      \"args\": [\n        \"proxy\",\n        \"--plan\",\n        \"/p.hcl\"\n      ]\n    }\n  },\n  \"theme\" : \"dark\"\n}\n"},
		{name: "an entry of the same name is replaced, nothing else", key: "mcpServers",
			doc:  "{\"mcpServers\": {\"a\": 1, \"new\": {\"command\": \"old\"}, \"z\": [\"}\"]}}",
			want: "{\"mcpServers\": {\"a\": 1, \"new\": {\n  \"command\": \"/bin/planlock\",\n  \"args\": [\n    \"proxy\",\n    \"--plan\",\n    \"/p.hcl\"\n  ]\n}, \"z\": [\"}\"]}}"},
		{name: "no servers member yet", key: "servers",
			doc:  "{\n\t\"inputs\": []\n}",
			want: "{\n\t\"inputs\": [],\n\t\"servers\": {\n\t  \"new\": {\n\t    \"command\": \"/bin/planlock\",\n\t    \"args\": [\n\t      \"proxy\",\n\t      \"--plan\",\n\t      \"/p.hcl\"\n\t    ]\n\t  }\n\t}\n}"},
		{name: "empty servers object", key: "servers", doc: "{\"servers\": {}}\n",
			want: "{\"servers\": {\n  \"new\": {\n    \"command\": \"/bin/planlock\",\n    \"args\": [\n      \"proxy\",\n      \"--plan\",\n      \"/p.hcl\"\n    ]\n  }\n}}\n"},
		{name: "escaped quotes in keys and values", key: "mcpServers",
			doc:  `{"x\"y": "a\\\"}", "mcpServers": {}}`,
			want: "{\"x\\\"y\": \"a\\\\\\\"}\", \"mcpServers\": {\n  \"new\": {\n    \"command\": \"/bin/planlock\",\n    \"args\": [\n      \"proxy\",\n      \"--plan\",\n      \"/p.hcl\"\n    ]\n  }\n}}"},
		{name: "comments", key: "servers", doc: "{\n  // mine\n  \"servers\": {}\n}", err: "not plain JSON"},
		{name: "not an object", key: "servers", doc: "[1]", err: "top level is not a JSON object"},
		{name: "servers not an object", key: "servers", doc: `{"servers": []}`, err: `its "servers" is not a JSON object`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SetMember([]byte(tt.doc), tt.key, "new", entry)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tt.want)
			}
			var top map[string]json.RawMessage
			var servers map[string]json.RawMessage
			if err := json.Unmarshal(got, &top); err != nil {
				t.Fatalf("result is not JSON: %v", err)
			}
			if err := json.Unmarshal(top[tt.key], &servers); err != nil {
				t.Fatalf("result's %s is not an object: %v", tt.key, err)
			}
			if _, ok := servers["new"]; !ok {
				t.Fatalf("result lacks the entry: %s", got)
			}
		})
	}
}
