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
// figures (numbers of any size and sign: see relayTableProblems), every
// target its verdict, and the latency setups were measured in
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

	for _, p := range relayTableProblems(table, why) {
		t.Error(p)
	}

	// Every target, for the legacy client and the modern one.
	targets := regexp.MustCompile(`(?m)^- (.*): (met|NOT met)$`)
	got := targets.FindAllStringSubmatch(table, -1)
	for _, era := range []string{"", "modern client: "} {
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
				found = found || strings.HasPrefix(m[1], era+want)
			}
			if !found {
				t.Errorf("no verdict for %q:\n%s", era+want, table)
			}
		}
	}
	for _, want := range []string{
		"| stdio, modern client, 1 client, sequential, p50 latency (µs) |",
		"| HTTP, modern client, 16 concurrent clients (calls/s) |",
	} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(want) + `.*: (met|NOT met) \|$`).MatchString(table) {
			t.Errorf("no row with a verdict %q:\n%s", want, table)
		}
	}

	// The latency figures come from one interleaved benchmark per
	// transport, each setup's as <setup>:<unit>.
	rawOut, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range []string{"stdio", "http", "stdio-modern", "http-modern"} {
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
