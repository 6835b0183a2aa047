package ledger

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/planlock/planlock/internal/canonjson"
)

// Record types of the journal.
const (
	typeDecision   = "decision"    // decision: allow, block or hold
	typeOutcome    = "outcome"     // the upstream's answer to an allowed call (ref = its seq)
	typeHoldUpdate = "hold_update" // a hold approved, rejected or given its PR
	typePlanLoaded = "plan_loaded" // a verified plan loaded (no-downgrade high-water mark)
	typeLease      = "lease"       // calls of a step counted ahead: through = the highest call number covered
	typeCheckpoint = "checkpoint"  // the state as of the record before, by digest: binds checkpoint.json to the chain
	typeSegment    = "segment"     // the first record of a rotated journal's new file: the state as of the record before, inline
)

// Decisions of the gate.
const (
	DecisionAllow = "allow"
	DecisionBlock = "block"
	DecisionHold  = "hold"
)

// record is one journal line between the chain header (seq, prev) and the hash.
// Field order is the order on disk.
type record struct {
	Time      time.Time       `json:"time"`
	Type      string          `json:"type"`
	Decision  string          `json:"decision,omitempty"`
	Plan      string          `json:"plan,omitempty"`
	PlanName  string          `json:"plan_name,omitempty"`
	Step      string          `json:"step,omitempty"`
	StepIndex *int            `json:"step_index,omitempty"`
	Tool      string          `json:"tool,omitempty"`
	Caller    string          `json:"caller,omitempty"`
	Args      json.RawMessage `json:"args,omitempty"`
	ArgsSHA   string          `json:"args_sha256,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	Hold      string          `json:"hold,omitempty"`
	HoldState HoldState       `json:"hold_state,omitempty"`
	Expires   *time.Time      `json:"expires,omitempty"`
	PRURL     string          `json:"pr_url,omitempty"`
	PR        int             `json:"pr,omitempty"`
	Note      string          `json:"note,omitempty"`
	SignedAt  *time.Time      `json:"signed_at,omitempty"`
	Ref       uint64          `json:"ref,omitempty"`
	OK        *bool           `json:"ok,omitempty"`
	Error     string          `json:"error,omitempty"`
	LatencyMS *float64        `json:"latency_ms,omitempty"`
	HoldStep  bool            `json:"hold_step,omitempty"`
	Used      int             `json:"used,omitempty"`
	Max       int             `json:"max,omitempty"`
	Through   int             `json:"through,omitempty"`
	// Cause and ObservedPin (hold decisions) say what a new hold stands for
	// and the pin value read when it was made; SignedPath (plan loads) is
	// the signed repository path the no-downgrade mark is kept for. Records
	// written before these fields existed simply lack them.
	Cause       string `json:"cause,omitempty"`
	ObservedPin string `json:"observed_pin,omitempty"`
	SignedPath  string `json:"signed_path,omitempty"`
	// SignedTrust (plan loads) names the trust policy that verified the
	// plan (sign.Policy.Fingerprint); with SignedPath it keys the mark.
	SignedTrust string `json:"signed_trust,omitempty"`
	StateSHA    string `json:"state_sha256,omitempty"`
	// PrevSegment and State (segment records) name the file the journal
	// was rotated out to and carry the state as of the record before, so
	// the new file replays on its own.
	PrevSegment string          `json:"prev_segment,omitempty"`
	State       json.RawMessage `json:"state,omitempty"`
	// Replica (leases of a shared state, see Machine.LeaseReserve) names
	// the proxy a lease was granted to.
	Replica string `json:"replica,omitempty"`
	// ApprovalSHA (hold approvals) is the sha256 of the signed approval
	// that was verified: the evidence a start verifies again.
	ApprovalSHA string `json:"approval_sha256,omitempty"`
}

// parsed is a record as read back, with its chain fields.
type parsed struct {
	Seq  uint64 `json:"seq"`
	Prev string `json:"prev"`
	record
	MAC  string `json:"mac,omitempty"` // with a state key (statekey.go)
	Hash string `json:"hash"`
}

// genesis is the prev of the first record.
const genesis = "0000000000000000000000000000000000000000000000000000000000000000"

const hashField = `,"hash":"`

// hashSuffixLen is len(`,"hash":"` + 64 hex + `"}`).
const hashSuffixLen = len(hashField) + 64 + 2

// encodeBody marshals r without its braces: the part between the chain header
// and the hash. It writes what encoding/json would (fields in struct order,
// omitempty, HTML escaping off so arguments are recorded as sent) without
// reflection, since it runs for every call; record_test.go checks the two
// agree.
func encodeBody(r *record) ([]byte, error) {
	b, err := appendTime(make([]byte, 0, 256+len(r.Args)), "time", r.Time)
	if err != nil {
		return nil, err
	}
	b = b[1:] // the first field has no comma before it
	b = appendStringField(b, "type", r.Type, false)
	b = appendStringField(b, "decision", r.Decision, true)
	b = appendStringField(b, "plan", r.Plan, true)
	b = appendStringField(b, "plan_name", r.PlanName, true)
	b = appendStringField(b, "step", r.Step, true)
	if r.StepIndex != nil {
		b = append(b, `,"step_index":`...)
		b = strconv.AppendInt(b, int64(*r.StepIndex), 10)
	}
	b = appendStringField(b, "tool", r.Tool, true)
	b = appendStringField(b, "caller", r.Caller, true)
	if len(r.Args) > 0 {
		b = append(b, `,"args":`...)
		if b, err = appendCompact(b, r.Args); err != nil {
			return nil, fmt.Errorf("arguments are not JSON: %w", err)
		}
	}
	b = appendStringField(b, "args_sha256", r.ArgsSHA, true)
	b = appendStringField(b, "reason", r.Reason, true)
	b = appendStringField(b, "hold", r.Hold, true)
	b = appendStringField(b, "hold_state", string(r.HoldState), true)
	if r.Expires != nil {
		if b, err = appendTime(b, "expires", *r.Expires); err != nil {
			return nil, err
		}
	}
	b = appendStringField(b, "pr_url", r.PRURL, true)
	if r.PR != 0 {
		b = append(b, `,"pr":`...)
		b = strconv.AppendInt(b, int64(r.PR), 10)
	}
	b = appendStringField(b, "note", r.Note, true)
	if r.SignedAt != nil {
		if b, err = appendTime(b, "signed_at", *r.SignedAt); err != nil {
			return nil, err
		}
	}
	if r.Ref != 0 {
		b = append(b, `,"ref":`...)
		b = strconv.AppendUint(b, r.Ref, 10)
	}
	if r.OK != nil {
		b = append(b, `,"ok":`...)
		b = strconv.AppendBool(b, *r.OK)
	}
	b = appendStringField(b, "error", r.Error, true)
	if r.LatencyMS != nil {
		f := *r.LatencyMS
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, fmt.Errorf("latency_ms: unsupported value %v", f)
		}
		b = append(b, `,"latency_ms":`...)
		b = appendFloat(b, f)
	}
	if r.HoldStep {
		b = append(b, `,"hold_step":true`...)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"used", r.Used}, {"max", r.Max}, {"through", r.Through}} {
		if f.v != 0 {
			b = append(b, ',', '"')
			b = append(b, f.name...)
			b = append(b, '"', ':')
			b = strconv.AppendInt(b, int64(f.v), 10)
		}
	}
	b = appendStringField(b, "cause", r.Cause, true)
	b = appendStringField(b, "observed_pin", r.ObservedPin, true)
	b = appendStringField(b, "signed_path", r.SignedPath, true)
	b = appendStringField(b, "signed_trust", r.SignedTrust, true)
	b = appendStringField(b, "state_sha256", r.StateSHA, true)
	b = appendStringField(b, "prev_segment", r.PrevSegment, true)
	if len(r.State) > 0 {
		b = append(b, `,"state":`...)
		if b, err = appendCompact(b, r.State); err != nil {
			return nil, fmt.Errorf("state is not JSON: %w", err)
		}
	}
	b = appendStringField(b, "replica", r.Replica, true)
	b = appendStringField(b, "approval_sha256", r.ApprovalSHA, true)
	return b, nil
}

