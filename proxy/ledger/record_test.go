package ledger

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"
)

// encodeBodyReflect is what encodeBody must write: encoding/json's encoding
// of the record (HTML escaping off), without its braces.
func encodeBodyReflect(r *record) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return nil, err
	}
	b := bytes.TrimRight(buf.Bytes(), "\n")
	return b[1 : len(b)-1], nil
}

func checkSameEncoding(t *testing.T, r *record) {
	t.Helper()
	got, gerr := encodeBody(r)
	want, werr := encodeBodyReflect(r)
	if (gerr != nil) != (werr != nil) {
		t.Fatalf("encodeBody error %v, encoding/json error %v, for %+v", gerr, werr, r)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encodeBody differs from encoding/json:\n got %s\nwant %s", got, want)
	}
}

func TestEncodeBodyMatchesEncodingJSON(t *testing.T) {
	idx, zero := 3, 0
	yes, no := true, false
	lat, tiny, huge, neg := 12.345, 1e-7, 1e21, -0.5
	exp := time.Date(2099, 1, 2, 3, 4, 5, 600, time.UTC)
	signed := time.Date(2026, 11, 30, 6, 0, 0, 0, time.FixedZone("x", -3*3600))
	now := time.Date(2026, 11, 30, 6, 25, 56, 123456789, time.UTC)
	tests := []record{
		{Time: now, Type: typeDecision, Decision: DecisionAllow, Plan: "sha256:abc", Step: "refund", StepIndex: &idx,
			Tool: "refund_customer", Args: json.RawMessage(`{ "amount" : 30.0, "note": "<b>&</b>", "u": "\u00e9\u2028" }`), Used: 1, Max: 3},
		{Time: now, Type: typeDecision, Decision: DecisionAllow, Tool: "echo", Caller: "jwt:alice@example.com \"<é>\""},
		{Time: now, Type: typeDecision, Decision: DecisionBlock, StepIndex: &zero, Reason: `step "refund": arg "amount" = 31 is over max 30 \ back`},
		{Time: now, Type: typeDecision, Decision: DecisionHold, Hold: "h1", HoldState: HoldPending, Expires: &exp, ArgsSHA: "ab12"},
		{Time: now, Type: typeDecision, Decision: DecisionHold, Hold: "h2", HoldState: HoldPending, Cause: "approval,pin", ObservedPin: "9f8\"é"},
		{Time: now, Type: typePlanLoaded, PlanName: "p", SignedAt: &signed, SignedPath: "acme/plans:plans/p.hcl"},
		{Time: now, Type: typeOutcome, Ref: 18446744073709551615, OK: &no, Error: "upstream error -32000: boom\twith tab\nand newline", LatencyMS: &lat, HoldStep: true},
		{Time: now, Type: typeOutcome, Ref: 1, OK: &yes, LatencyMS: &tiny},
		{Time: now, Type: typeOutcome, LatencyMS: &huge},
		{Time: now, Type: typeOutcome, LatencyMS: &neg},
		{Time: now, Type: typePlanLoaded, PlanName: "refund-4711", SignedAt: &signed, Note: "ünïcödé, \x01 control, \xff invalid, <html> & \u2029"},
		{Time: now, Type: typeLease, Through: 256, Max: -5, Used: 0},
		{Time: now, Type: typeCheckpoint, StateSHA: "0f13b09a719284bb02b27395b4c84c88d86ee451e3d2ed4ce7facc19e6587ae4"},
		{Time: now, Type: typeSegment, StateSHA: "0f13", PrevSegment: "audit.000000000001-000000000002.jsonl", State: json.RawMessage(`{ "plans": {"sha256:1": {"used": [1, 2]}}, "holds": null }`)},
		{Time: now, Type: typeSegment, State: json.RawMessage(`{"a":`)}, // invalid state: both refuse
		{Time: now.In(time.FixedZone("y", 5*3600+1800)), Type: typeHoldUpdate, PRURL: "https://github.com/acme/plans/pull/12?a=1&b=<2>"},
		{Time: time.Time{}, Type: ""},
		{Time: now, Type: typeDecision, Args: json.RawMessage(`{"a":`)},                             // invalid args: both refuse
		{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), Type: typeDecision},                    // year out of range: both refuse
		{Time: now, Type: typeOutcome, LatencyMS: func() *float64 { f := math.NaN(); return &f }()}, // NaN: both refuse
	}
	for i := range tests {
		checkSameEncoding(t, &tests[i])
	}
}

// FuzzEncodeBody: for any strings, numbers and times, encodeBody writes the
// bytes encoding/json writes.
func FuzzEncodeBody(f *testing.F) {
	f.Add("refund", `step "a" \ b`, "é\u2028<&>", []byte(`{"a":1}`), int64(1764483956), 12.5, 3, uint64(7))
	f.Add("\x00\x1f\x7f", "\xff\xfe", "", []byte(` [1, 2 ] `), int64(-1), 1e-9, -1, uint64(0))
	f.Fuzz(func(t *testing.T, s1, s2, s3 string, args []byte, sec int64, lat float64, n int, ref uint64) {
		at := time.Unix(sec, int64(n)).UTC()
		r := record{Time: at, Type: s1, Decision: s2, Plan: s3, Step: s1 + s2, StepIndex: &n, Tool: s3,
			Reason: s2, Hold: s1, HoldState: HoldState(s3), Expires: &at, PRURL: s2, Note: s3, SignedAt: &at,
			Ref: ref, Error: s1, LatencyMS: &lat, HoldStep: n%2 == 0, Used: n, Max: -n, Through: n * 2, StateSHA: s2}
		if len(args) > 0 {
			r.Args = json.RawMessage(args)
		}
		checkSameEncoding(t, &r)
	})
}

// BenchmarkEncodeBody is one allow record, written directly and by
// encoding/json's reflection.
func BenchmarkEncodeBody(b *testing.B) {
	idx := 1
	r := record{Time: time.Now().UTC(), Type: typeDecision, Decision: DecisionAllow, Plan: digest, Step: benchCall.Step,
		StepIndex: &idx, Tool: benchCall.Tool, Args: benchCall.Args, Max: 3}
	for _, enc := range []struct {
		name string
		fn   func(*record) ([]byte, error)
	}{{"direct", encodeBody}, {"encoding-json", encodeBodyReflect}} {
		b.Run(enc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := enc.fn(&r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A journal written before hold records carried the pull request number
// has it only in the URL; replay reads it from there.
func TestPRNumberFromLegacyURL(t *testing.T) {
	for url, want := range map[string]int{
		"https://github.com/acme/plans/pull/42":         42,
		"https://ghe.example/api/acme/plans/pull/7":     7,
		"pushed branch planlock/hold/x/y to origin; ..": 0,
		"https://github.com/acme/plans/pull/":           0,
		"":                                              0,
	} {
		if got := prNumber(0, url); got != want {
			t.Errorf("prNumber(0, %q) = %d, want %d", url, got, want)
		}
	}
	if got := prNumber(9, "https://github.com/acme/plans/pull/42"); got != 9 {
		t.Errorf("a recorded number is kept: got %d", got)
	}
}
