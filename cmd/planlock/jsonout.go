package main

import (
	"encoding/json"
	"errors"
	"io"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/planlock/planlock/gitapprove"
	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/plantest"
	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/sign"
)

// The --json outputs of every command. They are contracts with the scripts
// that read them: a field is added, never renamed or removed, and each shape
// has a golden file in testdata/jsonout (jsonout_test.go). Two come from
// elsewhere: plan show --json is the plan's canonical JSON (hclplan.JSON,
// tested there), and the holds are the ledger's records (holdJSON; golden
// in testdata/script/holds.txtar).

// writeJSON writes v indented by two spaces, with a final newline, and <, >
// and & as themselves.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return failf("%v", err)
	}
	return nil
}

// writeJSONEscaped is writeJSON with <, > and & escaped (\u003c...), as
// verify and approve have always written them.
func writeJSONEscaped(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// verifyResult is one file of planlock verify --json (an array of them).
type verifyResult struct {
	File           string          `json:"file"`
	Path           string          `json:"path"`
	Verified       bool            `json:"verified"`
	Error          string          `json:"error,omitempty"`
	Kind           sign.Kind       `json:"kind,omitempty"`
	Digest         string          `json:"digest,omitempty"`
	Signer         *sign.Signer    `json:"signer,omitempty"`
	SignedAt       *time.Time      `json:"signedAt,omitempty"`
	SignedAtSource string          `json:"signedAtSource,omitempty"`
	Predicate      *sign.Predicate `json:"predicate,omitempty"`
}

// approveJSON is planlock approve --json.
type approveJSON struct {
	Plan            string           `json:"plan"`
	Digest          string           `json:"digest"`
	Branch          string           `json:"branch,omitempty"`
	Base            string           `json:"base"`
	AlreadyApproved bool             `json:"already_approved"`
	Changed         bool             `json:"changed"`
	PR              *pullRequestJSON `json:"pull_request"`
	Next            string           `json:"next,omitempty"`
}

// pullRequestJSON is a pull request in --json outputs.
type pullRequestJSON struct {
	Number int    `json:"number"`
	URL    string `json:"url"`
	State  string `json:"state"`
}

func newApproveJSON(plan *hclplan.Plan, res gitapprove.ApproveResult) approveJSON {
	out := approveJSON{Plan: plan.Name, Digest: plan.Digest, Branch: res.Branch, Base: res.Base, AlreadyApproved: res.AlreadyApproved, Changed: res.Changed, Next: res.Next}
	if res.PR != nil {
		out.PR = &pullRequestJSON{Number: res.PR.Number, URL: res.PR.URL, State: string(res.PR.State)}
	}
	return out
}

// holdJSON is one hold in planlock holds list --json (an array of them) and
// holds show --json: the ledger's record of it, whose JSON names are part of
// the audit log's format as well.
type holdJSON = ledger.Hold

// toolsJSON is planlock tools --json: the upstream's tools/list result as
// it sent it, the input of plan validate --tools.
type toolsJSON struct {
	Tools []json.RawMessage `json:"tools"`
}

// planValidateJSON is planlock plan validate --json.
type planValidateJSON struct {
	Valid        bool             `json:"valid"`
	ErrorCount   int              `json:"error_count"`
	WarningCount int              `json:"warning_count"`
	Diagnostics  []diagnosticJSON `json:"diagnostics"`
}

// diagnosticJSON is one problem in a plan or test file.
type diagnosticJSON struct {
	File      string `json:"file"`
	Line      int    `json:"line"`
	Column    int    `json:"column"`
	EndLine   int    `json:"end_line"`
	EndColumn int    `json:"end_column"`
	Severity  string `json:"severity"`
	Summary   string `json:"summary"`
	Detail    string `json:"detail"`
}

func newDiagnosticJSON(d *hcl.Diagnostic) diagnosticJSON {
	jd := diagnosticJSON{Severity: "error", Summary: d.Summary, Detail: d.Detail}
	if d.Severity == hcl.DiagWarning {
		jd.Severity = "warning"
	}
	if d.Subject != nil {
		jd.File = d.Subject.Filename
		jd.Line, jd.Column = d.Subject.Start.Line, d.Subject.Start.Column
		jd.EndLine, jd.EndColumn = d.Subject.End.Line, d.Subject.End.Column
	}
	return jd
}

func newValidateJSON(diags hcl.Diagnostics) planValidateJSON {
	out := planValidateJSON{Diagnostics: []diagnosticJSON{}}
	for _, d := range diags {
		if d.Severity == hcl.DiagWarning {
			out.WarningCount++
		} else {
			out.ErrorCount++
		}
		out.Diagnostics = append(out.Diagnostics, newDiagnosticJSON(d))
	}
	out.Valid = out.ErrorCount == 0
	return out
}

// planTestJSON is planlock plan test --json.
type planTestJSON struct {
	Pass        bool             `json:"pass"`
	Plans       []planTestReport `json:"plans"`
	Diagnostics []diagnosticJSON `json:"diagnostics"`
}

// planTestReport is the result of one plan file's tests.
type planTestReport struct {
	Plan   string                `json:"plan"`
	Tests  string                `json:"tests"`           // the test file
	Status string                `json:"status"`          // "ok", "FAIL" or "no tests"
	Error  string                `json:"error,omitempty"` // the plan or test file is invalid
	Result []plantest.TestResult `json:"results"`
}

func newPlanTestJSON(reports []planTestReport, diags hcl.Diagnostics) planTestJSON {
	out := planTestJSON{Pass: !diags.HasErrors(), Plans: reports, Diagnostics: []diagnosticJSON{}}
	if out.Plans == nil {
		out.Plans = []planTestReport{}
	}
	for _, r := range reports {
		if r.Status == "FAIL" {
			out.Pass = false
		}
	}
	for _, d := range diags {
		out.Diagnostics = append(out.Diagnostics, newDiagnosticJSON(d))
	}
	return out
}

// auditVerifyJSON is planlock audit verify --json.
type auditVerifyJSON struct {
	OK      bool `json:"ok"`
	Records int  `json:"records"` // seq of the last record
	// First is the seq of the first record checked, when not 1: a rotated
	// log's later file, or a series whose older files were archived away.
	First     uint64 `json:"first,omitempty"`
	Head      string `json:"head,omitempty"`
	File      string `json:"file,omitempty"` // over several files: the one that breaks the chain
	Line      int    `json:"line,omitempty"`
	Torn      bool   `json:"torn,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
	Reason    string `json:"reason,omitempty"`
	// Files are the files of a rotated log checked as one chain, in order.
	Files []ledger.SegmentResult `json:"files,omitempty"`
}

// newAuditVerifyJSON: ve is a broken chain, headErr a chain that no longer
// reaches a head kept elsewhere.
func newAuditVerifyJSON(res ledger.VerifyResult, ve *ledger.VerifyError, headErr error) auditVerifyJSON {
	out := auditVerifyJSON{OK: ve == nil && headErr == nil, Records: res.Records}
	if res.First > 1 {
		out.First = res.First
	}
	switch {
	case ve != nil:
		out.Line, out.Torn, out.Reason = ve.Line, ve.Torn, ve.Reason
	case headErr != nil:
		out.Head, out.Reason = res.Head, headErr.Error()
		out.Truncated = errors.Is(headErr, ledger.ErrTruncated)
	default:
		out.Head = res.Head
	}
	return out
}

// newAuditVerifySeriesJSON is newAuditVerifyJSON over several files: se
// names the file where the chain breaks.
func newAuditVerifySeriesJSON(segs []ledger.SegmentResult, res ledger.VerifyResult, se *ledger.SeriesError, headErr error) auditVerifyJSON {
	out := newAuditVerifyJSON(res, nil, headErr)
	out.Files = segs
	if se != nil {
		out.OK, out.Head = false, ""
		out.File, out.Line, out.Torn, out.Reason = se.Path, se.Line, se.Torn, se.Reason
	}
	return out
}

// auditHeadJSON is planlock audit head --json: the ledger's head, whose JSON
// names the ledger defines.
type auditHeadJSON = ledger.Head
