package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The relay table of recorded runs (floor, npm relays, CPU per call,
// memory; the later ones with the state on memory, then with the copier
// that syncs and the fdatasync timed in the latency rounds, the last with a
// modern client too), against their golden files; a run without the floor
// has none.
func TestWriteRelayGolden(t *testing.T) {
	for _, tt := range []struct{ raw, golden string }{
		{"relay-raw.txt", "relay.md"},
		{"memstate-raw.txt", "memstate-relay.md"},
		{"fdatasync-raw.txt", "fdatasync-relay.md"},
		{"modern-raw.txt", "modern-relay.md"},
	} {
		t.Run(tt.raw, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			res, _, err := parse(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			if !hasRelay(res) {
				t.Fatal("hasRelay = false for a run with the floor")
			}
			var out bytes.Buffer
			writeRelay(&out, res)
			checkGolden(t, tt.golden, "relay table", out.Bytes())
		})
	}
	old, err := os.ReadFile(filepath.Join("testdata", "raw.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if res, _, err := parse(bytes.NewReader(old)); err != nil || hasRelay(res) {
		t.Errorf("an older run: hasRelay true or %v", err)
	}
}

// The state-on-memory target: planlock's stdio p50 added over direct against
// 1.2× the JSON copier's, met and not met, and left out without its figures.
func TestRelayTargetMemState(t *testing.T) {
	const line = "stdio p50 added with state on memory ≤ 1.2× the copier + 1 JSON decode/encode's: "
	run := func(mem float64) results {
		return results{
			"Latency/stdio/direct":            {"p50-µs": 200},
			"Latency/stdio/floor-lines":       {"p50-µs": 240},
			"Latency/stdio/floor-json":        {"p50-µs": 300},
			"Latency/stdio/planlock":          {"p50-µs": 500},
			"Latency/stdio/planlock-memstate": {"p50-µs": mem},
		}
	}
	for _, tt := range []struct {
		name string
		r    results
		want string // "" when the line must be absent
	}{
		{"met", run(310), line + "110 vs 100 µs (1.10×): met"},
		{"at the limit", run(320), line + "120 vs 100 µs (1.20×): met"},
		{"not met", run(321), line + "121 vs 100 µs (1.21×): NOT met"},
		{"not measured", func() results { r := run(310); delete(r, "Latency/stdio/planlock-memstate"); return r }(), ""},
		{"no floor", func() results { r := run(310); delete(r, "Latency/stdio/floor-json"); return r }(), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := targetLine(tt.r, line); got != tt.want {
				t.Errorf("target line = %q, want %q", got, tt.want)
			}
		})
	}
}

// The --sync-each-call target allows one fdatasync: the p50 of one after a
// call, timed in the same stdio rounds, or, in a run from before those,
// BenchmarkFdatasync's mean; met, at the limit, not met, and left out
// without a figure.
func TestRelayTargetSyncEachCall(t *testing.T) {
	const line = "stdio p50 with --sync-each-call ≤ the bare relay's p50 + 1 fdatasync: "
	run := func(sync float64) results {
		return results{
			"Latency/stdio/passthrough":             {"p50-µs": 500},
			"Latency/stdio/planlock-sync-each-call": {"p50-µs": sync},
			"Latency/stdio/fdatasync":               {"p50-µs": 300, "p99-µs": 900},
			"Fdatasync":                             {"ns/op": 200000},
		}
	}
	without := func(r results, k string) results { delete(r, k); return r }
	const rounds, back = " (the fdatasync p50 of one after a call, in the same rounds): ", " (the fdatasync mean of a run back to back): "
	for _, tt := range []struct {
		name string
		r    results
		want string // "" when the line must be absent
	}{
		{"met", run(750), line + "750 vs 500 + 300 µs" + rounds + "met"},
		{"at the limit", run(800), line + "800 vs 500 + 300 µs" + rounds + "met"},
		{"not met", run(801), line + "801 vs 500 + 300 µs" + rounds + "NOT met"},
		{"older run: back to back", without(run(650), "Latency/stdio/fdatasync"), line + "650 vs 500 + 200 µs" + back + "met"},
		{"older run, not met", without(run(750), "Latency/stdio/fdatasync"), line + "750 vs 500 + 200 µs" + back + "NOT met"},
		{"no fdatasync", without(without(run(750), "Latency/stdio/fdatasync"), "Fdatasync"), ""},
		{"no sync-each-call", without(run(750), "Latency/stdio/planlock-sync-each-call"), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := targetLine(tt.r, line); got != tt.want {
				t.Errorf("target line = %q, want %q", got, tt.want)
			}
		})
	}
}

// targetLine is the relay target line of r that starts with prefix, "" when
// there is none.
func targetLine(r results, prefix string) string {
	var got string
	for _, l := range relayTargets(r, "") {
		if strings.HasPrefix(l, prefix) {
			got = l
		}
	}
	return got
}
