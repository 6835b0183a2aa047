package main

import (
	"cmp"
	"io"
	"os"
	"slices"

	"github.com/hashicorp/hcl/v2"
)

// sources remembers file contents so diagnostics can quote them.
type sources map[string]*hcl.File

func (s sources) add(name string, src []byte) { s[name] = &hcl.File{Bytes: src} }

// writeDiagnostics prints diagnostics as Terraform does, with source
// snippets, in colour when w is a terminal.
func writeDiagnostics(w io.Writer, files sources, diags hcl.Diagnostics) {
	if len(diags) == 0 {
		return
	}
	color := isTerminal(w) && os.Getenv("NO_COLOR") == ""
	width := uint(0)
	if color {
		width = 100
	}
	diags = slices.Clone(diags)
	sortDiagnostics(diags)
	dw := hcl.NewDiagnosticTextWriter(w, files, width, color)
	_ = dw.WriteDiagnostics(diags)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// sortDiagnostics orders diagnostics by file, line and column, so that the
// output reads top to bottom whatever order the checks ran in. Diagnostics
// without a place come first; the sort is stable.
func sortDiagnostics(diags hcl.Diagnostics) {
	slices.SortStableFunc(diags, func(a, b *hcl.Diagnostic) int {
		var ra, rb hcl.Range
		if a.Subject != nil {
			ra = *a.Subject
		}
		if b.Subject != nil {
			rb = *b.Subject
		}
		return cmp.Or(cmp.Compare(ra.Filename, rb.Filename), cmp.Compare(ra.Start.Line, rb.Start.Line), cmp.Compare(ra.Start.Column, rb.Start.Column))
	})
}
