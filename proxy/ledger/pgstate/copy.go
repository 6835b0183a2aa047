package pgstate

import (
	"bytes"
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/planlock/planlock/proxy/ledger"
)

// Import appends a whole journal (the bytes of a journal file, verified
// here) to a database that has no records yet, line for line, and sets the
// head to its end: the chain, its hashes and so every count, hold and mark
// stay exactly what they were. It returns the derived state's digest
// (ledger.Machine.StateDigest) as read back from the database.
func Import(ctx context.Context, url string, journal []byte) (ledger.Head, string, error) {
	res, err := ledger.Verify(bytes.NewReader(journal))
	if err != nil {
		return ledger.Head{}, "", fmt.Errorf("the journal to copy: %w", err)
	}
	conn, err := connect(ctx, url)
	if err != nil {
		return ledger.Head{}, "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	where := Describe(url)
	if err := checkSchema(ctx, conn, where); err != nil {
		return ledger.Head{}, "", err
	}
	var rows [][]any
	err = ledger.JournalLines(journal, func(line []byte) error {
		rows = append(rows, []any{int64(len(rows) + 1), string(line)})
		return nil
	})
	if err != nil {
		return ledger.Head{}, "", err
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var seq int64
		if err := tx.QueryRow(ctx, "SELECT seq FROM planlock_head FOR UPDATE").Scan(&seq); err != nil {
			return err
		}
		if seq != 0 {
			return fmt.Errorf("%s already holds %d audit records; copy into a database that has none", where, seq)
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"planlock_audit"}, []string{"seq", "line"}, pgx.CopyFromRows(rows)); err != nil {
			return fmt.Errorf("append: %w", err)
		}
		_, err := tx.Exec(ctx, "UPDATE planlock_head SET seq = $1, hash = $2", int64(res.Records), res.Head)
		return err
	})
	if err != nil {
		return ledger.Head{}, "", fmt.Errorf("copy into %s: %w", where, err)
	}
	return Digest(ctx, url)
}

// Digest replays the database's journal and returns its head and the
// derived state's digest.
func Digest(ctx context.Context, url string) (ledger.Head, string, error) {
	data, head, err := Journal(ctx, url)
	if err != nil {
		return head, "", err
	}
	m := ledger.NewMachine(false)
	if err := ledger.JournalLines(data, m.Apply); err != nil {
		return head, "", err
	}
	if m.Head() != head {
		return head, "", fmt.Errorf("%w: the journal ends at %s, its head row says %s", ledger.ErrAnchor, m.Head(), head)
	}
	d, err := m.StateDigest()
	return head, d, err
}
