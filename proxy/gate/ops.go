package gate

import (
	"fmt"
	"time"

	"github.com/planlock/planlock/hclplan"
)

// Op is a request the plan governs other than a tool call: each is decided
// by its own kind of block (resource or prompt), in the contract's order
// (plan expired → not in plan → arguments → count), as Decide decides a
// tool call. What an op may do is read or suggest: no op holds, none takes
// part in the sequential order of the steps.
type Op string

// Ops.
const (
	// OpRead is resources/read: a resource block allows the URI, and its
	// max_reads counts the read.
	OpRead Op = "resources/read"
	// OpSubscribe is resources/subscribe, and each URI of a listen
	// stream's resourceSubscriptions (protocol 2026-07-28): a resource
	// block allows the URI. Not counted.
	OpSubscribe Op = "resources/subscribe"
	// OpGet is prompts/get: a prompt block names the prompt, its
	// arguments pass the block's constraints, and its max_calls counts
	// the get.
	OpGet Op = "prompts/get"
	// OpCompletePrompt is completion/complete of a prompt's argument: a
	// prompt block names the prompt. Not counted.
	OpCompletePrompt Op = "completion/complete:prompt"
	// OpCompleteResource is completion/complete of a resource template's
	// argument: a resource block's uri_template is the template, or a
	// resource block allows the URI. Not counted.
	OpCompleteResource Op = "completion/complete:resource"
)

// OpInput is everything DecideOp looks at.
type OpInput struct {
	Now time.Time
	Op  Op
	// Name is the resource's URI (or template) or the prompt's name.
	Name string
	// Args are a get's prompt arguments (nil for the other ops).
	Args     map[string]any
	Progress Progress
}

// Counter is the durable count an op takes, kept per (kind, name): the
// resource or prompt block, with its limit. Index is where the state keeps
// the count, past the plan's steps (resources, then prompts), so that one
// state counts steps, resources and prompts apart.
type Counter struct {
	Kind  string // "resource" or "prompt"
	Name  string // the block's name
	Index int
	Max   int
	Limit string // the limit's name: "max_reads" or "max_calls"
}

// Step is the counter's name as the state records it: "resource:NAME" or
// "prompt:NAME".
func (c Counter) Step() string { return c.Kind + ":" + c.Name }

// OpDecision is DecideOp's answer: allowed (with the block that allows it
// and, for a counted op, its counter) or refused with the rule and one
// precise line.
type OpDecision struct {
	Allowed  bool
	Rule     Rule
	Reason   string
	Resource *hclplan.Resource // the block that allows a read, subscription or resource completion
	Prompt   *hclplan.Prompt   // the block that allows a get or prompt completion
	Count    *Counter          // nil: the op is not counted
}

