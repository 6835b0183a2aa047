package gateway

// Finding and loading the plans: a plan file that appears is loaded with
// every rule of planlock proxy (signature, expiry, no downgrade), then each
// served file has a planload.Reloader of its own, which replaces the plan
// only with a verified, newer one; a file that disappears stops its plan.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/boundedio"
	"github.com/planlock/planlock/internal/planrun"
	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/proxy/planload"
	"github.com/planlock/planlock/sign"
)

// fileSums is a look at a plan file and its bundle; zero sums mean missing.
type fileSums struct{ plan, bundle [sha256.Size]byte }

func sumFile(path string) [sha256.Size]byte {
	b, err := boundedio.ReadFile(path, boundedio.MaxPlanBytes)
	if err != nil {
		return [sha256.Size]byte{}
	}
	return sha256.Sum256(b)
}

// sha256Of is the hash in a "sha256:<hex>" digest (zero when malformed).
func sha256Of(digest string) [sha256.Size]byte {
	var s [sha256.Size]byte
	if b, err := hex.DecodeString(strings.TrimPrefix(digest, "sha256:")); err == nil && len(b) == sha256.Size {
		copy(s[:], b)
	}
	return s
}

func lookFile(file string) fileSums {
	return fileSums{plan: sumFile(file), bundle: sumFile(sign.BundlePath(file))}
}

// planFiles are the *.hcl files directly in the plans directory, without
// the plans' tests (<plan>_test.hcl).
func (g *Gateway) planFiles() ([]string, error) {
	ents, err := os.ReadDir(g.cfg.PlansDir)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range ents {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".hcl") && !strings.HasSuffix(e.Name(), "_test.hcl") && !strings.HasPrefix(e.Name(), ".") {
			files = append(files, filepath.Join(g.cfg.PlansDir, e.Name()))
		}
	}
	return files, nil
}

// scanState is what the previous scan saw, so that a file is acted on only
// once it looks the same on two scans in a row (a plan and its bundle
// replaced one after the other are loaded together).
type scanState struct {
	seen    map[string]fileSums
	missing map[string]int // served files missing, by consecutive scans
}

// scan adds the plan files that appeared (or changed after a refusal) and
// stops the plans whose file is gone. first acts at once.
func (g *Gateway) scan(first bool) {
	files, err := g.planFiles()
	if err != nil {
		// An unreadable directory stops nothing: the plans keep serving.
		g.log.Warn("cannot read the plans directory; plans keep serving", "dir", g.cfg.PlansDir, "err", err.Error())
		return
	}
	g.scanMu.Lock()
	defer g.scanMu.Unlock()
	if g.scanSt.seen == nil {
		g.scanSt = scanState{seen: map[string]fileSums{}, missing: map[string]int{}}
	}
	present := map[string]bool{}
	for _, f := range files {
		present[f] = true
		sums := lookFile(f)
		prev, seen := g.scanSt.seen[f]
		g.scanSt.seen[f] = sums
		if !first && (!seen || prev != sums) {
			continue // changing: look again next time
		}
		g.mu.RLock()
		_, served := g.byFile[f]
		r, isRefused := g.refused[f]
		g.mu.RUnlock()
		if served || (isRefused && r.sums == sums) {
			continue // its reloader watches it; or refused as it is
		}
		g.add(f, sums)
	}
	for f := range g.scanSt.seen {
		if !present[f] {
			delete(g.scanSt.seen, f)
		}
	}
	g.mu.Lock()
	for f := range g.refused {
		if !present[f] {
			delete(g.refused, f)
		}
	}
	var gone []*entry
	for f, e := range g.byFile {
		if present[f] {
			delete(g.scanSt.missing, f)
			continue
		}
		g.scanSt.missing[f]++
		if g.scanSt.missing[f] >= 2 {
			delete(g.scanSt.missing, f)
			delete(g.byFile, f)
			delete(g.byName, e.name)
			gone = append(gone, e)
		}
	}
	g.mu.Unlock()
	for _, e := range gone {
		g.log.Info("plan file removed: plan no longer served", "plan", e.name, "file", e.file)
		g.closeEntry(e)
	}
	g.reportPlans()
}

