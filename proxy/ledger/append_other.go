//go:build !linux

package ledger

// appendJournal writes b at the journal's end; Options.RawAppends is Linux
// only.
func (l *Ledger) appendJournal(b []byte) (int, error) { return l.journal.Write(b) }
