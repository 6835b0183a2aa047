package hclplan

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

func refundTools(t *testing.T) []Tool {
	t.Helper()
	data, err := os.ReadFile("testdata/tools/refund-tools.json")
	if err != nil {
		t.Fatal(err)
	}
	tools, err := ParseToolList(data)
	if err != nil {
		t.Fatal(err)
	}
	return tools
}

func TestCheckToolsRefundExample(t *testing.T) {
	src, _ := os.ReadFile("../examples/refund/refund.hcl")
	p, diags := Parse("refund.hcl", src)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if d := CheckTools(p, refundTools(t)); len(d) != 0 {
		t.Fatalf("the refund example does not match its server's tools: %s", d.Error())
	}
}

func TestCheckTools(t *testing.T) {
	tests := []struct {
		name string
		step string
		want string // "line:col summary", "" = no diagnostic
	}{
		{"valid", `tool = "get_order"
    arg "order_id" { eq = "1" }`, ""},
		{"unknown tool with suggestion", `tool = "get_ordr"`, `4:12 Unknown tool: The upstream has no tool "get_ordr". Did you mean "get_order"?`},
		{"unknown tool far from all", `tool = "drop_database"`, `4:12 Unknown tool: The upstream has no tool "drop_database".`},
		{"unknown arg in closed schema", `tool = "get_order"
    arg "order_id" { eq = "1" }
    arg "orderid" { any = true }`, `6:5 Unknown argument: Tool "get_order" has no argument "orderid" and accepts no others. Did you mean "order_id"?`},
		{"unknown arg in open schema is fine", `tool = "send_email"
    arg "to" { any = true }
    arg "body" { any = true }
    arg "cc" { any = true }`, ""},
		{"required never allowed", `tool = "refund_customer"
    arg "order_id" { eq = "1" }
    arg "amount" { max = 3 }`, `3:3 Required argument not allowed: Tool "refund_customer" requires argument "currency", which step "s" never allows, so every call would be refused; add an arg "currency" block.`},
		{"eq type contradicts", `tool = "get_order"
    arg "order_id" { eq = 4711 }`, `5:5 Constraint contradicts the tool's schema: Argument "order_id" of "get_order" is of type string, but eq 4711 is number.`},
		{"min on string", `tool = "get_order"
    arg "order_id" { min = 1 }`, `5:5 Constraint contradicts the tool's schema: Argument "order_id" of "get_order" is of type string, but min/max need a number.`},
		{"pattern on number", `tool = "refund_customer"
    arg "order_id" { eq = "1" }
    arg "currency" { eq = "EUR" }
    arg "amount" { pattern = "[0-9]+" }`, `7:5 Constraint contradicts the tool's schema: Argument "amount" of "refund_customer" is of type number, but pattern needs a string.`},
		{"enum value of wrong type", `tool = "get_order"
    arg "order_id" { enum = ["1", 2] }`, `5:5 Constraint contradicts the tool's schema: Argument "order_id" of "get_order" is of type string, but enum value 2 is number.`},
		{"union type allows null", `tool = "close_ticket"
    arg "ticket_id" { eq = "T" }
    arg "comment" { eq = null }`, ""},
		{"unknown pin tool", `tool = "get_order"
    arg "order_id" { eq = "1" }
    pin {
      tool  = "get_hash"
      field = "hash"
      eq    = "x"
    }`, `6:5 Unknown pin tool: The upstream has no tool "get_hash" to read the pin with.`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "plan \"p\" {\n  goal = \"g\"\n  step \"s\" {\n    " + tt.step + "\n  }\n}\n"
			p, diags := Parse("t.hcl", []byte(src))
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			var got []string
			for _, d := range CheckTools(p, refundTools(t)) {
				got = append(got, fmt.Sprintf("%d:%d %s: %s", d.Subject.Start.Line, d.Subject.Start.Column, d.Summary, d.Detail))
			}
			if strings.Join(got, "\n") != tt.want {
				t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), tt.want)
			}
		})
	}
}

func TestParseToolList(t *testing.T) {
	for _, in := range []string{
		`{"tools": [{"name": "a", "inputSchema": {}}], "nextCursor": "x"}`,
		`{"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "a"}]}}`,
		`[{"name": "a"}]`,
	} {
		tools, err := ParseToolList([]byte(in))
		if err != nil || len(tools) != 1 || tools[0].Name != "a" {
			t.Errorf("ParseToolList(%s) = %v, %v", in, tools, err)
		}
	}
	for _, bad := range []string{`{}`, `not json`, `{"result": {}}`} {
		if _, err := ParseToolList([]byte(bad)); err == nil {
			t.Errorf("ParseToolList(%s) accepted it", bad)
		}
	}
}
