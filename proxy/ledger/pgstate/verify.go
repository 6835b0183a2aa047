package pgstate

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"

	"github.com/planlock/planlock/proxy/ledger"
)

// Journal reads the whole journal as the file would hold it (one line per
// record, in seq order) and the head row, in one snapshot.
func Journal(ctx context.Context, url string) ([]byte, ledger.Head, error) {
	conn, err := connect(ctx, url)
	if err != nil {
		return nil, ledger.Head{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	where := Describe(url)
	if err := checkSchema(ctx, conn, where); err != nil {
		return nil, ledger.Head{}, err
	}
	var buf bytes.Buffer
	var head ledger.Head
	err = pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, "SELECT seq, hash FROM planlock_head").Scan(&head.Seq, &head.Hash); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "SELECT line FROM planlock_audit ORDER BY seq")
		if err != nil {
			return err
		}
		var line string
		_, err = pgx.ForEachRow(rows, []any{&line}, func() error {
			buf.WriteString(line)
			buf.WriteByte('\n')
			return nil
		})
		return err
	})
	if err != nil {
		return nil, ledger.Head{}, fmt.Errorf("%w: read the journal from %s: %v", ErrUnavailable, where, redactURL(err.Error(), url))
	}
	return buf.Bytes(), head, nil
}

// Verify checks the database's chain (every record's hash, seq and link,
// with ledger.Verify, the same check as for a journal file) and that it
// ends at the head row: a table cut at its end, or rewritten after it, is
// refused (ledger.ErrTruncated, ledger.ErrAnchor).
func Verify(ctx context.Context, url string) (ledger.VerifyResult, ledger.Head, error) {
	return VerifyWith(ctx, url, nil)
}

// VerifyWith is Verify that also checks every record's state MAC under
// key (ledger.VerifyWith; nil: as Verify).
func VerifyWith(ctx context.Context, url string, key *ledger.StateKey) (ledger.VerifyResult, ledger.Head, error) {
	data, head, err := Journal(ctx, url)
	if err != nil {
		return ledger.VerifyResult{}, head, err
	}
	return verifyJournal(data, head, key)
}

func verifyJournal(data []byte, head ledger.Head, key *ledger.StateKey) (ledger.VerifyResult, ledger.Head, error) {
	res, err := ledger.VerifyWith(bytes.NewReader(data), key)
	if err != nil {
		return res, head, err
	}
	if err := ledger.VerifyHead(bytes.NewReader(data), res, head); err != nil {
		return res, head, fmt.Errorf("against the head row planlock_head: %w", err)
	}
	if uint64(res.Records) != head.Seq {
		return res, head, fmt.Errorf("%w: planlock_audit has %d records but its head row says %d: records were added outside planlock", ledger.ErrAnchor, res.Records, head.Seq)
	}
	return res, head, nil
}

// Export verifies the database's chain as Verify does and writes its
// records with seq >= fromSeq to w as ledger.ExportRecord lines (schema
// planlock.audit.v1), the same lines audit export writes for a journal
// file. Nothing is written when the chain does not verify.
func Export(ctx context.Context, w io.Writer, url string, fromSeq uint64) (ledger.ExportResult, error) {
	data, head, err := Journal(ctx, url)
	if err != nil {
		return ledger.ExportResult{}, err
	}
	if _, _, err := verifyJournal(data, head, nil); err != nil {
		return ledger.ExportResult{}, err
	}
	return ledger.ExportJournal(w, data, fromSeq)
}
