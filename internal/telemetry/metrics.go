// Package telemetry exports what the proxy and the gateway do: Prometheus
// metrics (Metrics) and OpenTelemetry traces (Tracing), both fed by the
// proxy's CallObserver hook. Neither sees argument values unless the
// operator asks for them in traces.
package telemetry

import (
	"context"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/planlock/planlock/proxy"
	"github.com/planlock/planlock/proxy/ledger"
)

// Metrics is planlock's Prometheus registry. It has its own registry (not
// the global one), so two in one process do not collide.
type Metrics struct {
	reg      *prometheus.Registry
	calls    *prometheus.CounterVec
	upstream *prometheus.HistogramVec
	syncs    prometheus.Histogram
	plans    *prometheus.GaugeVec
	writable *prometheus.GaugeVec
	holds    *holdsCollector
}

// NewMetrics registers planlock's metrics and the Go runtime's.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "planlock_calls_total",
			Help: "tools/call requests by plan, step, outcome (forwarded, failed, blocked, held, observed, not_sent) and rule (why not forwarded).",
		}, []string{"plan", "step", "outcome", "rule"}),
		upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "planlock_upstream_call_seconds",
			Help:    "Time the upstream took to answer a forwarded tools/call.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"plan", "step"}),
		syncs: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "planlock_state_sync_seconds",
			Help:    "Time each fdatasync of the state journal took.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}),
		plans: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "planlock_plans",
			Help: "Plans by state: loaded (serving) or refused (failed verification or validation).",
		}, []string{"state"}),
		writable: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "planlock_state_writable",
			Help: "1 while the plan's state takes records, 0 during a disk fault (every call refused until it can be written again).",
		}, []string{"plan"}),
		holds: &holdsCollector{
			desc:    prometheus.NewDesc("planlock_holds_open", "Holds waiting for a person's approval, by plan.", []string{"plan"}, nil),
			sources: map[string]HoldLister{},
		},
	}
	m.reg.MustRegister(m.calls, m.upstream, m.syncs, m.plans, m.writable, m.holds,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry is the registry, for tests and for embedding in another.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// StartCall counts the call when it ends (proxy.CallObserver).
func (m *Metrics) StartCall(ctx context.Context, c proxy.CallStart) (context.Context, func(proxy.CallEnd)) {
	return ctx, func(e proxy.CallEnd) {
		m.calls.WithLabelValues(c.Plan, e.Step, string(e.Outcome), e.Rule).Inc()
		if e.Upstream > 0 {
			m.upstream.WithLabelValues(c.Plan, e.Step).Observe(e.Upstream.Seconds())
		}
	}
}

// ObserveSync records one fdatasync of the state journal.
func (m *Metrics) ObserveSync(d time.Duration) { m.syncs.Observe(d.Seconds()) }

// SetPlans sets how many plans are loaded and refused.
func (m *Metrics) SetPlans(loaded, refused int) {
	m.plans.WithLabelValues("loaded").Set(float64(loaded))
	m.plans.WithLabelValues("refused").Set(float64(refused))
}

// SetStateWritable reports whether the plan's state takes records (false
// during a disk fault).
func (m *Metrics) SetStateWritable(plan string, writable bool) {
	v := 0.0
	if writable {
		v = 1
	}
	m.writable.WithLabelValues(plan).Set(v)
}

// HoldLister is what a plan's holds are read from (the proxy's state).
type HoldLister interface{ ListHolds() []ledger.Hold }

// WatchHolds reports the pending holds of a plan, read from its state at
// each scrape, until the returned stop is called. Watching a plan again
// replaces the earlier source (a reloaded plan).
func (m *Metrics) WatchHolds(plan string, holds HoldLister) (stop func()) {
	m.holds.mu.Lock()
	defer m.holds.mu.Unlock()
	m.holds.sources[plan] = holds
	return func() {
		m.holds.mu.Lock()
		defer m.holds.mu.Unlock()
		delete(m.holds.sources, plan)
	}
}

// holdsCollector reads each plan's open holds at scrape time, so the gauge
// can never drift from the state.
type holdsCollector struct {
	desc    *prometheus.Desc
	mu      sync.Mutex
	sources map[string]HoldLister
}

func (h *holdsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- h.desc }

func (h *holdsCollector) Collect(ch chan<- prometheus.Metric) {
	h.mu.Lock()
	plans := make([]string, 0, len(h.sources))
	for p := range h.sources {
		plans = append(plans, p)
	}
	sort.Strings(plans)
	fs := make([]HoldLister, len(plans))
	for i, p := range plans {
		fs[i] = h.sources[p]
	}
	h.mu.Unlock()
	// The sources read the state outside this lock.
	for i, p := range plans {
		ch <- prometheus.MustNewConstMetric(h.desc, prometheus.GaugeValue, float64(pending(fs[i].ListHolds())), p)
	}
}

// pending counts the holds waiting for a person.
func pending(hs []ledger.Hold) int {
	n := 0
	for _, h := range hs {
		if h.State == ledger.HoldPending {
			n++
		}
	}
	return n
}
