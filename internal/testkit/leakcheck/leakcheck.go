// Package leakcheck finds the processes a test binary started and left
// running. TestMain calls Start before m.Run and Check after it: Start makes
// the test process the subreaper of everything it starts (Linux), so a
// process whose parent died (an upstream behind a killed relay, a server
// behind an agent that exited) is reparented to the test process instead of
// to init and is still found; Check lists the test process's living
// descendants, ends them, and reports them as an error.
//
//	func TestMain(m *testing.M) {
//		leakcheck.Start()
//		code := m.Run()
//		if err := leakcheck.Check(leakcheck.Grace); err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			code = 1
//		}
//		os.Exit(code)
//	}
package leakcheck

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Grace is how long Check waits for descendants to exit by themselves: a
// process told to stop as a test ended may still be on its way out (the test
// upstream leaves up to a second after SIGTERM). It bounds a wait; it is not
// a timing assertion.
const Grace = 15 * time.Second

// Proc is a living descendant of the test process.
type Proc struct {
	PID, PPID int
	Cmdline   string
}

func (p Proc) String() string { return fmt.Sprintf("pid %d (parent %d): %s", p.PID, p.PPID, p.Cmdline) }

// Check waits up to grace for the test process's descendants to exit, then
// kills those still running and returns an error naming them (nil when none
// was left). Zombies are not counted: they no longer run.
func Check(grace time.Duration) error {
	deadline := time.Now().Add(grace)
	for {
		left, err := Descendants(os.Getpid())
		if err != nil {
			return fmt.Errorf("leakcheck: %w", err)
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			fmt.Fprintf(&b, "leakcheck: %d process(es) the tests started still run after the tests ended (killed now):", len(left))
			for _, p := range left {
				b.WriteString("\n\t" + p.String())
				_ = syscall.Kill(p.PID, syscall.SIGKILL)
			}
			return fmt.Errorf("%s", b.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Descendants lists the living (not zombie) descendants of pid, read from
// /proc, in pid order.
func Descendants(pid int) ([]Proc, error) {
	all := procs()
	var out []Proc
	for p, e := range all {
		if e.zombie || p == pid {
			continue
		}
		for a, seen := e.ppid, 0; a > 0 && seen < len(all); a, seen = all[a].ppid, seen+1 {
			if a == pid {
				out = append(out, Proc{PID: p, PPID: e.ppid, Cmdline: cmdline(p)})
				break
			}
			if _, ok := all[a]; !ok {
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out, nil
}

// groupMembers lists the living members of process group pgid.
func groupMembers(pgid int) []int {
	var out []int
	for p, e := range procs() {
		if e.pgid == pgid && !e.zombie {
			out = append(out, p)
		}
	}
	return out
}

type entry struct {
	ppid, pgid int
	zombie     bool
}

// procs reads every process's parent, group and state from /proc.
func procs() map[int]entry {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	all := make(map[int]entry, len(stats))
	for _, f := range stats {
		p, err := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			continue // exited meanwhile
		}
		ppid, pgid, state, ok := parseStat(string(b))
		if !ok {
			continue
		}
		all[p] = entry{ppid: ppid, pgid: pgid, zombie: state == "Z" || state == "X"}
	}
	return all
}

// parseStat reads the state, parent pid and process group from
// /proc/PID/stat: the fields after the command name, which is in
// parentheses and may hold spaces.
func parseStat(s string) (ppid, pgid int, state string, ok bool) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, "", false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 3 {
		return 0, 0, "", false
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgid, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		return 0, 0, "", false
	}
	return ppid, pgid, f[0], true
}

func cmdline(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) == 0 {
		return "?"
	}
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}
