// Command table reads the output of the benchmarks bench/run starts (go test
// -bench, on standard input) and prints one Markdown table of the figures,
// their ratios within that run and the targets of the proxy.
//
//	go test ./bench ./proxy/gate ... -bench ... | go run ./bench/cmd/table -machine "..."
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
)

func main() {
	machine := flag.String("machine", "", "the machine the figures come from (printed above the table)")
	flag.Parse()
	res, cpu, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "table:", err)
		os.Exit(1)
	}
	if len(res) == 0 {
		fmt.Fprintln(os.Stderr, "table: no benchmark results on standard input")
		os.Exit(1)
	}
	if *machine != "" {
		if cpu != "" {
			*machine += " (CPUID: " + cpu + ")"
		}
		fmt.Println(*machine)
		fmt.Println()
	}
	write(os.Stdout, res)
	if hasRelay(res) {
		writeRelay(os.Stdout, res)
	}
}

// cpuLine is go test's own name for the CPU (its CPUID brand string), which
// may differ from /proc/cpuinfo's model name on a virtual machine.
var cpuLine = regexp.MustCompile(`^cpu: (.*\S)\s*$`)

// results maps a benchmark's name (without the -GOMAXPROCS suffix) to its
// metrics by unit.
type results map[string]map[string]float64

var procSuffix = regexp.MustCompile(`-\d+$`)

// parse reads go test -bench output; lines that are not results are skipped.
// cpu is go test's cpu line, if any.
func parse(r io.Reader) (res results, cpu string, err error) {
	res = results{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if m := cpuLine.FindStringSubmatch(sc.Text()); m != nil {
			cpu = m[1]
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		name := procSuffix.ReplaceAllString(strings.TrimPrefix(f[0], "Benchmark"), "")
		m := map[string]float64{}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, "", fmt.Errorf("%s: metric %q: %w", name, f[i], err)
			}
			// An interleaved benchmark (BenchmarkLatency) reports each
			// setup's figures as <setup>:<unit>: they are that setup's,
			// as if it had a line of its own.
			if setup, unit, ok := strings.Cut(f[i+1], ":"); ok {
				sub := name + "/" + setup
				if res[sub] == nil {
					res[sub] = map[string]float64{}
				}
				res[sub][unit] = v
				continue
			}
			m[f[i+1]] = v
		}
		res[name] = m
	}
	return res, cpu, sc.Err()
}

// get returns a metric, ok false when that benchmark did not run.
func (r results) get(name, unit string) (float64, bool) {
	m, ok := r[name]
	if !ok {
		return 0, false
	}
	v, ok := m[unit]
	return v, ok
}

