package proxy

import (
	"encoding/json"
	"fmt"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/hclplan/toolpin"
	"github.com/planlock/planlock/proxy/holdreq"
)

// toolDef is what the proxy keeps of one upstream tool definition for the
// plan's tool_pin check: its digest (or why it has none), its description
// and its raw bytes (for the hold's pull request).
type toolDef struct {
	digest      string
	description string
	err         error
	raw         json.RawMessage
}

// readDefs indexes the upstream's tools/list entries by name.
func readDefs(raw []json.RawMessage) map[string]toolDef {
	defs := make(map[string]toolDef, len(raw))
	for _, r := range raw {
		var head struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		}
		if json.Unmarshal(r, &head) != nil || head.Name == "" {
			continue
		}
		d := toolDef{description: head.Description, raw: r}
		d.digest, d.err = toolpin.Digest(r)
		if _, dup := defs[head.Name]; dup {
			// Two definitions of one name: which one a client keeps is
			// not ours to guess, so neither matches a pin.
			d.err = fmt.Errorf("the upstream lists tool %q twice", head.Name)
		}
		defs[head.Name] = d
	}
	return defs
}

// toolChanged says whether the upstream's definition of tool is not the
// one plan pins, and how; a tool without a tool_pin never is. Before the
// upstream listed its tools nothing is checked yet, so a pinned tool
// counts as changed (fail closed).
func toolChanged(plan *hclplan.Plan, defs map[string]toolDef, listed bool, tool string) (string, bool) {
	tp := plan.ToolPin(tool)
	if tp == nil {
		return "", false
	}
	if !listed {
		return fmt.Sprintf("tool %q: the upstream has not listed its tools yet, so its definition is not checked against the plan's tool_pin", tool), true
	}
	d, ok := defs[tool]
	switch {
	case !ok:
		return fmt.Sprintf("tool definition changed: the upstream no longer lists tool %q (the plan pins %s)", tool, tp.Digest), true
	case d.err != nil:
		return fmt.Sprintf("tool definition changed: tool %q has no readable definition (%v); the plan pins %s", tool, d.err, tp.Digest), true
	case d.digest != tp.Digest:
		return fmt.Sprintf("tool definition changed: the upstream's definition of tool %q is %s, the plan pins %s", tool, d.digest, tp.Digest), true
	case tp.Description != nil && *tp.Description != d.description:
		return fmt.Sprintf("tool definition changed: tool %q's description differs from the plan's pinned description", tool), true
	}
	return "", false
}

// toolChanged is toolChanged on the upstream's last list, for gate.Input.
func (p *Proxy) toolChanged(plan *hclplan.Plan) func(tool string) (string, bool) {
	return func(tool string) (string, bool) {
		if plan.ToolPin(tool) == nil {
			return "", false
		}
		p.setMu.Lock()
		defs, listed := p.defs, p.listed
		p.setMu.Unlock()
		return toolChanged(plan, defs, listed, tool)
	}
}

// notePinned keeps, for each tool_pin of plan, the canonical definition
// the upstream listed while it matched, so that a later hold for a changed
// definition can show the old one beside the new. Only the current plan's
// pins are kept: one definition per pinned tool. setMu is held.
func (p *Proxy) notePinned(plan *hclplan.Plan) {
	keep := make(map[string][]byte)
	for _, name := range plan.Tools() {
		tp := plan.ToolPin(name)
		if tp == nil {
			continue
		}
		if c, ok := p.seen[tp.Digest]; ok {
			keep[tp.Digest] = c
			continue
		}
		if _, changed := toolChanged(plan, p.defs, p.listed, name); changed {
			continue
		}
		if c, err := toolpin.Canonical(p.defs[name].raw); err == nil {
			keep[tp.Digest] = c
		}
	}
	p.seen = keep
}

// toolChange is what a hold for tool's changed definition shows the
// approver: the plan's pin, the definition that matched it when one was
// listed, and the definition listed now (nil when the upstream lists none,
// or none that can be read).
func (p *Proxy) toolChange(plan *hclplan.Plan, tool string) *holdreq.ToolChange {
	tp := plan.ToolPin(tool)
	if tp == nil {
		return nil
	}
	p.setMu.Lock()
	d, ok := p.defs[tool]
	old := p.seen[tp.Digest]
	p.setMu.Unlock()
	if old == nil {
		old = tp.Definition // recorded in the plan, checked against the digest
	}
	if !ok || d.err != nil {
		return nil
	}
	canon, err := toolpin.Canonical(d.raw)
	if err != nil {
		return nil
	}
	return &holdreq.ToolChange{Tool: tool, PinnedDigest: tp.Digest, PinnedDescription: tp.Description,
		Digest: d.digest, Description: d.description, Definition: canon, PinnedDefinition: old}
}
