package hclplan

import (
	"bytes"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
)

// Format returns src in canonical layout, as terraform fmt lays out its own
// files: two-space indentation, aligned "=" in runs of attributes, one space
// around operators, comments kept, and exactly one trailing newline. Only
// syntax is checked: a file with syntax errors is not formatted.
func Format(filename string, src []byte) ([]byte, hcl.Diagnostics) {
	if _, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos); diags.HasErrors() {
		return nil, diags
	}
	out := hclwrite.Format(src)
	// hclwrite keeps leading and trailing blank lines; a canonical file has
	// none, so fmt of fmt's output changes nothing.
	out = bytes.TrimLeft(out, "\n")
	out = bytes.TrimRight(out, " \t\n")
	if len(out) > 0 {
		out = append(out, '\n')
	}
	return out, nil
}
