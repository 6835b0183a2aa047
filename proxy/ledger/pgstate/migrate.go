package pgstate

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

func migrations() ([]migration, error) {
	ents, err := migrationFiles.ReadDir("migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range ents {
		v, err := strconv.Atoi(strings.SplitN(e.Name(), "_", 2)[0])
		if err != nil {
			return nil, fmt.Errorf("migration %s: no version number", e.Name())
		}
		b, err := migrationFiles.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: version %d where %d was expected", m.name, m.version, i+1)
		}
	}
	return out, nil
}

// SchemaVersion is the newest schema this planlock knows.
func SchemaVersion() int {
	ms, _ := migrations()
	return len(ms)
}

// Errors of the schema check.
var (
	// ErrNotMigrated: the database has no planlock schema, or an older one.
	ErrNotMigrated = errors.New("database schema not migrated")
	// ErrSchemaNewer: a newer planlock migrated the database.
	ErrSchemaNewer = errors.New("database schema newer than this planlock")
)

const versionTable = "planlock_schema"

// schemaVersion reads the database's schema version (0 when none).
func schemaVersion(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (int, error) {
	var exists bool
	if err := q.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", versionTable).Scan(&exists); err != nil {
		return 0, fmt.Errorf("read the schema version: %w", err)
	}
	if !exists {
		return 0, nil
	}
	var v int
	if err := q.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+versionTable).Scan(&v); err != nil {
		return 0, fmt.Errorf("read the schema version: %w", err)
	}
	return v, nil
}

// checkSchema refuses a database this planlock cannot use, with the one
// thing to do about it.
func checkSchema(ctx context.Context, conn *pgx.Conn, where string) error {
	v, err := schemaVersion(ctx, conn)
	if err != nil {
		return err
	}
	known := SchemaVersion()
	switch {
	case v == 0:
		return fmt.Errorf("%w: %s has no planlock schema; run planlock state migrate --state URL once", ErrNotMigrated, where)
	case v < known:
		return fmt.Errorf("%w: %s has planlock schema version %d, this planlock needs %d; run planlock state migrate --state URL", ErrNotMigrated, where, v, known)
	case v > known:
		return fmt.Errorf("%w: %s has planlock schema version %d, this planlock knows up to %d; upgrade planlock", ErrSchemaNewer, where, v, known)
	}
	return nil
}

// Migrate brings the database's schema to SchemaVersion, one transaction per
// migration, under an advisory lock so that concurrent runs take turns. It
// returns the version before and after; a newer schema is refused.
func Migrate(ctx context.Context, url string) (from, to int, err error) {
	ms, err := migrations()
	if err != nil {
		return 0, 0, err
	}
	conn, err := connect(ctx, url)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// Any constant: planlock's migration lock.
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(7162534)"); err != nil {
		return 0, 0, fmt.Errorf("take the migration lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(7162534)")
	if _, err := conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+versionTable+" (version int PRIMARY KEY, applied timestamptz NOT NULL DEFAULT now())"); err != nil {
		return 0, 0, fmt.Errorf("create %s: %w", versionTable, err)
	}
	from, err = schemaVersion(ctx, conn)
	if err != nil {
		return 0, 0, err
	}
	if from > len(ms) {
		return from, from, fmt.Errorf("%w: schema version %d, this planlock knows up to %d; upgrade planlock", ErrSchemaNewer, from, len(ms))
	}
	for _, m := range ms[from:] {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO "+versionTable+" (version) VALUES ($1)", m.version)
			return err
		})
		if err != nil {
			return from, m.version - 1, fmt.Errorf("migration %s: %w", m.name, err)
		}
	}
	return from, len(ms), nil
}
