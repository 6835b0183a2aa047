package hclplan

import (
	"fmt"
	"strings"
)

// describeV2 says in plain words what the v2 constraints of a allow.
func describeV2(a *Arg) []string {
	var parts []string
	switch {
	case a.MinItems != nil && a.MaxItems != nil:
		parts = append(parts, fmt.Sprintf("must be an array of %d to %d items", *a.MinItems, *a.MaxItems))
	case a.MinItems != nil:
		parts = append(parts, fmt.Sprintf("must be an array of at least %d items", *a.MinItems))
	case a.MaxItems != nil:
		parts = append(parts, fmt.Sprintf("must be an array of at most %d items", *a.MaxItems))
	case a.Items != nil:
		parts = append(parts, "must be an array")
	}
	switch {
	case len(a.Fields) > 0 && a.AnyOtherFields:
		parts = append(parts, "must be an object (the fields below are checked; other fields are allowed)")
	case len(a.Fields) > 0:
		parts = append(parts, "must be an object with only the fields below")
	}
	if a.Expr != nil {
		parts = append(parts, describeExpr(a.Expr))
	}
	return parts
}

// describeExpr renders a CEL check on one line, with its message.
func describeExpr(e *Expr) string {
	s := fmt.Sprintf("must satisfy %s", MarkdownCode(strings.Join(strings.Fields(e.Source), " ")))
	if e.Message != "" {
		s += " — " + MarkdownCode(e.Message)
	}
	return s
}

// writeNested writes the items and field blocks of a as nested list items.
func writeNested(b *strings.Builder, a *Arg, indent string) {
	if a.Items != nil {
		fmt.Fprintf(b, "%s- each item %s\n", indent, describeConstraints(a.Items))
		writeNested(b, a.Items, indent+"  ")
	}
	for _, f := range a.Fields {
		fmt.Fprintf(b, "%s- field %s %s\n", indent, MarkdownCode(f.Name), describeArg(f))
		writeNested(b, f, indent+"  ")
	}
}

type jsonResource struct {
	Name        string     `json:"name"`
	URI         string     `json:"uri,omitempty"`
	URIPattern  string     `json:"uri_pattern,omitempty"`
	URITemplate string     `json:"uri_template,omitempty"`
	MaxReads    int        `json:"max_reads"`
	Input       *jsonInput `json:"input,omitempty"`
}

type jsonPrompt struct {
	Name     string     `json:"name"`
	MaxCalls int        `json:"max_calls"`
	Args     []jsonArg  `json:"args"`
	Input    *jsonInput `json:"input,omitempty"`
}

func jsonResourcesAndPrompts(p *Plan) ([]jsonResource, []jsonPrompt) {
	var rs []jsonResource
	for _, r := range p.Resources {
		jr := jsonResource{Name: r.Name, URI: r.URI, URITemplate: r.URITemplate, MaxReads: r.MaxReads, Input: jsonInputOf(r.Input)}
		if r.URIPattern != nil {
			jr.URIPattern = r.URIPattern.Source
		}
		rs = append(rs, jr)
	}
	var ps []jsonPrompt
	for _, pr := range p.Prompts {
		jp := jsonPrompt{Name: pr.Name, MaxCalls: pr.MaxCalls, Args: []jsonArg{}}
		for _, a := range pr.Args {
			jp.Args = append(jp.Args, jsonArgOf(a))
		}
		jp.Input = jsonInputOf(pr.Input)
		ps = append(ps, jp)
	}
	return rs, ps
}

// writeResourcesAndPrompts adds the v2 sections; a plan without resource or
// prompt blocks gets none (its summary is as in v1).
func writeResourcesAndPrompts(b *strings.Builder, p *Plan) {
	if len(p.Resources) > 0 {
		b.WriteString("\n### Resources\n\n")
		for _, r := range p.Resources {
			fmt.Fprintf(b, "- %s.\n", describeResource(r))
			writeInput(b, r.Input, "  ")
		}
	}
	if len(p.Prompts) > 0 {
		b.WriteString("\n### Prompts\n\n")
		for _, pr := range p.Prompts {
			fmt.Fprintf(b, "- %s may be used %s.\n", MarkdownCode(pr.Name), times(pr.MaxCalls))
			if len(pr.Args) == 0 {
				b.WriteString("  - No arguments allowed.\n")
			}
			for _, a := range pr.Args {
				fmt.Fprintf(b, "  - %s %s\n", MarkdownCode(a.Name), describeArg(a))
				writeNested(b, a, "    ")
			}
			writeInput(b, pr.Input, "  ")
		}
	}
}

// writeInput lists what a multi-round call may ask of the client; a step
// without an input block says that none reaches it.
func writeInput(b *strings.Builder, in *InputRules, indent string) {
	for _, line := range in.Describe() {
		fmt.Fprintf(b, "%s- %s.\n", indent, line)
	}
}

type jsonInput struct {
	MaxRounds   int              `json:"max_rounds"`
	Elicitation *jsonElicitation `json:"elicitation,omitempty"`
	URL         *URLRule         `json:"elicitation_url,omitempty"`
	Sampling    *SamplingRule    `json:"sampling,omitempty"`
	Roots       bool             `json:"roots"`
}

type jsonElicitation struct {
	MaxMessageLength int              `json:"max_message_length"`
	Fields           []jsonInputField `json:"fields"`
}

type jsonInputField struct {
	Name      string   `json:"name"`
	Type      string   `json:"type"`
	MaxLength *int     `json:"max_length,omitempty"`
	Min       *float64 `json:"min,omitempty"`
	Max       *float64 `json:"max,omitempty"`
	Enum      []string `json:"enum,omitempty"`
	Optional  bool     `json:"optional"`
}

func jsonInputOf(in *InputRules) *jsonInput {
	if in == nil {
		return nil
	}
	j := &jsonInput{MaxRounds: in.MaxRounds, URL: in.URL, Sampling: in.Sampling, Roots: in.Roots}
	if e := in.Elicitation; e != nil {
		j.Elicitation = &jsonElicitation{MaxMessageLength: e.MaxMessageLength, Fields: []jsonInputField{}}
		for _, f := range e.Fields {
			j.Elicitation.Fields = append(j.Elicitation.Fields, jsonInputField{Name: f.Name, Type: f.Type, MaxLength: f.MaxLength,
				Min: f.Min, Max: f.Max, Enum: f.Enum, Optional: f.Optional})
		}
	}
	return j
}
