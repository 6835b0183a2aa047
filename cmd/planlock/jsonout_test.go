package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/planlock/planlock/gitapprove"
	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/plantest"
	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/sign"
)

var updateJSON = flag.Bool("update-json", false, "rewrite testdata/jsonout/*.json")

// Each --json output shape, written as the command writes it, against a
// golden file: renaming, dropping or re-typing a field (or losing an
// omitempty) fails here before it breaks a script that reads it. Field
// values are fixed so that the files read as documentation of the shapes.
func TestJSONOutputShapes(t *testing.T) {
	at := time.Date(2026, 11, 30, 9, 15, 0, 0, time.UTC)
	plan := &hclplan.Plan{Name: "refund", Digest: "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}
	subject := &hcl.Range{Filename: "plans/refund.hcl", Start: hcl.Pos{Line: 3, Column: 5}, End: hcl.Pos{Line: 3, Column: 12}}
	diags := hcl.Diagnostics{
		{Severity: hcl.DiagError, Summary: "Unsupported argument", Detail: `An argument named "max_cals" is not expected here. Did you mean "max_calls"?`, Subject: subject},
		{Severity: hcl.DiagWarning, Summary: "Plan has no tests", Detail: "Write test blocks in plans/refund_test.hcl <beside it>.", Subject: subject},
	}
	report := planTestReport{Plan: "plans/refund.hcl", Tests: "plans/refund_test.hcl", Status: "FAIL", Result: []plantest.TestResult{
		{Name: "refund within bounds", Pass: true, Calls: []plantest.CallResult{{Index: 1, Tool: "get_order", Expect: "allow", Got: "allow", Step: "lookup", Pos: "plans/refund_test.hcl:3:3"}}},
		{Name: "refund too large", Pass: false, Calls: []plantest.CallResult{{Index: 1, Tool: "refund_customer", Expect: "block", Got: "allow", Step: "refund", Problem: "want block, got allow", Pos: "plans/refund_test.hcl:12:3"}}},
	}}
	for _, tc := range []struct {
		name    string
		v       any
		escaped bool // written by writeJSONEscaped
	}{
		{"verify", []verifyResult{
			{File: "plans/refund.hcl", Path: "plans/refund.hcl", Verified: true, Kind: sign.KindPlan, Digest: plan.Digest,
				Signer:   &sign.Signer{Identity: "https://github.com/acme/plans/.github/workflows/planlock.yml@refs/heads/main", Issuer: "https://token.actions.githubusercontent.com"},
				SignedAt: &at, SignedAtSource: "tlog",
				Predicate: &sign.Predicate{Kind: sign.KindPlan, Path: "plans/refund.hcl", Repository: "acme/plans", Ref: "refs/heads/main", Commit: "0123456789abcdef0123456789abcdef01234567", PullRequest: 42, Approvers: []string{"alice"}, SignedAt: at}},
			{File: "plans/other.hcl", Path: "plans/other.hcl", Error: "plans/other.hcl: no bundle plans/other.hcl.sigstore.json"},
		}, true},
		{"approve", newApproveJSON(plan, gitapprove.ApproveResult{Proposed: gitapprove.Proposed{Branch: "planlock/approve/refund", Base: "main", Changed: true,
			PR: &gitapprove.PR{Number: 42, URL: "https://github.com/acme/plans/pull/42", State: gitapprove.PROpen}}}), true},
		{"approve_git_only", newApproveJSON(plan, gitapprove.ApproveResult{Proposed: gitapprove.Proposed{Branch: "planlock/approve/refund", Base: "main", Changed: true,
			Next: "open a pull request from planlock/approve/refund into main"}}), true},
		{"tools", toolsJSON{Tools: []json.RawMessage{[]byte(`{"name":"get_order","inputSchema":{"type":"object"}}`)}}, true},
		{"plan_validate", newValidateJSON(diags), false},
		{"plan_validate_valid", newValidateJSON(nil), false},
		{"plan_test", newPlanTestJSON([]planTestReport{report}, nil), false},
		{"audit_verify", newAuditVerifyJSON(ledger.VerifyResult{Records: 7, Head: "ab" + fmt.Sprintf("%062d", 0)}, nil, nil), true},
		{"audit_verify_broken", newAuditVerifyJSON(ledger.VerifyResult{Records: 3}, &ledger.VerifyError{Line: 4, Torn: true, Reason: "torn last line"}, nil), true},
		{"audit_verify_truncated", newAuditVerifyJSON(ledger.VerifyResult{Records: 3, Head: "cd" + fmt.Sprintf("%062d", 0)}, nil, fmt.Errorf("record 9 is past the log's end: %w", ledger.ErrTruncated)), true},
		{"audit_verify_series", newAuditVerifySeriesJSON([]ledger.SegmentResult{
			{Path: "state/audit.000000000001-000000040000.jsonl", First: 1, Records: 40000, Head: "ab" + fmt.Sprintf("%062d", 0)},
			{Path: "state/audit.jsonl", First: 40001, Records: 40007, Head: "cd" + fmt.Sprintf("%062d", 0)},
		}, ledger.VerifyResult{Records: 40007, Head: "cd" + fmt.Sprintf("%062d", 0), First: 1}, nil, nil), true},
		{"audit_verify_series_broken", newAuditVerifySeriesJSON([]ledger.SegmentResult{
			{Path: "state/audit.000000000001-000000040000.jsonl", First: 1, Records: 40000, Head: "ab" + fmt.Sprintf("%062d", 0)},
		}, ledger.VerifyResult{Records: 40000, Head: "ab" + fmt.Sprintf("%062d", 0), First: 1},
			&ledger.SeriesError{Path: "state/audit.jsonl", Index: 1, Reason: "starts at seq 80001, but state/audit.000000000001-000000040000.jsonl ends at seq 40000: records 40001 to 80000 are missing (a segment was removed, or the file before was truncated)"}, nil), true},
		{"audit_head", auditHeadJSON{Seq: 7, Hash: "ab" + fmt.Sprintf("%062d", 0)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			write := writeJSON
			if tc.escaped {
				write = writeJSONEscaped
			}
			if err := write(&b, tc.v); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "jsonout", tc.name+".json")
			if *updateJSON {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -run TestJSONOutputShapes -update-json to write it)", err)
			}
			if !bytes.Equal(b.Bytes(), want) {
				t.Errorf("--json output of %s changed; it is a contract (add fields, never rename or drop them):\ngot:\n%s\nwant:\n%s", tc.name, b.Bytes(), want)
			}
		})
	}
}

// writeJSON leaves <, > and & as they are; writeJSONEscaped escapes them,
// as verify, approve, tools and audit verify always have.
func TestJSONWriters(t *testing.T) {
	var a, b bytes.Buffer
	if err := writeJSON(&a, map[string]string{"k": "<a&b>"}); err != nil {
		t.Fatal(err)
	}
	if err := writeJSONEscaped(&b, map[string]string{"k": "<a&b>"}); err != nil {
		t.Fatal(err)
	}
	if a.String() != "{\n  \"k\": \"<a&b>\"\n}\n" || b.String() != "{\n  \"k\": \"\\u003ca\\u0026b\\u003e\"\n}\n" {
		t.Fatalf("writeJSON = %q, writeJSONEscaped = %q", a.String(), b.String())
	}
	if err := writeJSON(&a, func() {}); err == nil || !errors.As(err, new(*exitError)) {
		t.Fatalf("writeJSON of a func: err = %v, want a failure", err)
	}
}
