package gitapprove

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

// HoldRequest is one call waiting for a human: the file a hold pull request
// adds, and what the signed approval binds to.
type HoldRequest struct {
	ID         string
	PlanName   string
	PlanDigest string // "sha256:<hex>" of the approved plan file
	Step       string
	Tool       string
	// Args are the call's canonical JSON arguments (an object), byte for byte.
	Args        json.RawMessage
	Reason      string
	ObservedPin string // the pin value read from the upstream, for pin holds
	RequestedBy string // the authenticated caller whose call was held ("" when unknown)
	Created     time.Time
	Expires     time.Time
}

// maxHoldFile bounds what ParseHold reads: a hold is a few hundred bytes
// plus the arguments.
const maxHoldFile = 1 << 20

// safeName is what may appear as one path segment and one branch-name
// segment: no "/", no "..", no leading dot or dash.
var safeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*$`)

func checkSafeName(what, s string) error {
	if len(s) > 128 || !safeName.MatchString(s) || strings.HasSuffix(s, ".lock") {
		return fmt.Errorf("invalid %s %q: use letters, digits, '.', '_' or '-' (at most 128)", what, s)
	}
	return nil
}

// Validate checks the fields a hold file needs.
func (h *HoldRequest) Validate() error {
	if err := checkSafeName("hold id", h.ID); err != nil {
		return err
	}
	if err := checkSafeName("plan name", h.PlanName); err != nil {
		return err
	}
	if !strings.HasPrefix(h.PlanDigest, "sha256:") || len(h.PlanDigest) != len("sha256:")+64 {
		return fmt.Errorf("invalid plan digest %q: want sha256:<64 hex>", h.PlanDigest)
	}
	if h.Step == "" || h.Tool == "" {
		return errors.New("hold request needs a step and a tool")
	}
	if err := checkArgs(h.Args); err != nil {
		return err
	}
	if h.Reason == "" {
		return errors.New("hold request needs a reason")
	}
	if h.Created.IsZero() || h.Expires.IsZero() {
		return errors.New("hold request needs created and expires times")
	}
	if !h.Expires.After(h.Created) {
		return fmt.Errorf("hold request expires (%s) before it was created (%s)", h.Expires.Format(time.RFC3339), h.Created.Format(time.RFC3339))
	}
	return nil
}

func checkArgs(a json.RawMessage) error {
	if !json.Valid(a) {
		return errors.New("hold arguments are not valid JSON")
	}
	if t := bytes.TrimSpace(a); len(t) == 0 || t[0] != '{' {
		return errors.New("hold arguments must be a JSON object")
	}
	return nil
}

// Path is where the hold file lives in the repository.
func (h *HoldRequest) Path() string { return "holds/" + h.PlanName + "/" + h.ID + ".hcl" }

// Branch is the branch the hold pull request comes from.
func (h *HoldRequest) Branch() string { return "planlock/hold/" + h.PlanName + "/" + h.ID }

const holdHeader = `# planlock hold request. Merging this pull request approves exactly this
# one call (plan digest + tool + arguments), once, until it expires.
`

// WriteHold renders the hold file. Times are written in UTC with their full
// precision, so ParseHold gives back the same request.
func WriteHold(h *HoldRequest) ([]byte, error) {
	if err := h.Validate(); err != nil {
		return nil, err
	}
	f := hclwrite.NewEmptyFile()
	b := f.Body().AppendNewBlock("hold", []string{h.ID}).Body()
	set := func(k, v string) { b.SetAttributeValue(k, cty.StringVal(v)) }
	set("plan", h.PlanName)
	set("plan_digest", h.PlanDigest)
	set("step", h.Step)
	set("tool", h.Tool)
	set("arguments", string(h.Args))
	set("reason", h.Reason)
	if h.ObservedPin != "" {
		set("observed_pin", h.ObservedPin)
	}
	if h.RequestedBy != "" {
		set("requested_by", h.RequestedBy)
	}
	set("created", h.Created.UTC().Format(time.RFC3339Nano))
	set("expires", h.Expires.UTC().Format(time.RFC3339Nano))
	return append([]byte(holdHeader), hclwrite.Format(f.Bytes())...), nil
}

var holdSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "plan", Required: true},
		{Name: "plan_digest", Required: true},
		{Name: "step", Required: true},
		{Name: "tool", Required: true},
		{Name: "arguments", Required: true},
		{Name: "reason", Required: true},
		{Name: "observed_pin"},
		{Name: "requested_by"},
		{Name: "created", Required: true},
		{Name: "expires", Required: true},
	},
}

// ParseHold reads a hold file. It accepts only literal strings (no
// variables or functions), exactly one hold block, and known attributes.
func ParseHold(src []byte) (*HoldRequest, error) {
	if len(src) > maxHoldFile {
		return nil, fmt.Errorf("hold file is larger than %d bytes", maxHoldFile)
	}
	file, diags := hclsyntax.ParseConfig(src, "hold.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		return nil, fmt.Errorf("parse hold file: %w", diags)
	}
	root, diags := file.Body.Content(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "hold", LabelNames: []string{"id"}}}})
	if diags.HasErrors() {
		return nil, fmt.Errorf("parse hold file: %w", diags)
	}
	if len(root.Blocks) != 1 {
		return nil, fmt.Errorf("hold file must hold exactly one hold block, found %d", len(root.Blocks))
	}
	blk := root.Blocks[0]
	content, diags := blk.Body.Content(holdSchema)
	if diags.HasErrors() {
		return nil, fmt.Errorf("parse hold file: %w", diags)
	}
	vals := map[string]string{}
	for name, a := range content.Attributes {
		v, diags := a.Expr.Value(nil)
		if diags.HasErrors() {
			return nil, fmt.Errorf("hold file: %s: %w", name, diags)
		}
		if v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
			return nil, fmt.Errorf("hold file: %s must be a string", name)
		}
		vals[name] = v.AsString()
	}
	h := &HoldRequest{
		ID: blk.Labels[0], PlanName: vals["plan"], PlanDigest: vals["plan_digest"],
		Step: vals["step"], Tool: vals["tool"], Args: json.RawMessage(vals["arguments"]),
		Reason: vals["reason"], ObservedPin: vals["observed_pin"], RequestedBy: vals["requested_by"],
	}
	var err error
	if h.Created, err = time.Parse(time.RFC3339Nano, vals["created"]); err != nil {
		return nil, fmt.Errorf("hold file: created: %w", err)
	}
	if h.Expires, err = time.Parse(time.RFC3339Nano, vals["expires"]); err != nil {
		return nil, fmt.Errorf("hold file: expires: %w", err)
	}
	if err := h.Validate(); err != nil {
		return nil, fmt.Errorf("hold file: %w", err)
	}
	return h, nil
}
