package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// The table of recorded runs of bench/run's benchmarks, against their golden
// files: every figure lands in its row, ratios and verdicts are computed; a
// run from before the state-on-memory setup prints without its rows, and
// one from before the fdatasync timed in the latency rounds takes the
// targets' fdatasync from BenchmarkFdatasync; one with a modern client has
// its rows and targets for that client too.
func TestWriteGolden(t *testing.T) {
	for _, tt := range []struct{ raw, golden, cpu string }{
		{"raw.txt", "table.md", "Oxide Virtual Turin-like Processor"},
		{"memstate-raw.txt", "memstate-table.md", "AMD EPYC"},
		{"fdatasync-raw.txt", "fdatasync-table.md", "AMD EPYC"},
		{"modern-raw.txt", "modern-table.md", "AMD EPYC"},
	} {
		t.Run(tt.raw, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			res, cpu, err := parse(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			if cpu != tt.cpu {
				t.Errorf("cpu = %q, want %q", cpu, tt.cpu)
			}
			var out bytes.Buffer
			write(&out, res)
			checkGolden(t, tt.golden, "table", out.Bytes())
		})
	}
}

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		want     map[string]map[string]float64
		err      string
	}{
		{"suffix stripped, metrics by unit", "BenchmarkLatency/http/direct-16 \t 300\t 687451 ns/op\t 533.4 p50-µs\n",
			map[string]map[string]float64{"Latency/http/direct": {"ns/op": 687451, "p50-µs": 533.4}}, ""},
		{"interleaved setups, each its own", "BenchmarkLatency/stdio-2 \t 300\t 9000 ns/op\t 61.5 direct:p50-µs\t 120 direct:cpu-µs/call\t 180.5 planlock:p50-µs\t 95.25 planlock:cpu-µs/call\n",
			map[string]map[string]float64{"Latency/stdio": {"ns/op": 9000}, "Latency/stdio/direct": {"p50-µs": 61.5, "cpu-µs/call": 120},
				"Latency/stdio/planlock": {"p50-µs": 180.5, "cpu-µs/call": 95.25}}, ""},
		{"no suffix", "BenchmarkCheck 10 704.2 ns/op\n", map[string]map[string]float64{"Check": {"ns/op": 704.2}}, ""},
		{"other lines skipped", "goos: linux\nPASS\nok  \tpkg\t1.2s\n--- FAIL: BenchmarkX\nBenchmarkY-2 \tFAIL x y\n", map[string]map[string]float64{}, ""},
		{"bad figure", "BenchmarkCheck-2 10 7x4 ns/op\n", nil, `Check: metric "7x4"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := parse(strings.NewReader(tt.in))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for name, m := range tt.want {
				for unit, v := range m {
					if got[name][unit] != v {
						t.Errorf("%s %s = %v, want %v", name, unit, got[name][unit], v)
					}
				}
			}
		})
	}
}

// A missing benchmark leaves a dash, not a zero or a verdict.
func TestWriteMissing(t *testing.T) {
	var out bytes.Buffer
	write(&out, results{"Latency/stdio/planlock": {"p50-µs": 900}})
	s := out.String()
	if strings.Contains(s, "met") {
		t.Errorf("verdict without its figures:\n%s", s)
	}
	if !strings.Contains(s, "| — | — | 900 | — |") {
		t.Errorf("stdio p50 row:\n%s", s)
	}
}

// checkGolden compares got with testdata/name, or writes it there with -update.
func checkGolden(t *testing.T, name, what string, got []byte) {
	t.Helper()
	golden := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s (go test -update to accept):\n%s", what, golden, got)
	}
}

// A figure's decimals follow its size whatever its sign: a difference is
// negative when a setup measured faster than the direct call under load.
func TestNum(t *testing.T) {
	tests := []struct {
		v    float64
		ok   bool
		want string
	}{
		{0, false, "—"},
		{4.061, true, "4.06"},
		{-4.061, true, "-4.06"},
		{12.34, true, "12.3"},
		{-12.34, true, "-12.3"},
		{150.4, true, "150"},
		{-150.4, true, "-150"},
	}
	for _, tt := range tests {
		if got := num(tt.v, tt.ok); got != tt.want {
			t.Errorf("num(%v, %v) = %q, want %q", tt.v, tt.ok, got, tt.want)
		}
	}
}
