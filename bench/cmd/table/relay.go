package main

import (
	"fmt"
	"io"
	"strings"
)

// relaySetups are the rows of the relay table, in order: the floor below
// planlock, planlock, and the relays beside it; then the same with a
// modern client (modernSetups).
var relaySetups = []struct{ kind, label string }{
	{"direct", "direct (no relay)"},
	{"floor-lines", "floor: Go line copier"},
	{"floor-json", "floor: copier + 1 JSON decode/encode each way"},
	{"floor-sync", "floor: copier + append & fdatasync of each request"},
	{"passthrough", "bare mcp-go relay (bench/passthrough)"},
	{"planlock", "planlock proxy"},
	{"planlock-memstate", "planlock proxy, state on memory (/dev/shm)"},
	{"planlock-sync-each-call", "planlock proxy --sync-each-call"},
	{"mcp-proxy", "`mcp-proxy` 6.7.19 (npm)"},
	{"supergateway", "`supergateway` 4.0.0 (npm)"},
	{"civic-passthrough", "`@civic/passthrough-mcp-server` 0.12.1 (npm)"},
}

// modernSuffix marks a relay table row measured with a modern client
// (mcp-go v1.2.1's default client, protocol 2026-07-28). The npm relays are
// measured with the legacy client only.
const modernSuffix = ", modern client"

// eras are the clients the relay table and its targets are given for: the
// benchmarks' transport suffix and the label suffix of their rows.
var eras = []struct{ key, label string }{{"", ""}, {"-modern", modernSuffix}}

// hasRelay says the run measured the relay's neighbours (bench/run's newer
// benchmarks); an older run's output prints without the relay table.
func hasRelay(r results) bool {
	_, ok := r.get("Latency/stdio/floor-lines", "p50-µs")
	return ok
}

