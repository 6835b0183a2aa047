package main

import (
	"io"
	"os"

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