// num prints a figure with as many decimals as its size calls for; a
// difference (an "added" cell) may be negative on a loaded machine and is
// printed the same way.
func num(v float64, ok bool) string {
	switch a := math.Abs(v); {
	case !ok:
		return "—"
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

func ratio(a float64, aok bool, b float64, bok bool) string {
	if !aok || !bok || b == 0 {
		return "—"
	}
	return strconv.FormatFloat(a/b, 'f', 2, 64) + "×"
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

func write(w io.Writer, r results) {
	fmt.Fprintln(w, "| Measurement | direct | pass-through / reference | planlock | planlock ÷ reference | target |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---|")
	row := func(cells ...string) { fmt.Fprintln(w, "| "+strings.Join(cells, " | ")+" |") }

	sync, _, syncOK := oneSync(r)
	// The proxy runs three times: by default (the benchmark's step has a
	// large budget, so it is counted in leases), the same with its state on
	// a memory filesystem (the proxy without the disk), and with
	// --sync-each-call (one fdatasync per forwarded call, shared by
	// concurrent calls).
	modes := []struct{ kind, suffix string }{
		{"planlock", ""},
		{"planlock-memstate", ", state on memory"},
		{"planlock-sync-each-call", ", --sync-each-call"},
	}
	// Each transport with a legacy client and a modern one (mcp-go
	// v1.2.1's default client, protocol 2026-07-28); every target holds
	// for both.
	for _, tr := range []struct{ key, label string }{
		{"stdio", "stdio"}, {"http", "HTTP"},
		{"stdio-modern", "stdio, modern client"}, {"http-modern", "HTTP, modern client"},
	} {
		base := strings.TrimSuffix(tr.key, "-modern")
		for _, q := range []string{"p50-µs", "p99-µs"} {
			for _, m := range modes {
				d, dok := r.get("Latency/"+tr.key+"/direct", q)
				p, pok := r.get("Latency/"+tr.key+"/passthrough", q)
				l, lok := r.get("Latency/"+tr.key+"/"+m.kind, q)
				if (m.suffix != "" || base != tr.key) && !lok {
					continue // an older run without this mode or client
				}
				target := ""
				// The fdatasync target is the disk's; the state on memory
				// has its own, next to the floor (relay.go).
				if q == "p50-µs" && base == "stdio" && m.kind != "planlock-memstate" && pok && lok && syncOK {
					limit := 1.2*p + sync
					target = fmt.Sprintf("≤ 1.2× pass-through + 1 fdatasync = %.0f µs: %s", limit, verdict(l <= limit))
				}
				row(fmt.Sprintf("%s, 1 client, sequential, %s latency%s (µs)", tr.label, strings.TrimSuffix(q, "-µs"), m.suffix),
					num(d, dok), num(p, pok), num(l, lok), ratio(l, lok, p, pok), target)
			}
		}
		for _, m := range modes {
			d, dok := r.get("Throughput16/"+tr.key+"/direct", "calls/s")
			p, pok := r.get("Throughput16/"+tr.key+"/passthrough", "calls/s")
			l, lok := r.get("Throughput16/"+tr.key+"/"+m.kind, "calls/s")
			if (m.suffix != "" || base != tr.key) && !lok {
				continue
			}
			target := ""
			if base == "http" && m.suffix == "" && pok && lok {
				target = "≥ 0.8× pass-through: " + verdict(l >= 0.8*p)
			}
			row(fmt.Sprintf("%s, 16 concurrent clients%s (calls/s)", tr.label, m.suffix), num(d, dok), num(p, pok), num(l, lok), ratio(l, lok, p, pok), target)
		}
	}
	if v, ok := r.get("Latency/stdio/fdatasync", "p50-µs"); ok {
		p99, ok99 := r.get("Latency/stdio/fdatasync", "p99-µs")
		row("one 400 B append + fdatasync after a call, in the stdio rounds, p50 / p99 (µs)", "", num(v, ok)+" / "+num(p99, ok99), "", "", "the floor for --sync-each-call")
	}
	back, backOK := r.get("Fdatasync", "ns/op")
	back /= 1e3
	row("one 400 B append + fdatasync, back to back (µs)", "", num(back, backOK), "", "", "the floor for a durable count")
	for _, v := range []struct{ name, label string }{
		{"Reserve/leases", "in leases, 1 caller"},
		{"Reserve/sync-each-call", "one fdatasync per call, 1 caller"},
		{"ReserveParallel16/leases", "in leases, 16 callers"},
		{"ReserveParallel16/sync-each-call", "one fdatasync per call, 16 callers"},
	} {
		x, xok := r.get(v.name, "ns/op")
		s, sok := r.get(v.name, "syncs/op")
		target := ""
		if sok {
			target = fmt.Sprintf("%.3f fdatasync per call (≤ 1: %s)", s, verdict(s <= 1))
		}
		row("ledger: count + audit record, then outcome, "+v.label+" (µs per call)", "", num(back, backOK && xok), num(x/1e3, xok), ratio(x/1e3, xok, back, backOK), target)
	}

	g, gok := r.get("Check", "ns/op")
	target := ""
	if gok {
		target = "≤ 2 µs: " + verdict(g <= 2000)
	}
	row("gate check of one call (µs)", "", "", num(g/1e3, gok), "", target)

	u, uok := r.get("ReadUnverified", "ns/op")
	for _, v := range []struct{ name, label string }{{"ReadUnverified", "plan load, no signature"}, {"ReadKey", "plan load + signature check, key"}, {"ReadKeyless", "plan load + signature check, keyless"}} {
		x, xok := r.get(v.name, "ns/op")
		row(v.label+" (µs)", "", num(u/1e3, uok && v.name != "ReadUnverified"), num(x/1e3, xok), ratio(x, xok, u, uok && v.name != "ReadUnverified"), "reference: load without signature")
	}

	for _, v := range []struct{ plan, ref, label, refLabel string }{
		{"CLI500Steps/plan-fmt", "CLI500Steps/hclfmt", "`planlock plan fmt --check`, 500 steps, one process (ms)", "`hclfmt`"},
		{"CLI500Steps/plan-validate", "CLI500Steps/hclfmt-check", "`planlock plan validate`, 500 steps, one process (ms)", "`hclfmt -check`"},
		{"InProcess500Steps/plan-format", "InProcess500Steps/hclfmt", "plan format, 500 steps, in process (ms)", "`hclwrite.Format`"},
		{"InProcess500Steps/plan-parse", "InProcess500Steps/hclfmt-check", "plan parse + validate, 500 steps, in process (ms)", "HCL parse + format"},
	} {
		x, xok := r.get(v.plan, "ns/op")
		y, yok := r.get(v.ref, "ns/op")
		row(v.label, "", num(y/1e6, yok), num(x/1e6, xok), ratio(x, xok, y, yok), "reference: "+v.refLabel)
	}
	writeGateway(row, r) // gateway.go
}
