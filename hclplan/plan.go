// Package hclplan is planlock's plan language: an HCL file that names the MCP
// tools an agent may call, with which arguments, how often and in what order.
//
// Parse turns the exact bytes of a file into a Plan and reports every problem as
// an hcl.Diagnostic with its source range. A Plan is never modified after Parse;
// callers share it freely and must not modify it. Step.Check is the constraint
// evaluator that sits on every tool call.
//
// # Public API
//
// hclplan is one of planlock's four public packages (with sign, gitapprove
// and proxy): cmd/planlock and a program embedding the gate use it to parse
// (Parse), format (Format), check (Step.Check, CheckTools against an
// upstream's tools/list) and show (Summary, JSON) plans. Its subpackage
// plandiff says what a proposed plan changes compared with an approved one.
// Canonical JSON and exact numbers come from internal/canonjson (Number is
// its type); anything else planlock needs lives under internal/.
package hclplan

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// Order is how steps may follow one another.
type Order string

// Step orders.
const (
	OrderSequential Order = "sequential"
	OrderAny        Order = "any"
)

// OnViolation is what happens to a call that breaks the plan.
type OnViolation string

// Violation policies.
const (
	ViolationBlock OnViolation = "block"
	ViolationHold  OnViolation = "hold"
)

// OnError is what happens after a failed upstream call.
type OnError string

// Error policies.
const (
	ErrorContinue OnError = "continue"
	ErrorHold     OnError = "hold"
)

// Approval says whether each call of a step needs a human.
type Approval string

// Approval modes.
const (
	ApprovalNone Approval = "none"
	ApprovalEach Approval = "each"
)

// Plan is one parsed, valid plan file.
type Plan struct {
	Name        string
	Goal        string
	Expires     time.Time // zero when the plan does not expire
	Order       Order
	OnViolation OnViolation
	Upstream    *Upstream // nil when the plan leaves it to the command line
	Steps       []*Step
	Resources   []*Resource // v2: resources the agent may read, in file order
	Prompts     []*Prompt   // v2: prompts the agent may get, in file order

	// Filename is the name the file was parsed under; Digest is
	// "sha256:<hex>" of its exact bytes.
	Filename string
	Digest   string

	DeclRange    hcl.Range
	ExpiresRange hcl.Range // where expires is set, when it is
}

// Upstream is the MCP server the plan is written for.
type Upstream struct {
	Command []string // stdio upstream: program and arguments
	URL     string   // streamable HTTP upstream
	Env     []string // environment variables passed to a stdio upstream

	DeclRange hcl.Range
}

// Step is one kind of call the plan allows.
type Step struct {
	Name     string
	Index    int // position in Plan.Steps
	Tool     string
	MaxCalls int
	OnError  OnError
	Approval Approval
	Args     []*Arg   // in file order
	Pin      *Pin     // nil when the step has no pin
	ToolPin  *ToolPin // nil when the step does not pin its tool's definition
	Checks   []*Expr  // step-level CEL checks over all arguments (v2), in file order
	// Input is what a multi-round call may ask of the client (input.go);
	// nil allows no input request.
	Input *InputRules

	DeclRange hcl.Range
	ToolRange hcl.Range

	byName map[string]*Arg
}

// Arg constrains one argument of a step. Every set constraint must hold.
type Arg struct {
	Name     string
	Optional bool
	Any      bool

	Eq        *Value  // nil when unset
	Enum      []Value // nil when unset
	Min       *Number
	Max       *Number
	MaxLength *int
	Pattern   *Pattern

	// v2: arrays and objects, and a CEL expression (see nested.go, cel.go).
	MinItems       *int
	MaxItems       *int
	Items          *Arg   // constraints on every element; Name is empty
	Fields         []*Arg // constraints on keys of an object, in file order
	AnyOtherFields bool   // keys no field block declares are accepted
	Expr           *Expr  // nil when unset; `self` is the value

	DeclRange hcl.Range
}

// Pin is a value the proxy re-reads from the upstream before every call of a
// step; a different value means the thing the plan was approved against changed.
type Pin struct {
	Tool  string
	Args  Value  // a JSON object
	Field string // dotted path into the pin call's JSON result
	Eq    Value

	DeclRange hcl.Range
}

// ToolPin approves the exact definition of a step's tool (hclplan/toolpin):
// the proxy shows the tool and forwards its calls only while the upstream's
// definition has this digest.
type ToolPin struct {
	Digest string // "sha256:<hex>" of the canonical definition
	// Description is the pinned description text, for the reviewer to read
	// in the pull request; nil when the pin gives only the digest.
	Description *string
	// Definition is the pinned definition as canonical JSON, when the pin
	// records it (checked against Digest); nil otherwise. The PR summary
	// shows its schemas and the proxy diffs a changed definition against it.
	Definition []byte

	DeclRange   hcl.Range
	DigestRange hcl.Range
}

// ToolPin returns the pin of tool's definition (the first step of the tool
// that has one), or nil when no step pins it. Steps of one tool that pin it
// agree (Parse checks it).
func (p *Plan) ToolPin(tool string) *ToolPin {
	for _, s := range p.Steps {
		if s.Tool == tool && s.ToolPin != nil {
			return s.ToolPin
		}
	}
	return nil
}

// Arg returns the step's declared argument named name, or nil.
func (s *Step) Arg(name string) *Arg { return s.byName[name] }

// Expired reports whether the plan's expiry is at or before now.
func (p *Plan) Expired(now time.Time) bool {
	return !p.Expires.IsZero() && !now.Before(p.Expires)
}

// Warnings returns the problems that do not make the plan invalid but that
// its author should know about now, such as an expiry in the past (the proxy
// refuses to load an expired plan).
func (p *Plan) Warnings(now time.Time) hcl.Diagnostics {
	var diags hcl.Diagnostics
	if p.Expired(now) {
		r := p.ExpiresRange
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagWarning,
			Summary:  "Plan expired",
			Detail:   "This plan expired at " + p.Expires.UTC().Format(time.RFC3339) + "; the proxy will not load it.",
			Subject:  &r,
		})
	}
	return diags
}

// Step returns the step named name, or nil.
func (p *Plan) Step(name string) *Step {
	for _, s := range p.Steps {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// StepsForTool returns the steps that call tool, in plan order.
func (p *Plan) StepsForTool(tool string) []*Step {
	var out []*Step
	for _, s := range p.Steps {
		if s.Tool == tool {
			out = append(out, s)
		}
	}
	return out
}

// Tools returns the distinct tool names of the plan's steps, in plan order.
func (p *Plan) Tools() []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range p.Steps {
		if !seen[s.Tool] {
			seen[s.Tool] = true
			out = append(out, s.Tool)
		}
	}
	return out
}

// Digest returns "sha256:<hex>" of src, the form Plan.Digest uses.
func Digest(src []byte) string {
	sum := sha256.Sum256(src)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// CommandIn is the upstream's command with its program resolved against
// dir, the plan file's directory, when the program is a relative path
// that names a directory (./server, bin/server): the plan then means the
// same program wherever the proxy is started (desktop clients start it in
// a directory of their own). A bare name is left to PATH, an absolute
// path as it is.
func (u *Upstream) CommandIn(dir string) []string {
	if u == nil || len(u.Command) == 0 {
		return nil
	}
	cmd := slices.Clone(u.Command)
	if p := cmd[0]; !filepath.IsAbs(p) && strings.ContainsRune(filepath.ToSlash(p), '/') && dir != "" {
		cmd[0] = filepath.Join(dir, p)
	}
	return cmd
}
