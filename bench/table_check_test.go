package bench

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// relaySetups are the rows bench/run's relay table must have: whether the
// setup is measured over stdio (the first two figures) and HTTP (the other
// five), and the stderr note that explains a row left out.
var relaySetups = []struct {
	label       string
	stdio, http bool
	skip        string
}{
	{"direct (no relay)", true, true, ""},
	{"floor: Go line copier", true, false, ""},
	{"floor: copier + 1 JSON decode/encode each way", true, false, ""},
	{"floor: copier + append & fdatasync of each request", true, false, ""},
	{"bare mcp-go relay (bench/passthrough)", true, true, ""},
	{"planlock proxy", true, true, ""},
	{"planlock proxy, state on memory (/dev/shm)", true, true, "state on memory"},
	{"planlock proxy --sync-each-call", true, true, ""},
	{"`mcp-proxy` 6.7.19 (npm)", false, true, "npm relays skipped"},
	{"`supergateway` 4.0.0 (npm)", false, true, "npm relays skipped"},
	{"`@civic/passthrough-mcp-server` 0.12.1 (npm)", false, true, "npm relays skipped"},
	// The same with a modern client (mcp-go v1.2.1's default, protocol
	// 2026-07-28); the npm relays are measured with the legacy one only.
	{"direct (no relay), modern client", true, true, ""},
	{"floor: Go line copier, modern client", true, false, ""},
	{"floor: copier + 1 JSON decode/encode each way, modern client", true, false, ""},
	{"floor: copier + append & fdatasync of each request, modern client", true, false, ""},
	{"bare mcp-go relay (bench/passthrough), modern client", true, true, ""},
	{"planlock proxy, modern client", true, true, ""},
	{"planlock proxy, state on memory (/dev/shm), modern client", true, true, "state on memory"},
	{"planlock proxy --sync-each-call, modern client", true, true, ""},
}

// relayTableProblems checks the structure of the relay table bench/run
// printed, never the speed: every setup has its row (or stderr, why, says
// why not), seven cells, and a figure exactly where the setup is measured.
// A figure is any number: the first column is the p50 a setup adds over a
// direct call, a difference that a loaded machine makes negative for the
// cheapest relays.
func relayTableProblems(table, why string) []string {
	row := func(label string) []string {
		for _, l := range strings.Split(table, "\n") {
			if strings.HasPrefix(l, "| "+label+" |") {
				return strings.Split(strings.Trim(l, "| "), " | ")[1:]
			}
		}
		return nil
	}
	var out []string
	for _, s := range relaySetups {
		cells := row(s.label)
		if cells == nil {
			if s.skip == "" || !strings.Contains(why, s.skip) {
				out = append(out, fmt.Sprintf("no row %q in the relay table:\n%s\nstderr:\n%s", s.label, table, why))
			}
			continue
		}
		if len(cells) != 7 {
			out = append(out, fmt.Sprintf("row %q has %d figures, want 7: %q", s.label, len(cells), cells))
			continue
		}
		for i, c := range cells {
			want := i < 2 && s.stdio || i >= 2 && s.http
			if got := isFigure(c, i == 0 && strings.HasPrefix(s.label, "direct (no relay)")); got != want {
				out = append(out, fmt.Sprintf("row %q, column %d = %q; a figure: %v, want %v", s.label, i+2, c, got, want))
			}
		}
	}
	return out
}

// isFigure says the cell is a number (of any sign); the direct setup's
// first cell, its own p50, carries " (itself)".
func isFigure(cell string, itself bool) bool {
	if itself {
		var ok bool
		if cell, ok = strings.CutSuffix(cell, " (itself)"); !ok {
			return false
		}
	}
	_, err := strconv.ParseFloat(cell, 64)
	return err == nil
}

// The check reads structure: a negative difference under load (the floor's
// p50 below a direct call's) is a figure; a missing one, a dash where a
// figure belongs, a figure where none belongs, a short row or a missing row
// is not.
func TestRelayTableProblems(t *testing.T) {
	full := func(edit func(label string, cells []string) []string) string {
		var b strings.Builder
		for _, s := range relaySetups {
			cells := make([]string, 7)
			for i := range cells {
				cells[i] = "—"
				if i < 2 && s.stdio || i >= 2 && s.http {
					cells[i] = strconv.Itoa(10 + i)
				}
			}
			if strings.HasPrefix(s.label, "direct (no relay)") {
				cells[0] += " (itself)"
			}
			if edit != nil {
				cells = edit(s.label, cells)
			}
			if cells != nil {
				fmt.Fprintf(&b, "| %s | %s |\n", s.label, strings.Join(cells, " | "))
			}
		}
		return b.String()
	}
	set := func(label string, i int, v string) func(string, []string) []string {
		return func(l string, cells []string) []string {
			if l == label {
				cells[i] = v
			}
			return cells
		}
	}
	tests := []struct {
		name  string
		table string
		why   string
		want  string // in the one problem expected ("" = none)
	}{
		{"every figure", full(nil), "", ""},
		{"a negative difference under load", full(set("floor: Go line copier", 0, "-4.06")), "", ""},
		{"a negative large difference", full(set("planlock proxy", 0, "-150")), "", ""},
		{"a zero difference", full(set("planlock proxy", 0, "0.00")), "", ""},
		{"a figure missing", full(set("planlock proxy", 3, "—")), "", `row "planlock proxy", column 5 = "—"; a figure: false, want true`},
		{"a figure where none is measured", full(set("floor: Go line copier", 2, "12")), "", `row "floor: Go line copier", column 4 = "12"; a figure: true, want false`},
		{"not a number", full(set("planlock proxy", 1, "fast")), "", `column 3 = "fast"`},
		{"direct without (itself)", full(set("direct (no relay)", 0, "12")), "", `row "direct (no relay)", column 2 = "12"`},
		{"a short row", full(func(l string, c []string) []string {
			if l == "planlock proxy" {
				return c[:6]
			}
			return c
		}), "", `row "planlock proxy" has 6 figures, want 7`},
		{"a missing row", full(func(l string, c []string) []string {
			if l == "planlock proxy" {
				return nil
			}
			return c
		}), "", `no row "planlock proxy"`},
		{"a modern row missing", full(func(l string, c []string) []string {
			if l == "planlock proxy, modern client" {
				return nil
			}
			return c
		}), "", `no row "planlock proxy, modern client"`},
		{"npm rows left out, stderr says why", full(func(l string, c []string) []string {
			if strings.Contains(l, "(npm)") {
				return nil
			}
			return c
		}), "npm relays skipped: npm or node is not installed", ""},
		{"npm rows left out silently", full(func(l string, c []string) []string {
			if strings.HasPrefix(l, "`mcp-proxy`") {
				return nil
			}
			return c
		}), "", "no row \"`mcp-proxy` 6.7.19 (npm)\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := relayTableProblems(tt.table, tt.why)
			switch {
			case tt.want == "" && len(got) != 0:
				t.Errorf("problems %q, want none", got)
			case tt.want != "" && (len(got) != 1 || !strings.Contains(got[0], tt.want)):
				t.Errorf("problems %q, want one containing %q", got, tt.want)
			}
		})
	}
}
