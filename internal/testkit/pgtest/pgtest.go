// Package pgtest runs a real PostgreSQL server for tests: initdb and pg_ctl
// in a temporary directory, a random port, the unix socket inside that
// directory, as the postgres system user when the tests run as root (the
// server refuses to run as root). No mock: tests of the shared state must
// meet the real engine's locking and failure behaviour.
//
// One cluster serves a whole test binary (Main stops it); each test gets a
// fresh database (New). Failure tests take a cluster of their own (Start)
// so that stopping it disturbs no other test.
//
// Without PostgreSQL binaries the tests skip with a loud message, unless
// PLANLOCK_REQUIRE_POSTGRES=1 (set by .ci/run), where they fail.
package pgtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// RequireEnv makes missing PostgreSQL binaries a failure instead of a skip.
const RequireEnv = "PLANLOCK_REQUIRE_POSTGRES"

// BinDir finds the newest /usr/lib/postgresql/*/bin holding initdb, or
// PLANLOCK_POSTGRES_BIN when set.
func BinDir() (string, error) {
	if d := os.Getenv("PLANLOCK_POSTGRES_BIN"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err != nil {
			return "", fmt.Errorf("PLANLOCK_POSTGRES_BIN=%s: %w", d, err)
		}
		return d, nil
	}
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(m) == 0 {
		if p, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(p), nil
		}
		return "", fmt.Errorf("no PostgreSQL server binaries (/usr/lib/postgresql/*/bin/initdb); install them with apt-get install postgresql")
	}
	sort.Slice(m, func(i, j int) bool { return pgMajor(m[i]) > pgMajor(m[j]) })
	return filepath.Dir(m[0]), nil
}

func pgMajor(initdb string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return n
}

// Cluster is one running PostgreSQL server.
type Cluster struct {
	bin, dir, data string
	port           int
	runAs          string // system user the server runs as; "" for the current one
	mu             sync.Mutex
	running        bool
	dbs            atomic.Int64
}

// skipOrFail skips the test when PostgreSQL cannot run here, or fails it
// under PLANLOCK_REQUIRE_POSTGRES=1.
func skipOrFail(t testing.TB, err error) {
	t.Helper()
	msg := "POSTGRESQL TESTS NOT RUN: " + err.Error()
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("%s (%s=1)", msg, RequireEnv)
	}
	t.Skip(msg)
}

// Start starts a cluster of the test's own, stopped and removed when the
// test ends; for tests that stop and restart the server.
func Start(t testing.TB) *Cluster {
	t.Helper()
	c, err := start()
	if err != nil {
		if c == nil {
			skipOrFail(t, err)
		}
		t.Fatal(err)
	}
	t.Cleanup(c.Remove)
	return c
}

var shared struct {
	once sync.Once
	c    *Cluster
	err  error
	fail bool // the binaries exist but the cluster did not start
}

// Main runs the tests of a package that uses New and stops the shared
// cluster afterwards: func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }.
func Main(m *testing.M) int {
	code := m.Run()
	if shared.c != nil {
		shared.c.Remove()
	}
	return code
}

// New returns the URL of a fresh, empty database on the package's shared
// cluster (started on first use).
func New(t testing.TB) string {
	t.Helper()
	c := Shared(t)
	return c.NewDatabase(t)
}

// Shared returns the package's shared cluster, starting it on first use.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	shared.once.Do(func() {
		c, err := start()
		shared.c, shared.err, shared.fail = c, err, c != nil
		if err != nil && c != nil {
			c.Remove()
			shared.c = nil
		}
	})
	if shared.err != nil {
		if !shared.fail {
			skipOrFail(t, shared.err)
		}
		t.Fatal(shared.err)
	}
	return shared.c
}

