package main

import "fmt"

// writeGateway adds the rows of BenchmarkGateway64: one planlock serve with
// 8 plans against 8 planlock proxy processes, 64 HTTP clients in all, and
// each plan's p99 against one plan served alone to its 8 clients.
func writeGateway(row func(cells ...string), r results) {
	s, sok := r.get("Gateway64/serve", "calls/s")
	p, pok := r.get("Gateway64/proxies", "calls/s")
	if !sok && !pok {
		return // an older run without it
	}
	target := ""
	if sok && pok {
		target = "≥ 0.9× the 8 proxies: " + verdict(s >= 0.9*p)
	}
	row("64 HTTP clients over 8 plans: one `planlock serve` vs 8 `planlock proxy` (calls/s)", "", num(p, pok), num(s, sok), ratio(s, sok, p, pok), target)
	solo, solok := r.get("Gateway64/solo", "p99-max-µs")
	for _, v := range []struct{ kind, label string }{{"serve", "one `planlock serve`"}, {"proxies", "8 `planlock proxy`"}} {
		x, xok := r.get("Gateway64/"+v.kind, "p99-max-µs")
		target := ""
		if v.kind == "serve" && xok && solok {
			target = fmt.Sprintf("≤ 1.5× solo: %s", verdict(x <= 1.5*solo))
		}
		row("64 HTTP clients over 8 plans, "+v.label+": worst plan's p99 vs one plan alone with its 8 clients (µs)", "", num(solo, solok), num(x, xok), ratio(x, xok, solo, solok), target)
	}
}
