// Package gcfloor lets a long-running process whose live heap is small
// collect garbage less often. With GOGC's default of 100 the collector runs
// each time the heap doubles, so a proxy with a few megabytes live collects
// every few megabytes allocated: at thousands of calls a second that is
// several collections a second, and their mark workers take a tenth of the
// CPU. Start keeps the heap goal at least a fixed headroom above the live
// heap by raising GOGC while the live heap is smaller than the headroom; a
// live heap larger than the headroom keeps GOGC as it was, so large heaps
// grow by no more than they do without it.
package gcfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// MaxPercent bounds the GOGC that Start sets.
const MaxPercent = 1000

const liveMetric = "/gc/heap/live:bytes"

// Start keeps the heap goal at least headroom bytes above the live heap,
// adjusting GOGC after each collection, until stop, which restores GOGC.
// An operator's GOGC or GOMEMLIMIT is left alone (Start does nothing), as
// is a collector that is off.
func Start(headroom uint64) (stop func()) {
	if t := start(headroom); t != nil {
		return t.stop
	}
	return func() {}
}

func start(headroom uint64) *tuner {
	if _, set := os.LookupEnv("GOGC"); set || os.Getenv("GOMEMLIMIT") != "" {
		return nil
	}
	base := debug.SetGCPercent(100)
	debug.SetGCPercent(base)
	if base <= 0 {
		return nil
	}
	t := &tuner{headroom: headroom, base: base, sample: []metrics.Sample{{Name: liveMetric}}}
	t.mu.Lock()
	t.adjust()
	t.mu.Unlock()
	arm(t)
	return t
}

func (t *tuner) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	t.percent = t.base
	debug.SetGCPercent(t.base)
}

type tuner struct {
	headroom uint64
	base     int

	mu      sync.Mutex // one adjust or stop at a time
	sample  []metrics.Sample
	stopped bool
	percent int // last set
}

// Percent is the GOGC that puts the heap goal headroom above live, at
// least base and at most MaxPercent.
func Percent(live, headroom uint64, base int) int {
	p := uint64(MaxPercent)
	if live > 0 {
		p = min(headroom*100/live, MaxPercent)
	}
	return max(int(p), base)
}

func (t *tuner) adjust() {
	metrics.Read(t.sample)
	if t.sample[0].Value.Kind() == metrics.KindUint64 {
		t.percent = Percent(t.sample[0].Value.Uint64(), t.headroom, t.base)
		debug.SetGCPercent(t.percent)
	}
}

// sentinel is garbage from the moment it is armed: its cleanup runs after
// the next collection, adjusts, and arms a new one.
type sentinel struct{ _ [32]byte }

func arm(t *tuner) {
	runtime.AddCleanup(&sentinel{}, func(t *tuner) {
		t.mu.Lock()
		stopped := t.stopped
		if !stopped {
			t.adjust()
		}
		t.mu.Unlock()
		if !stopped {
			arm(t)
		}
	}, t)
}
