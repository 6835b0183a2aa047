package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"

	"github.com/planlock/planlock/internal/planrun"
)

// healthz answers 200 while the process serves HTTP at all.
func (g *Gateway) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

// planHealth is one plan in /readyz.
type planHealth struct {
	Upstream string `json:"upstream"` // "ready", "idle" (stdio, not started yet) or why not
	State    string `json:"state"`    // "writable" or why not
	ready    bool
}

// readyz answers 200 when at least one plan is served, every started
// upstream is connected and every plan's state directory is writable;
// 503 otherwise. It is not authenticated, so its body only counts; which
// plan is not ready and why goes to the log, once per change.
func (g *Gateway) readyz(w http.ResponseWriter, _ *http.Request) {
	g.mu.RLock()
	entries := make([]*entry, 0, len(g.byName))
	for _, e := range g.byName {
		entries = append(entries, e)
	}
	g.mu.RUnlock()
	plans := map[string]planHealth{}
	ready := len(entries) > 0
	for _, e := range entries {
		h := planHealth{Upstream: "idle", State: "writable", ready: true}
		if e.mount.Started() {
			if ok, why := e.mount.UpstreamReady(); ok {
				h.Upstream = "ready"
			} else {
				h.Upstream, h.ready = "unavailable: "+errText(why), false
			}
		}
		if err := fault(e.gate.State); err != nil {
			// A disk fault: the ledger refuses calls until it recovers.
			h.State, h.ready = "not writable: "+err.Error(), false
		} else if err := writable(e.gate.State.Dir()); err != nil {
			h.State, h.ready = "not writable: "+err.Error(), false
		}
		ready = ready && h.ready
		plans[e.name] = h
	}
	notReady := 0
	var why []string
	for name, h := range plans {
		if !h.ready {
			notReady++
			why = append(why, fmt.Sprintf("plan %s: upstream %s, state %s", name, h.Upstream, h.State))
		}
	}
	sort.Strings(why)
	g.noteReadiness(ready, len(entries), strings.Join(why, "; "))
	body := map[string]any{"ready": ready, "plans": len(entries), "not_ready": notReady, "refused": len(g.Refused())}
	w.Header().Set("Content-Type", "application/json")
	if !ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(body)
}

// noteReadiness logs what /readyz found when it differs from the last time.
func (g *Gateway) noteReadiness(ready bool, n int, why string) {
	note := fmt.Sprintf("%t %d %s", ready, n, why)
	g.readyMu.Lock()
	changed := note != g.lastReady
	g.lastReady = note
	g.readyMu.Unlock()
	switch {
	case !changed:
	case ready:
		g.log.Info("ready", "plans", n)
	case n == 0:
		g.log.Warn("not ready: no plan is served")
	default:
		g.log.Warn("not ready: " + why)
	}
}

func errText(err error) string {
	if err == nil {
		return "unknown"
	}
	return err.Error()
}

// writable creates and removes a file in dir.
func writable(dir string) error {
	f, err := os.CreateTemp(dir, ".readyz-*")
	if err != nil {
		return err
	}
	name := f.Name()
	err = f.Close()
	if rerr := os.Remove(name); err == nil {
		err = rerr
	}
	return err
}

// fault is the state's disk fault, nil for a state that has none to report.
func fault(s planrun.State) error {
	if f, ok := s.(planrun.Faulter); ok {
		return f.Fault()
	}
	return nil
}