// start returns a nil cluster with the error when PostgreSQL is not
// installed (skip), else a cluster (possibly with an error: fail).
func start() (*Cluster, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "planlock-pgtest-")
	if err != nil {
		return &Cluster{}, err
	}
	c := &Cluster{bin: bin, dir: dir, data: filepath.Join(dir, "data")}
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root.
		u, err := user.Lookup("postgres")
		if err != nil {
			return c, fmt.Errorf("running as root and there is no postgres system user to run the server as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return c, err
		}
		c.runAs = "postgres"
	}
	if c.port, err = freePort(); err != nil {
		return c, err
	}
	if out, err := c.run("initdb", "-D", c.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions"); err != nil {
		return c, fmt.Errorf("initdb: %v: %s", err, out)
	}
	// Settings of a test server: small, and quick to stop.
	conf := fmt.Sprintf("\nport = %d\nlisten_addresses = ''\nunix_socket_directories = '%s'\nmax_connections = 200\nshared_buffers = 32MB\nfsync = on\nlog_min_messages = warning\n", c.port, c.dir)
	if err := c.appendConf(conf); err != nil {
		return c, err
	}
	if err := c.StartServer(); err != nil {
		return c, err
	}
	return c, nil
}

func (c *Cluster) appendConf(s string) error {
	f, err := os.OpenFile(filepath.Join(c.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(s)
	return err
}

func (c *Cluster) run(tool string, args ...string) ([]byte, error) {
	name := filepath.Join(c.bin, tool)
	var cmd *exec.Cmd
	if c.runAs != "" {
		cmd = exec.Command("runuser", append([]string{"-u", c.runAs, "--", name}, args...)...)
	} else {
		cmd = exec.Command(name, args...)
	}
	cmd.Dir = c.dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

// StartServer starts the (stopped) server and waits until it accepts connections.
func (c *Cluster) StartServer() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if out, err := c.run("pg_ctl", "-D", c.data, "-l", filepath.Join(c.dir, "server.log"), "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
		return fmt.Errorf("pg_ctl start: %v: %s\n%s", err, out, log)
	}
	c.running = true
	return nil
}

// Stop stops the server at once (mode immediate: connections are cut as
// by a crash of the machine's database).
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running {
		return nil
	}
	if out, err := c.run("pg_ctl", "-D", c.data, "-m", "immediate", "-w", "stop"); err != nil {
		return fmt.Errorf("pg_ctl stop: %v: %s", err, out)
	}
	c.running = false
	return nil
}

// Remove stops the server and deletes its directory.
func (c *Cluster) Remove() {
	if c.data != "" {
		_ = c.Stop()
	}
	if c.dir != "" {
		_ = os.RemoveAll(c.dir)
	}
}

// Port is the server's port.
func (c *Cluster) Port() int { return c.port }

// URL is the connection URL of database db (over the unix socket).
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@/%s?host=%s&port=%d&sslmode=disable", db, c.dir, c.port)
}

// NewDatabase creates an empty database and returns its URL; it is not
// dropped (the cluster is removed at the end).
func (c *Cluster) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%s", c.dbs.Add(1), sanitize(t.Name()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatalf("connect to the test server: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	return c.URL(name)
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
		if b.Len() >= 40 {
			break
		}
	}
	return b.String()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// CPUTime is the CPU time (user and system) the server's processes have
// used so far: the postmaster and its children, for a benchmark to report
// the database's share. Linux only (read from /proc).
func (c *Cluster) CPUTime() (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join(c.data, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pm, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return 0, fmt.Errorf("postmaster.pid: %w", err)
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks int64
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// Fields after the command's closing parenthesis: state ppid ... utime(12) stime(13).
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		fs := strings.Fields(string(b[i+1:]))
		if len(fs) < 13 {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		ppid, _ := strconv.Atoi(fs[1])
		if pid != pm && ppid != pm {
			continue
		}
		u, _ := strconv.ParseInt(fs[11], 10, 64)
		s, _ := strconv.ParseInt(fs[12], 10, 64)
		ticks += u + s
	}
	return time.Duration(ticks) * (time.Second / 100), nil // USER_HZ is 100 on Linux
}
