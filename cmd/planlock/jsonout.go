package main

import (
	"encoding/json"
	"io"
	"time"

	"github.com/planlock/planlock/gitapprove"
	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/sign"
)

// The --json outputs of every command. They are contracts with the scripts
// that read them: a field is added, never renamed or removed, and each shape
// has a golden test (jsonout_test.go).

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
