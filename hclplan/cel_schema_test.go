package hclplan

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

func filesystemTools(t *testing.T) []Tool {
	t.Helper()
	data, err := os.ReadFile("testdata/tools/filesystem-tools.json")
	if err != nil {
		t.Fatal(err)
	}
	tools, err := ParseToolList(data)
	if err != nil {
		t.Fatal(err)
	}
	return tools
}

func TestCheckToolsFilesystemExample(t *testing.T) {
	src, err := os.ReadFile("../examples/filesystem/edit-docs.hcl")
	if err != nil {
		t.Fatal(err)
	}
	p, diags := Parse("edit-docs.hcl", src)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if d := CheckTools(p, filesystemTools(t)); len(d) != 0 {
		t.Fatalf("the filesystem example does not match the server's tools: %s", d.Error())
	}
}

func TestCheckToolsTypesExpressions(t *testing.T) {
	const edits = "    arg \"path\" { any = true }\n    arg \"edits\" { max_items = 5 }\n"
	tests := []struct {
		name string
		step string
		want string // "line:col summary: detail" of the first diagnostic, "" = none
	}{
		{"fits", "tool = \"edit_file\"\n" + edits + "    check { expr = \"args.edits.all(e, e.oldText != e.newText) && args.path.startsWith('/srv')\" }", ""},
		{"unknown argument", "tool = \"edit_file\"\n" + edits + "    check { expr = \"args.pth == 'x'\" }",
			`7:25 Expression does not fit the tool's schema: In step "s" (tool "edit_file"): undefined field 'pth'.`},
		{"unknown nested field", "tool = \"edit_file\"\n" + edits + "    check { expr = \"args.edits.all(e, e.oldTxt != '')\" }",
			`7:40 Expression does not fit the tool's schema: In step "s" (tool "edit_file"): undefined field 'oldTxt'.`},
		{"string compared with number", "tool = \"edit_file\"\n" + edits + "    check { expr = \"args.path > 3\" }",
			`7:31 Expression does not fit the tool's schema: In step "s" (tool "edit_file"): found no matching overload for '_>_' applied to '(string, int)'.`},
		{"self typed from the property", "tool = \"read_multiple_files\"\n    arg \"paths\" {\n      max_items = 3\n      expr = \"self.all(p, p > 1)\"\n    }",
			`7:29 Expression does not fit the tool's schema: In step "s" (tool "read_multiple_files"): found no matching overload for '_>_' applied to '(string, int)'.`},
		{"self typed inside items and fields", "tool = \"edit_file\"\n    arg \"path\" { any = true }\n    arg \"edits\" {\n      items {\n        field \"oldText\" { expr = \"self.size() < 10\" }\n        field \"newText\" { expr = \"self == 1\" }\n      }\n    }", `9:40 Expression does not fit the tool's schema: In step "s" (tool "edit_file"): found no matching overload for '_==_' applied to '(string, int)'.`},
		{"number compares with int and double", "tool = \"refund\"\n    arg \"amount\" { any = true }\n    arg \"count\" { any = true }\n    check { expr = \"args.amount <= 30 && args.amount > 0.5 && args.count < 3\" }", ""},
		{"open object is a map", "tool = \"refund\"\n    arg \"meta\" { any = true }\n    check { expr = \"args.meta.anything == 1\" }", ""},
		{"unknown field block", "tool = \"edit_file\"\n    arg \"path\" { any = true }\n    arg \"edits\" {\n      items {\n        field \"oldTxt\" { any = true }\n      }\n    }",
			`8:9 Unknown field: In argument "edits" items of "edit_file" there is no field "oldTxt". Did you mean "oldText"?`},
		{"items on a string", "tool = \"edit_file\"\n    arg \"path\" {\n      items { any = true }\n    }\n    arg \"edits\" { any = true }",
			`5:5 Constraint contradicts the tool's schema: argument "path" of "edit_file" is of type string, but items/min_items/max_items need an array.`},
		{"field constraint contradicts", "tool = \"edit_file\"\n    arg \"path\" { any = true }\n    arg \"edits\" {\n      items {\n        field \"oldText\" { min = 1 }\n      }\n    }",
			`8:9 Constraint contradicts the tool's schema: Field "oldText" of argument "edits" items of "edit_file" is of type string, but min/max need a number.`},
	}
	tools := filesystemTools(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := plan("  step \"s\" {\n    " + tt.step + "\n  }")
			p, diags := Parse("test.hcl", []byte(src))
			if diags.HasErrors() {
				t.Fatalf("parse: %s\n%s", diags.Error(), src)
			}
			d := CheckTools(p, tools)
			got := ""
			if len(d) > 0 {
				got = fmt.Sprintf("%s: %s", formatPos(d[0]), d[0].Detail)
			}
			if got != tt.want {
				t.Fatalf("got  %s\nwant %s\n%s", got, tt.want, strings.TrimSpace(src))
			}
		})
	}
}
