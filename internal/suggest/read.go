// Package suggest learns the tightest v1 plan that would have allowed the
// calls an audit log records (observe mode's would_* records and enforced
// allows), with tests generated from those calls. It never guesses a
// pattern and never widens past what was seen: every bound is an observed
// extreme, every enum the observed values.
package suggest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/planlock/planlock/proxy/ledger"
)

// Call is one observed tools/call.
type Call struct {
	Line int    // 1-based line of the audit log
	Run  string // the plan digest it ran under: counts are per digest
	Tool string
	Args map[string]any // numbers as json.Number
}

// maxLine bounds one audit record read.
const maxLine = 64 << 20

// ReadAudit verifies an audit log's hash chain and returns the calls that
// were forwarded: observe records (any would-be decision) and allow
// decisions. A redacted record (arguments only as a digest) is an error:
// nothing can be learned from it without widening.
func ReadAudit(src []byte) ([]Call, error) {
	if _, err := ledger.Verify(bytes.NewReader(src)); err != nil {
		return nil, fmt.Errorf("the audit log does not verify: %w", err)
	}
	var out []Call
	br := bufio.NewReaderSize(bytes.NewReader(src), 1<<16)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) && len(line) == 0 {
			break
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if len(line) > maxLine {
			return nil, fmt.Errorf("line %d: a record longer than %d bytes", n, maxLine)
		}
		var r struct {
			Type     string          `json:"type"`
			Decision string          `json:"decision"`
			Plan     string          `json:"plan"`
			Tool     string          `json:"tool"`
			Args     json.RawMessage `json:"args"`
			ArgsSHA  string          `json:"args_sha256"`
		}
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		forwarded := r.Type == "observe" || (r.Type == "decision" && r.Decision == ledger.DecisionAllow)
		if !forwarded {
			continue
		}
		if len(r.Args) == 0 {
			if r.ArgsSHA != "" {
				return nil, fmt.Errorf("line %d: the arguments were redacted (--audit-redact): observe without it to learn a plan", n)
			}
			r.Args = json.RawMessage("{}")
		}
		d := json.NewDecoder(bytes.NewReader(r.Args))
		d.UseNumber()
		var args map[string]any
		if err := d.Decode(&args); err != nil || args == nil {
			return nil, fmt.Errorf("line %d: the arguments are not a JSON object", n)
		}
		out = append(out, Call{Line: n, Run: r.Plan, Tool: r.Tool, Args: args})
	}
	if len(out) == 0 {
		return nil, errors.New("the audit log records no forwarded call to learn from")
	}
	return out, nil
}
