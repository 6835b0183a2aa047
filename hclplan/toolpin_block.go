package hclplan

import (
	"encoding/json"

	"github.com/hashicorp/hcl/v2"

	"github.com/planlock/planlock/hclplan/toolpin"
)

var toolPinSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "digest", Required: true},
		{Name: "description"},
		{Name: "definition"},
	},
}

func (d *decoder) toolPin(b *hcl.Block, tool string) *ToolPin {
	tp := &ToolPin{DeclRange: b.DefRange}
	c := d.content(b.Body, toolPinSchema)
	if a := c.Attributes["digest"]; a != nil {
		tp.DigestRange = a.Expr.Range()
		if s, ok := d.str(a); ok {
			if !toolpin.ValidDigest(s) {
				d.errorf(a.Expr.Range(), "Invalid tool_pin digest", "digest must be \"sha256:\" and 64 lowercase hex digits (planlock tools --pins prints it); %q is not.", s)
			}
			tp.Digest = s
		}
	}
	if a := c.Attributes["description"]; a != nil {
		if s, ok := d.str(a); ok {
			tp.Description = &s
		}
	}
	if a := c.Attributes["definition"]; a != nil {
		if s, ok := d.str(a); ok {
			d.toolPinDefinition(tp, a, s, tool)
		}
	}
	return tp
}

// toolPinDefinition checks a recorded definition against the pin: it is
// shown to the reviewer, so it must be the very definition the digest pins.
func (d *decoder) toolPinDefinition(tp *ToolPin, a *hcl.Attribute, s, tool string) {
	canon, err := toolpin.Canonical([]byte(s))
	if err != nil {
		d.errorf(a.Expr.Range(), "Invalid tool_pin definition", "definition must be the tool's definition as JSON (planlock tools --pins writes it): %s.", err)
		return
	}
	got, _ := toolpin.Digest(canon)
	var head struct {
		Name        string  `json:"name"`
		Description *string `json:"description"`
	}
	_ = json.Unmarshal(canon, &head)
	switch {
	case tp.Digest != "" && got != tp.Digest:
		d.errorf(a.Expr.Range(), "Tool pin definition does not match its digest", "The recorded definition has digest %s; the tool_pin's digest is %s. Write both from the same definition (planlock tools --pins).", got, tp.Digest)
		return
	case tool != "" && head.Name != tool:
		d.errorf(a.Expr.Range(), "Tool pin definition of another tool", "The recorded definition is of tool %q; the step calls %q.", head.Name, tool)
		return
	case tp.Description != nil && (head.Description == nil || *head.Description != *tp.Description):
		d.errorf(a.Expr.Range(), "Pinned description differs from the definition", "The tool_pin's description is not the description in its recorded definition.")
		return
	}
	tp.Definition = canon
}

// agreeToolPins refuses steps of one tool that pin different definitions:
// the agent sees one definition of a tool.
func (d *decoder) agreeToolPins(steps []*Step) {
	first := map[string]*ToolPin{}
	for _, s := range steps {
		tp := s.ToolPin
		if tp == nil {
			continue
		}
		f, ok := first[s.Tool]
		if !ok {
			first[s.Tool] = tp
			continue
		}
		sameDesc := (f.Description == nil) == (tp.Description == nil) && (f.Description == nil || *f.Description == *tp.Description)
		if f.Digest != tp.Digest || !sameDesc {
			d.errorf(tp.DeclRange, "Conflicting tool pins", "Tool %q is pinned differently at %s; steps of one tool pin the same definition.", s.Tool, f.DeclRange)
		}
	}
}

// checkToolPin checks a step's tool_pin against the upstream's definition
// of its tool (plan validate --tools).
func (d *decoder) checkToolPin(s *Step, t Tool) {
	tp := s.ToolPin
	if tp == nil {
		return
	}
	if len(t.Raw) == 0 {
		d.errorf(tp.DeclRange, "Tool definition unknown", "The tool list gives no definition of %q to check the tool_pin against.", s.Tool)
		return
	}
	got, err := toolpin.Digest(t.Raw)
	switch {
	case err != nil:
		d.errorf(tp.DigestRange, "Tool definition unreadable", "The upstream's definition of %q has no digest: %s.", s.Tool, err)
	case got != tp.Digest:
		d.errorf(tp.DigestRange, "Tool definition changed", "The upstream's definition of %q has digest %s; the plan pins %s. Review the new definition (planlock tools --pins) before pinning it.", s.Tool, got, tp.Digest)
	case tp.Description != nil && *tp.Description != t.Description:
		d.errorf(tp.DeclRange, "Pinned description differs", "The upstream's description of %q is not the pinned description (the digest matches, so the pinned text is wrong).", s.Tool)
	}
}
