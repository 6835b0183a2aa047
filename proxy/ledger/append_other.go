//go:build !linux

package ledger

import "os"

// appendJournal writes b at the journal's end; Options.RawAppends is Linux
// only.
func (l *Ledger) appendJournal(b []byte) (int, error) { return l.journal.Write(b) }

// rawDatasync is datasync where RawAppends changes nothing.
func rawDatasync(f *os.File) error { return datasync(f) }
