package proxy

import (
	"errors"
	"fmt"
	"io"
	"regexp"

	"github.com/planlock/planlock/internal/oneline"
	"github.com/planlock/planlock/proxy/ledger"
)

// What of a state's error reaches a client. The state's own errors name
// its files (the state directory, the audit log) for the operator; a
// client, the agent among them, reads the cause only: a disk fault's
// public text (ledger.FaultError), else the error with every absolute
// path cut out.

// absPath is an absolute path in an error: a "/" at a word's start
// ("input/output" is not one), up to a space or quote.
var absPath = regexp.MustCompile(`(^|[\s"'(=:,\[])(/[^\s"'),\]]*)`)

// stateError is the text of a state's error for a client.
func stateError(err error) string {
	var pub interface{ Public() string }
	if errors.As(err, &pub) {
		return pub.Public()
	}
	if errors.Is(err, ledger.ErrClosed) {
		return "the proxy is shutting down"
	}
	return redactPaths(err.Error())
}

// redactPaths is one line of an error for a client, without the absolute
// paths in it (an upstream's command, a socket, a state file).
func redactPaths(s string) string {
	return oneline.Of(absPath.ReplaceAllString(s, "$1<local path>"), 300)
}

// logStateError writes a state's error of a record the client does not
// wait for (an outcome, a block, a hold) to the operator's log; a disk
// fault is left out: the state reports it once per change (OnFault), not
// once per call.
func logStateError(w io.Writer, err error) {
	if err == nil || errors.Is(err, ledger.ErrUnavailable) {
		return
	}
	fmt.Fprintf(w, "planlock proxy: audit: %v\n", err)
}

// upstreamDown is the answer to a call while no upstream is up, its cause
// first: an upstream that exited says how and its last stderr line, paths
// redacted (the agent reads it).
func upstreamDown(why error, what string) string {
	if ee := (*ExitError)(nil); errors.As(why, &ee) {
		return redactPaths(ee.Error() + ": " + what)
	}
	return "upstream unavailable, " + what + ": " + redactPaths(fmt.Sprint(why))
}
