package pgtest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/planlock/planlock/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func query(t *testing.T, url string) (int, error) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, "SELECT 41 + 1").Scan(&n)
	return n, err
}

func TestFreshDatabases(t *testing.T) {
	a, b := pgtest.New(t), pgtest.New(t)
	if a == b {
		t.Fatalf("two tests share database %s", a)
	}
	for _, u := range []string{a, b} {
		if n, err := query(t, u); err != nil || n != 42 {
			t.Fatalf("query %s: %d, %v", u, n, err)
		}
	}
}

func TestStopAndRestart(t *testing.T) {
	c := pgtest.Start(t)
	u := c.NewDatabase(t)
	if _, err := query(t, u); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := query(t, u); err == nil {
		t.Fatal("query succeeded with the server stopped")
	}
	if err := c.StartServer(); err != nil {
		t.Fatal(err)
	}
	if n, err := query(t, u); err != nil || n != 42 {
		t.Fatalf("after restart: %d, %v", n, err)
	}
}

// Without PostgreSQL binaries a test skips, loudly, unless
// PLANLOCK_REQUIRE_POSTGRES=1 makes it fail.
func TestMissingBinaries(t *testing.T) {
	if os.Getenv("PGTEST_CHILD") == "1" {
		pgtest.Start(t)
		return
	}
	for _, require := range []string{"", "1"} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestMissingBinaries$", "-test.v")
		cmd.Env = append(os.Environ(), "PGTEST_CHILD=1", "PLANLOCK_POSTGRES_BIN="+t.TempDir(), pgtest.RequireEnv+"="+require)
		out, err := cmd.CombinedOutput()
		switch {
		case !strings.Contains(string(out), "POSTGRESQL TESTS NOT RUN"):
			t.Errorf("%s=%q: no loud message:\n%s", pgtest.RequireEnv, require, out)
		case require == "" && (err != nil || !strings.Contains(string(out), "--- SKIP")):
			t.Errorf("without %s: not a skip: %v\n%s", pgtest.RequireEnv, err, out)
		case require == "1" && (err == nil || !strings.Contains(string(out), "--- FAIL")):
			t.Errorf("with %s=1: not a failure: %v\n%s", pgtest.RequireEnv, err, out)
		}
	}
}
