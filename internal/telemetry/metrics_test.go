package telemetry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/planlock/planlock/proxy"
	"github.com/planlock/planlock/proxy/ledger"
)

// scrape reads the metrics as Prometheus would, over HTTP in the text format.
func scrape(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

func labelsOf(m *dto.Metric) string {
	var b []string
	for _, l := range m.GetLabel() {
		b = append(b, l.GetName()+"="+l.GetValue())
	}
	return strings.Join(b, ",")
}

func TestMetricsCountCallsByOutcomeAndRule(t *testing.T) {
	m := NewMetrics()
	calls := []struct {
		plan string
		end  proxy.CallEnd
	}{
		{"refund", proxy.CallEnd{Step: "lookup", Outcome: proxy.OutcomeForwarded, Upstream: 3 * time.Millisecond}},
		{"refund", proxy.CallEnd{Step: "lookup", Outcome: proxy.OutcomeForwarded, Upstream: 40 * time.Millisecond}},
		{"refund", proxy.CallEnd{Step: "lookup", Outcome: proxy.OutcomeBlocked, Rule: "max_calls"}},
		{"refund", proxy.CallEnd{Outcome: proxy.OutcomeBlocked, Rule: "unplanned"}},
		{"deploy", proxy.CallEnd{Step: "ship", Outcome: proxy.OutcomeHeld, Rule: "approval"}},
	}
	for _, c := range calls {
		_, end := m.StartCall(context.Background(), proxy.CallStart{Plan: c.plan, Tool: "t", Args: []byte(`{"secret":"x"}`)})
		end(c.end)
	}
	fams := scrape(t, m)
	got := map[string]float64{}
	for _, mm := range fams["planlock_calls_total"].GetMetric() {
		got[labelsOf(mm)] = mm.GetCounter().GetValue()
	}
	want := map[string]float64{
		"outcome=forwarded,plan=refund,rule=,step=lookup":        2,
		"outcome=blocked,plan=refund,rule=max_calls,step=lookup": 1,
		"outcome=blocked,plan=refund,rule=unplanned,step=":       1,
		"outcome=held,plan=deploy,rule=approval,step=ship":       1,
	}
	if len(got) != len(want) {
		t.Fatalf("calls_total series %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("calls_total{%s} = %v, want %v", k, got[k], v)
		}
	}
	h := fams["planlock_upstream_call_seconds"].GetMetric()
	if len(h) != 1 || h[0].GetHistogram().GetSampleCount() != 2 || labelsOf(h[0]) != "plan=refund,step=lookup" {
		t.Fatalf("upstream histogram %v", h)
	}
	if s := h[0].GetHistogram().GetSampleSum(); s < 0.042 || s > 0.044 {
		t.Fatalf("upstream histogram sum %v, want 0.043", s)
	}
}

func TestMetricsHoldsPlansAndSyncs(t *testing.T) {
	m := NewMetrics()
	open := 2
	stop := m.WatchHolds("refund", holdsFunc(func() int { return open }))
	m.WatchHolds("deploy", holdsFunc(func() int { return 0 }))
	m.SetPlans(3, 1)
	m.ObserveSync(700 * time.Microsecond)
	m.ObserveSync(2 * time.Millisecond)

	read := func() (map[string]float64, map[string]float64, uint64) {
		fams := scrape(t, m)
		holds, plans := map[string]float64{}, map[string]float64{}
		for _, mm := range fams["planlock_holds_open"].GetMetric() {
			holds[labelsOf(mm)] = mm.GetGauge().GetValue()
		}
		for _, mm := range fams["planlock_plans"].GetMetric() {
			plans[labelsOf(mm)] = mm.GetGauge().GetValue()
		}
		return holds, plans, fams["planlock_state_sync_seconds"].GetMetric()[0].GetHistogram().GetSampleCount()
	}
	holds, plans, syncs := read()
	if holds["plan=refund"] != 2 || holds["plan=deploy"] != 0 || len(holds) != 2 {
		t.Fatalf("holds %v", holds)
	}
	if plans["state=loaded"] != 3 || plans["state=refused"] != 1 {
		t.Fatalf("plans %v", plans)
	}
	if syncs != 2 {
		t.Fatalf("%d syncs, want 2", syncs)
	}
	// Read at each scrape: a new hold shows without anyone telling.
	open = 3
	if holds, _, _ = read(); holds["plan=refund"] != 3 {
		t.Fatalf("holds after a new one %v", holds)
	}
	// A plan that goes away stops being reported.
	stop()
	if holds, _, _ = read(); len(holds) != 1 {
		t.Fatalf("holds after stop %v", holds)
	}
}

// Two registries in one process do not collide (no global state).
func TestTwoMetricsInOneProcess(t *testing.T) {
	a, b := NewMetrics(), NewMetrics()
	_, end := a.StartCall(context.Background(), proxy.CallStart{Plan: "p"})
	end(proxy.CallEnd{Outcome: proxy.OutcomeBlocked, Rule: "args"})
	if n := len(scrape(t, b)["planlock_calls_total"].GetMetric()); n != 0 {
		t.Fatalf("b sees %d series of a", n)
	}
}

// holdsFunc lists n() pending holds, and an approved and a rejected one
// that do not count.
type holdsFunc func() int

func (f holdsFunc) ListHolds() []ledger.Hold {
	hs := []ledger.Hold{{State: ledger.HoldApproved}, {State: ledger.HoldRejected}}
	for range f() {
		hs = append(hs, ledger.Hold{State: ledger.HoldPending})
	}
	return hs
}

// TestMetricsStateWritable: a plan's state in a disk fault reads 0 until it
// recovers, each plan on its own.
func TestMetricsStateWritable(t *testing.T) {
	m := NewMetrics()
	read := func() map[string]float64 {
		out := map[string]float64{}
		for _, mm := range scrape(t, m)["planlock_state_writable"].GetMetric() {
			out[labelsOf(mm)] = mm.GetGauge().GetValue()
		}
		return out
	}
	m.SetStateWritable("refund", true)
	m.SetStateWritable("deploy", true)
	m.SetStateWritable("refund", false)
	if got := read(); got["plan=refund"] != 0 || got["plan=deploy"] != 1 || len(got) != 2 {
		t.Fatalf("during refund's fault: %v", got)
	}
	m.SetStateWritable("refund", true)
	if got := read(); got["plan=refund"] != 1 {
		t.Fatalf("after recovery: %v", got)
	}
}
