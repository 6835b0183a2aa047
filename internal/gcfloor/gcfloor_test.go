package gcfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mb = 1 << 20
	for _, tc := range []struct {
		live, headroom uint64
		base, want     int
	}{
		{live: 4 * mb, headroom: 16 * mb, base: 100, want: 400},
		{live: 16 * mb, headroom: 16 * mb, base: 100, want: 100},
		{live: 200 * mb, headroom: 16 * mb, base: 100, want: 100}, // a large heap keeps GOGC
		{live: 8 * mb, headroom: 16 * mb, base: 300, want: 300},   // never below the base
		{live: mb / 2, headroom: 16 * mb, base: 100, want: MaxPercent},
		{live: 0, headroom: 16 * mb, base: 100, want: MaxPercent},
	} {
		if got := Percent(tc.live, tc.headroom, tc.base); got != tc.want {
			t.Errorf("Percent(%d, %d, %d) = %d, want %d", tc.live, tc.headroom, tc.base, got, tc.want)
		}
	}
}

// percentAfterGC collects and waits (bounded) until what the tuner set
// last satisfies ok; it returns that.
func percentAfterGC(tu *tuner, ok func(int) bool) int {
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		time.Sleep(5 * time.Millisecond) // the cleanup runs after the collection
		tu.mu.Lock()
		got := tu.percent
		tu.mu.Unlock()
		if ok(got) || time.Now().After(deadline) {
			return got
		}
	}
}

func unsetenv(t *testing.T, k string) {
	t.Setenv(k, "") // restored when the test ends
	os.Unsetenv(k)
}

// TestStartFollowsTheLiveHeap: GOGC is raised while the live heap is small,
// back to the base once the live heap outgrows the headroom, and restored
// by stop.
func TestStartFollowsTheLiveHeap(t *testing.T) {
	unsetenv(t, "GOGC")
	unsetenv(t, "GOMEMLIMIT")
	base := debug.SetGCPercent(100)
	defer debug.SetGCPercent(base)
	const headroom = 8 << 20
	tu := start(headroom)
	if tu == nil {
		t.Fatal("start did nothing")
	}
	defer tu.stop()
	if got := percentAfterGC(tu, func(p int) bool { return p > 100 }); got <= 100 {
		t.Errorf("with a small live heap GOGC is %d, want it raised", got)
	}
	ballast := make([]byte, 4*headroom)
	if got := percentAfterGC(tu, func(p int) bool { return p == 100 }); got != 100 {
		t.Errorf("with a live heap of 4×headroom GOGC is %d, want 100", got)
	}
	runtime.KeepAlive(ballast)
	tu.stop()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("after stop GOGC is %d, want 100", got)
	}
	runtime.GC() // a cleanup after stop changes nothing
	time.Sleep(10 * time.Millisecond)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("after stop and a collection GOGC is %d, want 100", got)
	}
}

// TestStartLeavesTheOperatorsSetting: with GOGC or GOMEMLIMIT in the
// environment Start does nothing.
func TestStartLeavesTheOperatorsSetting(t *testing.T) {
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Run(env, func(t *testing.T) {
			unsetenv(t, "GOGC")
			unsetenv(t, "GOMEMLIMIT")
			t.Setenv(env, map[string]string{"GOGC": "100", "GOMEMLIMIT": "1GiB"}[env])
			if tu := start(8 << 20); tu != nil {
				tu.stop()
				t.Fatalf("%s set: start tuned anyway", env)
			}
		})
	}
}
