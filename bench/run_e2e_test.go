//go:build e2e

package bench

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestBenchRunQuick runs `bench/run --quick` as a user does and checks the
// harness, not the speed: it exits 0, every setup of the relay table has its
// figures, every target its verdict, and the latency setups were measured in
// one interleaved benchmark. A setup the machine cannot run (the state on
// memory without /dev/shm, the npm relays without the registry) must say why
// on stderr instead.
func TestBenchRunQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("bench/run --quick takes about a minute and a half")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	raw := filepath.Join(t.TempDir(), "raw.txt")
	cmd := exec.Command("bash", "bench/run", "--quick")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "PLANLOCK_BENCH_RAW="+raw)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bench/run --quick: %v\nstderr:\n%s", err, stderr.String())
	}
	table, why := stdout.String(), stderr.String()

	// A relay row: its label, then the stdio p50 added and CPU per call, then
	// the five HTTP cells.
	row := func(label string) []string {
		for _, l := range strings.Split(table, "\n") {
			if strings.HasPrefix(l, "| "+label+" |") {
				cells := strings.Split(strings.Trim(l, "| "), " | ")
				return cells[1:]
			}
		}
		return nil
	}
	number := regexp.MustCompile(`^[0-9]+(\.[0-9]+)?( \(itself\))?$`)
	for _, s := range []struct {
		label string
		stdio bool // measured over stdio
		http  bool // and over HTTP
		skip  string
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
	} {
		cells := row(s.label)
		if cells == nil {
			if s.skip != "" && strings.Contains(why, s.skip) {
				continue // left out, and stderr says why
			}
			t.Errorf("no row %q in the relay table:\n%s\nstderr:\n%s", s.label, table, why)
			continue
		}
		if len(cells) != 7 {
			t.Errorf("row %q has %d figures, want 7: %q", s.label, len(cells), cells)
			continue
		}
		for i, c := range cells {
			want := i < 2 && s.stdio || i >= 2 && s.http
			if got := number.MatchString(c); got != want {
				t.Errorf("row %q, column %d = %q; a figure: %v, want %v", s.label, i+2, c, got, want)
			}
		}
	}

	targets := regexp.MustCompile(`(?m)^- (.*): (met|NOT met)$`)
	got := targets.FindAllStringSubmatch(table, -1)
	for _, want := range []string{
		"stdio p50 added by planlock ≤ 2× the line copier's",
		"stdio CPU per call ≤ 1.3× the bare relay's",
		"HTTP p99 ≤ 1.2× the bare relay's",
		"HTTP 16 sessions calls/s ≥ 1.0× the bare relay's",
		"HTTP 64 sessions calls/s ≥ 1.0× the bare relay's",
		"stdio p50 with --sync-each-call ≤ the bare relay's p50 + 1 fdatasync",
	} {
		found := false
		for _, m := range got {
			found = found || strings.HasPrefix(m[1], want)
		}
		if !found {
			t.Errorf("no verdict for %q:\n%s", want, table)
		}
	}

	// The latency figures come from one interleaved benchmark per
	// transport, each setup's as <setup>:<unit>.
	rawOut, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range []string{"stdio", "http"} {
		line := regexp.MustCompile(`(?m)^BenchmarkLatency/` + tr + `-\d+\s.*$`).Find(rawOut)
		want := []string{"direct:p50-µs", "planlock:p50-µs", "planlock:p99-µs", "passthrough:cpu-µs/call"}
		if tr == "stdio" { // the disk, timed in the same rounds
			want = append(want, "fdatasync:p50-µs")
		}
		for _, m := range want {
			if !bytes.Contains(line, []byte(m)) {
				t.Errorf("the %s latency line lacks %s: %q", tr, m, line)
			}
		}
	}
}