// planNameRE is what a plan name must be to name a URL path segment and a
// state directory.
var planNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// add loads a new plan file and serves it, or records why not.
func (g *Gateway) add(file string, sums fileSums) {
	refuse := func(name string, err error) {
		why := strings.Join(strings.Fields(err.Error()), " ")
		g.mu.Lock()
		g.refused[file] = refusal{sums: sums, why: why, name: name}
		g.mu.Unlock()
		g.log.Warn("plan refused: "+why, "file", file, "plan", name)
	}
	src := planload.Source{File: file, Policy: g.cfg.Policy}
	if g.cfg.RepoDir != "" {
		src.Path = path.Join(g.cfg.RepoDir, filepath.Base(file))
	}
	if src.Policy == nil {
		g.log.Warn(planload.InsecureWarning(file))
	}
	if g.cfg.beforeRead != nil {
		g.cfg.beforeRead(file)
	}
	l, err := src.Read(g.run, g.cfg.Now())
	// What was read must be what the scans saw stable: a write that landed
	// in between may be half done, and is left for the next scans.
	if lookFile(file) != sums || (err == nil && sha256Of(l.Plan.Digest) != sums.plan) {
		return
	}
	if err != nil {
		refuse("", err)
		return
	}
	name := l.Plan.Name
	if !planNameRE.MatchString(name) {
		refuse(name, fmt.Errorf("plan name %q cannot name a URL path and a state directory (use letters, digits, . _ -)", name))
		return
	}
	g.mu.RLock()
	other := g.byName[name]
	g.mu.RUnlock()
	if other != nil {
		refuse(name, fmt.Errorf("plan %q is already served from %s", name, other.file))
		return
	}
	up, err := g.upstreamOf(l)
	if err != nil {
		refuse(name, err)
		return
	}
	plog := g.log.With("plan", name)
	logLine := func(s string) { plog.Info(strings.TrimPrefix(s, "planlock: ")) }
	// The state is kept per signed path and trust policy, never per plan
	// label (which only names the URL): a relabelled or re-added file
	// keeps its counts and no-downgrade mark.
	lo := g.cfg.Ledger
	lo.OnHead = func(h ledger.Head) { plog.Info("audit head", "head", h.String()) }
	writable, _ := g.cfg.Metrics.(interface{ SetStateWritable(string, bool) })
	lo.OnFault = func(err error) {
		if err != nil {
			plog.Warn("state fault: calls are refused until it can be written again", "err", err.Error())
		} else {
			plog.Info("state writable again: calls are served")
		}
		if writable != nil {
			writable.SetStateWritable(name, err == nil)
		}
	}
	pctx, stop := context.WithCancel(g.run)
	ro := planrun.Options{
		State:    planrun.StateOptions{State: g.cfg.State, Root: g.cfg.StateDir, Ledger: lo, Log: logLine},
		Observe:  g.cfg.Observe,
		Upstream: up, CallTimeout: g.cfg.CallTimeout, MaxMessageBytes: g.cfg.MaxMessageBytes,
		Version: g.cfg.Version, Now: g.cfg.Now, Observer: g.cfg.Observer,
		Reload: planrun.Reload{Source: src, Interval: g.cfg.ReloadInterval, Accept: func(plan *hclplan.Plan) error {
			if plan.Name != name {
				return fmt.Errorf("the file now holds plan %q instead of %q; planlock serve serves a plan under its name: give the new plan its own file", plan.Name, name)
			}
			if !sameUpstream(l.Plan.Upstream, plan.Upstream) {
				return fmt.Errorf("plan %q names another upstream than the running one; remove the file and add it again (or restart) to change the upstream", plan.Name)
			}
			return nil
		}},
		Log: logLine, LogWriter: &logWriter{log: plog},
	}
	if h := g.cfg.Holds; h != nil {
		ro.Holds = *h
		ro.Holds.PlanFile, ro.Holds.PlanPath = file, src.Path
		if h.RepoURL != "" {
			ro.Holds.PlanFile = src.Path // the plan's path in the repository
		}
		ro.Holds.Log, ro.Holds.LogWriter = logLine, ro.LogWriter
	} else {
		ro.Holds.NoPRs = true // kept in the state, approved with planlock holds approve
	}
	gate, err := planrun.Open(pctx, l, ro)
	if err != nil {
		stop()
		refuse(name, err)
		return
	}
	p := gate.Proxy
	e := &entry{name: name, file: file, gate: gate, proxy: p, mount: p.Mount(pctx, "/mcp/"+name), stop: stop, stable: sums}
	g.mu.Lock()
	if g.byName[name] != nil { // added meanwhile from another file
		g.mu.Unlock()
		stop()
		_ = gate.Close()
		refuse(name, fmt.Errorf("plan %q is already served", name))
		return
	}
	delete(g.refused, file)
	g.byName[name], g.byFile[file] = e, e
	if g.cfg.Metrics != nil {
		e.unwatch = g.cfg.Metrics.WatchHolds(name, gate.State)
	}
	g.mu.Unlock()
	if up.URL != "" {
		// Connecting to an HTTP upstream costs nothing: do it now, so that
		// /readyz tells whether it is reachable. A stdio upstream starts
		// with the plan's first request.
		go e.mount.Start()
	}
	plog.Info("plan served", "path", "/mcp/"+name, "file", file, "loaded", l.Describe())
}

func sameUpstream(a, b *hclplan.Upstream) bool {
	if a == nil || b == nil {
		return a == b
	}
	return slices.Equal(a.Command, b.Command) && a.URL == b.URL && slices.Equal(a.Env, b.Env)
}

// closeEntry stops a plan no longer reachable by new requests: its sessions
// end, the requests in flight finish (up to DrainTimeout), then its upstream
// stops and its ledger closes with every outcome written.
func (g *Gateway) closeEntry(e *entry) {
	if e.unwatch != nil {
		e.unwatch()
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.cfg.DrainTimeout)
	defer cancel()
	_ = e.mount.Shutdown(ctx)
	waited := make(chan struct{})
	go func() { e.inflight.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-ctx.Done():
		g.log.Warn("requests still in flight at the drain timeout", "plan", e.name)
	}
	e.stop()
	e.gate.Stop()
	e.mount.Stop()
	if err := e.gate.Close(); err != nil {
		g.log.Error("closing the plan's state", "plan", e.name, "err", err.Error())
	}
}

// logWriter turns the proxy's log lines into log records.
type logWriter struct {
	log *slog.Logger
	mu  sync.Mutex
	buf []byte
}

func (w *logWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		line := strings.TrimPrefix(strings.TrimPrefix(string(w.buf[:i]), "planlock proxy: "), "planlock: ")
		w.buf = w.buf[i+1:]
		if line != "" {
			w.log.Info(line)
		}
	}
	if len(w.buf) > 64<<10 { // a line without end: flush it
		w.log.Info(string(w.buf))
		w.buf = w.buf[:0]
	}
	return len(b), nil
}

var _ io.Writer = (*logWriter)(nil)