// appendTime appends ,"name":"<RFC 3339 time>", refusing the years
// encoding/json refuses.
func appendTime(b []byte, name string, t time.Time) ([]byte, error) {
	if y := t.Year(); y < 0 || y >= 10000 {
		return nil, fmt.Errorf("%s %v: year outside of range [0,9999]", name, t)
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':', '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), nil
}

// appendStringField appends ,"name":"value" (or "name":"value" for the
// first field after time); omitEmpty leaves an empty value out.
func appendStringField(b []byte, name, v string, omitEmpty bool) []byte {
	if v == "" && omitEmpty {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendString(b, v)
}

// appendString appends v as a JSON string, as encoding/json does with HTML
// escaping off. Printable ASCII is written here; anything else (control
// characters, non-ASCII, invalid UTF-8) is left to encoding/json.
func appendString(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7e {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(v) // a string always encodes
			return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
		}
	}
	b = append(b, '"')
	start := 0
	for i := 0; i < len(v); i++ {
		if c := v[i]; c == '"' || c == '\\' {
			b = append(b, v[start:i]...)
			b = append(b, '\\', c)
			start = i + 1
		}
	}
	b = append(b, v[start:]...)
	return append(b, '"')
}

// appendFloat formats f as encoding/json does (ES6 number formatting).
func appendFloat(b []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendLine appends one complete line (with newline) for body to dst and
// returns it with the line's hash.
func appendLine(dst []byte, seq uint64, prev string, body []byte) ([]byte, string) {
	return appendKeyedLine(dst, seq, prev, body, nil)
}

// appendKeyedLine is appendLine with the MAC of key (nil: none) before
// the hash, which covers it too.
func appendKeyedLine(dst []byte, seq uint64, prev string, body []byte, key *StateKey) ([]byte, string) {
	start := len(dst)
	dst = append(dst, `{"seq":`...)
	dst = strconv.AppendUint(dst, seq, 10)
	dst = append(dst, `,"prev":"`...)
	dst = append(dst, prev...)
	dst = append(dst, `",`...)
	dst = append(dst, body...)
	if key != nil {
		n := len(dst)
		dst = append(dst, macField...)
		dst = key.appendMAC(dst, dst[start:n])
		dst = append(dst, '"')
	}
	sum := sha256.Sum256(dst[start:])
	var h [64]byte
	hex.Encode(h[:], sum[:])
	dst = append(dst, hashField...)
	dst = append(dst, h[:]...)
	dst = append(dst, `"}`...)
	dst = append(dst, '\n')
	return dst, string(h[:])
}

// checkLine verifies one line (without its newline) against the chain and
// returns its hash, or the reason it is bad. The record is decoded only when
// decode is set (replay); Verify needs just the chain header. kr is the
// state key's rule (nil: no MAC is checked).
func checkLine(line []byte, wantSeq uint64, prev string, decode bool, kr *keyRule) (p *parsed, hash string, reason string) {
	if len(line) == 0 {
		return nil, "", "empty line"
	}
	n := len(line)
	if n < hashSuffixLen+2 || string(line[n-2:]) != `"}` || string(line[n-hashSuffixLen:n-hashSuffixLen+len(hashField)]) != hashField {
		if !json.Valid(line) {
			return nil, "", "not a JSON record"
		}
		return nil, "", `not a planlock audit record (no "hash" field at its end)`
	}
	body := line[:n-hashSuffixLen]
	hash = string(line[n-64-2 : n-2])
	sum := sha256.Sum256(body)
	if hex.EncodeToString(sum[:]) != hash {
		if !json.Valid(line) {
			return nil, "", "not a JSON record"
		}
		return nil, "", "record hash does not match its content: the record was edited"
	}
	seq, linkedPrev, ok := chainHeader(body)
	if !ok || !json.Valid(line) {
		return nil, "", `not a planlock audit record (it must start with "seq" and "prev")`
	}
	if seq != wantSeq {
		return nil, "", fmt.Sprintf("seq %d where %d was expected: a record was removed, inserted or reordered", seq, wantSeq)
	}
	if linkedPrev != prev {
		return nil, "", "prev does not match the hash of the record before: a record was edited, removed, inserted or reordered"
	}
	if why := kr.check(seq, body); why != "" {
		return nil, "", why
	}
	if decode {
		p = new(parsed)
		if err := json.Unmarshal(line, p); err != nil {
			return nil, "", fmt.Sprintf("not a valid record: %v", err)
		}
	}
	return p, hash, ""
}

// chainHeader reads the `{"seq":N,"prev":"<64 hex>",` that appendLine writes.
func chainHeader(body []byte) (seq uint64, prev string, ok bool) {
	const seqField, prevField = `{"seq":`, `,"prev":"`
	rest, found := bytes.CutPrefix(body, []byte(seqField))
	if !found {
		return 0, "", false
	}
	i := bytes.IndexByte(rest, ',')
	if i < 1 || (rest[0] == '0' && i > 1) {
		return 0, "", false
	}
	seq, err := strconv.ParseUint(string(rest[:i]), 10, 64)
	if err != nil {
		return 0, "", false
	}
	rest, found = bytes.CutPrefix(rest[i:], []byte(prevField))
	if !found || len(rest) < 66 || rest[64] != '"' || rest[65] != ',' {
		return 0, "", false
	}
	return seq, string(rest[:64]), true
}

// CanonicalArgs returns the canonical form of tool arguments: objects with
// sorted keys, no insignificant whitespace, numbers in one exact spelling
// (30.0 and 3e1 are 30). Absent arguments (nil, empty or null) are {}. A hold binds to
// the sha256 of this form.
func CanonicalArgs(args json.RawMessage) ([]byte, error) {
	if len(bytes.TrimSpace(args)) == 0 || string(bytes.TrimSpace(args)) == "null" {
		return []byte("{}"), nil
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: arguments are not JSON: %v", ErrInvalidArgument, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: arguments are not one JSON value", ErrInvalidArgument)
	}
	// The canonical form (package canonjson): the same bytes the gate's values
	// print as, numbers exact (30.0 and 3e1 are 30; 30.000000000000000001
	// stays itself, so an approval never covers a different number).
	out, err := canonjson.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	return out, nil
}

// ArgsDigest is the sha256 (hex) of CanonicalArgs(args).
func ArgsDigest(args json.RawMessage) (string, error) {
	c, err := CanonicalArgs(args)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}
