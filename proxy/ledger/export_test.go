package ledger

import "testing"

// CrashCopy copies l's state directory as a kill of the process would
// leave it (records still queued are lost) and returns the copy, for the
// backend conformance suite (ledgertest) in package ledger_test.
func CrashCopy(t *testing.T, l *Ledger) string { return crashCopyQueued(t, l) }