// writeRelay prints the relay table (every setup side by side, "added" is
// over a direct call) and the relay's targets.
func writeRelay(w io.Writer, r results) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| Relay | stdio p50 added (µs) | stdio CPU per call (µs) | HTTP p50 (µs) | HTTP p99 (µs) | HTTP CPU per call (µs) | HTTP 16 sessions (calls/s) | HTTP 64 sessions (calls/s) |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, era := range eras {
		stdio, http := "stdio"+era.key, "http"+era.key
		d50, dok := r.get("Latency/"+stdio+"/direct", "p50-µs")
		for _, s := range relaySetups {
			p50, ok := r.get("Latency/"+stdio+"/"+s.kind, "p50-µs")
			added := num(p50-d50, ok && dok)
			if s.kind == "direct" && ok {
				added = num(p50, ok) + " (itself)"
			}
			cells := []string{s.label + era.label, added, num(r.get("Latency/"+stdio+"/"+s.kind, "cpu-µs/call"))}
			for _, m := range []struct{ bench, unit string }{
				{"Latency", "p50-µs"}, {"Latency", "p99-µs"}, {"Latency", "cpu-µs/call"},
				{"Throughput16", "calls/s"}, {"Throughput64", "calls/s"},
			} {
				cells = append(cells, num(r.get(m.bench+"/"+http+"/"+s.kind, m.unit)))
			}
			if strings.Join(cells[1:], "") == strings.Repeat("—", len(cells)-1) {
				continue // not measured in this run (npm unavailable, or a legacy-only relay)
			}
			fmt.Fprintln(w, "| "+strings.Join(cells, " | ")+" |")
		}
	}
	fmt.Fprintln(w)
	for _, era := range eras {
		for _, t := range relayTargets(r, era.key) {
			if era.key != "" {
				t = "modern client: " + t
			}
			fmt.Fprintln(w, "- "+t)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| Memory (RSS) | bare mcp-go relay | planlock |")
	fmt.Fprintln(w, "|---|---:|---:|")
	for _, m := range []struct{ unit, label string }{
		{"rss-MB", "1,000 idle HTTP sessions (MB)"},
		{"KB/session", "per idle HTTP session (KB)"},
		{"idle-growth-KB", "growth while the 1,000 sessions idle (KB)"},
	} {
		fmt.Fprintf(w, "| %s | %s | %s |\n", m.label,
			num(r.get("MemoryIdleSessions/http/passthrough", m.unit)), num(r.get("MemoryIdleSessions/http/planlock", m.unit)))
	}
	fmt.Fprintf(w, "| 10,000-step plan loaded, stdio (MB) | | %s |\n", num(r.get("MemoryPlan10000Steps", "rss-MB")))
}

// relayTargets are the relay's targets, each with its figures and verdict,
// for the client of era ("" legacy, "-modern"; the stdio fdatasync is
// timed in the legacy rounds and stands for both).
func relayTargets(r results, era string) []string {
	var out []string
	stdio, http := "Latency/stdio"+era+"/", "Latency/http"+era+"/"
	d, dok := r.get(stdio+"direct", "p50-µs")
	fl, flok := r.get(stdio+"floor-lines", "p50-µs")
	l, lok := r.get(stdio+"planlock", "p50-µs")
	if dok && flok && lok {
		out = append(out, fmt.Sprintf("stdio p50 added by planlock ≤ 2× the line copier's: %.0f vs %.0f µs (%s): %s",
			l-d, fl-d, ratio(l-d, true, fl-d, true), verdict(l-d <= 2*(fl-d))))
	}
	fj, fjok := r.get(stdio+"floor-json", "p50-µs")
	m, mok := r.get(stdio+"planlock-memstate", "p50-µs")
	if dok && fjok && mok {
		out = append(out, fmt.Sprintf("stdio p50 added with state on memory ≤ 1.2× the copier + 1 JSON decode/encode's: %.0f vs %.0f µs (%s): %s",
			m-d, fj-d, ratio(m-d, true, fj-d, true), verdict(m-d <= 1.2*(fj-d))))
	}
	pc, pcok := r.get(stdio+"passthrough", "cpu-µs/call")
	lc, lcok := r.get(stdio+"planlock", "cpu-µs/call")
	if pcok && lcok {
		out = append(out, fmt.Sprintf("stdio CPU per call ≤ 1.3× the bare relay's: %.0f vs %.0f µs (%s): %s",
			lc, pc, ratio(lc, true, pc, true), verdict(lc <= 1.3*pc)))
	}
	p99p, ok1 := r.get(http+"passthrough", "p99-µs")
	p99l, ok2 := r.get(http+"planlock", "p99-µs")
	if ok1 && ok2 {
		out = append(out, fmt.Sprintf("HTTP p99 ≤ 1.2× the bare relay's: %.0f vs %.0f µs (%s): %s",
			p99l, p99p, ratio(p99l, true, p99p, true), verdict(p99l <= 1.2*p99p)))
	}
	for _, n := range []string{"16", "64"} {
		tp, ok1 := r.get("Throughput"+n+"/http"+era+"/passthrough", "calls/s")
		tl, ok2 := r.get("Throughput"+n+"/http"+era+"/planlock", "calls/s")
		if ok1 && ok2 {
			out = append(out, fmt.Sprintf("HTTP %s sessions calls/s ≥ 1.0× the bare relay's: %.0f vs %.0f (%s): %s",
				n, tl, tp, ratio(tl, true, tp, true), verdict(tl >= tp)))
		}
	}
	s, sok := r.get(stdio+"planlock-sync-each-call", "p50-µs")
	f, how, fok := oneSync(r)
	p, pok := r.get(stdio+"passthrough", "p50-µs")
	if sok && pok && fok {
		out = append(out, fmt.Sprintf("stdio p50 with --sync-each-call ≤ the bare relay's p50 + 1 fdatasync: %.0f vs %.0f + %.0f µs (the fdatasync %s): %s",
			s, p, f, how, verdict(s <= p+f)))
	}
	return out
}

// oneSync is the cost of one fdatasync the sync targets allow, in µs, and
// how it was measured: the p50 of one after a call, taken in the stdio
// latency rounds, or in a run from before those, the mean of
// BenchmarkFdatasync's, back to back.
func oneSync(r results) (float64, string, bool) {
	if v, ok := r.get("Latency/stdio/fdatasync", "p50-µs"); ok {
		return v, "p50 of one after a call, in the same rounds", true
	}
	v, ok := r.get("Fdatasync", "ns/op")
	return v / 1e3, "mean of a run back to back", ok
}