// DecideOp decides one op without I/O. A counted op allowed here takes its
// count durably before anything is forwarded; the state refuses the count
// atomically when concurrent ops used it up meanwhile (as Recheck does for
// a tool call).
func (g *Gate) DecideOp(in OpInput) OpDecision {
	p := g.plan
	refuse := func(r Rule, format string, a ...any) OpDecision {
		return OpDecision{Rule: r, Reason: fmt.Sprintf(format, a...)}
	}
	if p.Expired(in.Now) {
		return refuse(RuleExpired, "plan %q expired at %s; no call is allowed", p.Name, p.Expires.UTC().Format(time.RFC3339))
	}
	var d OpDecision
	switch in.Op {
	case OpRead, OpSubscribe:
		i := g.resourceOf(in.Name)
		if i < 0 {
			if in.Op == OpSubscribe {
				return refuse(RuleUnplanned, "resource %q is not in plan %q, so it cannot be subscribed to", in.Name, p.Name)
			}
			return refuse(RuleUnplanned, "resource %q is not in plan %q", in.Name, p.Name)
		}
		d.Resource = p.Resources[i]
		if in.Op == OpRead {
			d.Count = &Counter{Kind: "resource", Name: d.Resource.Name, Index: len(p.Steps) + i, Max: d.Resource.MaxReads, Limit: "max_reads"}
		}
	case OpGet:
		i := g.promptOf(in.Name)
		if i < 0 {
			return refuse(RuleUnplanned, "prompt %q is not in plan %q", in.Name, p.Name)
		}
		d.Prompt = p.Prompts[i]
		args := in.Args
		if args == nil {
			args = map[string]any{}
		}
		if err := d.Prompt.Check(args); err != nil {
			return refuse(RuleArgs, "%s", err.Error())
		}
		d.Count = &Counter{Kind: "prompt", Name: d.Prompt.Name, Index: len(p.Steps) + len(p.Resources) + i, Max: d.Prompt.MaxCalls, Limit: "max_calls"}
	case OpCompletePrompt:
		i := g.promptOf(in.Name)
		if i < 0 {
			return refuse(RuleUnplanned, "completion for prompt %q: the prompt is not in plan %q", in.Name, p.Name)
		}
		d.Prompt = p.Prompts[i]
	case OpCompleteResource:
		i := -1
		for j, r := range p.Resources {
			if r.URITemplate != "" && r.URITemplate == in.Name {
				i = j
				break
			}
		}
		if i < 0 {
			i = g.resourceOf(in.Name)
		}
		if i < 0 {
			return refuse(RuleUnplanned, "completion for resource %q: no resource block of plan %q names it", in.Name, p.Name)
		}
		d.Resource = p.Resources[i]
	default:
		return refuse(RuleUnplanned, "%s is not a request plan %q governs", in.Op, p.Name)
	}
	if c := d.Count; c != nil && in.Progress != nil {
		if used := in.Progress.Calls(c.Index); used >= c.Max {
			return OpDecision{Rule: RuleMaxCalls, Resource: d.Resource, Prompt: d.Prompt, Count: c,
				Reason: fmt.Sprintf("%s: %s %d used up (%d forwarded)", c.Step(), c.Limit, c.Max, used)}
		}
	}
	d.Allowed = true
	return d
}

// Reopen finds again what a multi-round retry's first round was decided
// on: the block its sealed state names by counter (index and step), if the
// loaded plan still has it there and it allows name (the read's URI, the
// get's prompt). Expiry is the caller's to check; nothing is counted again.
func (g *Gate) Reopen(op Op, index int, step, name string) (OpDecision, bool) {
	p := g.plan
	var d OpDecision
	switch op {
	case OpRead:
		i := index - len(p.Steps)
		if i < 0 || i >= len(p.Resources) || !p.Resources[i].Matches(name) {
			return OpDecision{}, false
		}
		d.Resource = p.Resources[i]
		d.Count = &Counter{Kind: "resource", Name: d.Resource.Name, Index: index, Max: d.Resource.MaxReads, Limit: "max_reads"}
	case OpGet:
		i := index - len(p.Steps) - len(p.Resources)
		if i < 0 || i >= len(p.Prompts) || p.Prompts[i].Name != name {
			return OpDecision{}, false
		}
		d.Prompt = p.Prompts[i]
		d.Count = &Counter{Kind: "prompt", Name: d.Prompt.Name, Index: index, Max: d.Prompt.MaxCalls, Limit: "max_calls"}
	default:
		return OpDecision{}, false
	}
	if d.Count.Step() != step {
		return OpDecision{}, false
	}
	d.Allowed = true
	return d, true
}

// resourceOf is the index of the first resource block that allows uri, or -1.
func (g *Gate) resourceOf(uri string) int {
	for i, r := range g.plan.Resources {
		if r.Matches(uri) {
			return i
		}
	}
	return -1
}

// promptOf is the index of the prompt block for name, or -1.
func (g *Gate) promptOf(name string) int {
	for i, pr := range g.plan.Prompts {
		if pr.Name == name {
			return i
		}
	}
	return -1
}
