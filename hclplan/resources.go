package hclplan

import (
	"fmt"
	"regexp"

	"github.com/hashicorp/hcl/v2"
	"github.com/yosida95/uritemplate/v3"
)

// Resources and prompts (v2): a plan may allow the agent to read MCP
// resources and get MCP prompts. A plan without such blocks exposes neither.

var (
	resourceSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "uri"}, {Name: "uri_pattern"}, {Name: "uri_template"}, {Name: "max_reads"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "input"}},
	}
	promptSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "max_calls"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "arg", LabelNames: []string{"name"}}, {Type: "input"}},
	}
)

// Resource allows reading the resources whose URI matches.
type Resource struct {
	Name        string
	URI         string   // exact URI; "" when a pattern or template is used
	URIPattern  *Pattern // RE2 over the whole URI
	URITemplate string   // RFC 6570 template, as the server lists it
	MaxReads    int
	Input       *InputRules // what a multi-round read may ask of the client; nil: nothing

	DeclRange hcl.Range

	template *regexp.Regexp
}

// Prompt allows getting one prompt of the upstream, with constrained
// arguments.
type Prompt struct {
	Name     string // the prompt's name on the upstream
	MaxCalls int
	Args     []*Arg
	Input    *InputRules // what a multi-round get may ask of the client; nil: nothing

	DeclRange hcl.Range

	step *Step // the arguments' checker
}

// Matches reports whether uri is a resource this block allows.
func (r *Resource) Matches(uri string) bool {
	switch {
	case r.URIPattern != nil:
		return r.URIPattern.MatchString(uri)
	case r.template != nil:
		return r.template.MatchString(uri)
	}
	return uri == r.URI
}

// Resource returns the first resource block that allows uri, or nil.
func (p *Plan) Resource(uri string) *Resource {
	for _, r := range p.Resources {
		if r.Matches(uri) {
			return r
		}
	}
	return nil
}

// Prompt returns the prompt block for the upstream prompt name, or nil.
func (p *Plan) Prompt(name string) *Prompt {
	for _, pr := range p.Prompts {
		if pr.Name == name {
			return pr
		}
	}
	return nil
}

// Check reports whether the prompt's arguments satisfy the plan; the
// violation names the prompt.
func (pr *Prompt) Check(args map[string]any) error {
	err := pr.step.Check(args)
	if v, ok := err.(*Violation); ok {
		v.Kind = "prompt"
	}
	return err
}

func (d *decoder) resources(blocks hcl.Blocks) []*Resource {
	var out []*Resource
	seen := map[string]*hcl.Block{}
	for _, b := range blocks {
		name := b.Labels[0]
		if first, dup := seen[name]; dup {
			d.errorf(b.LabelRanges[0], "Duplicate resource name", "A resource named %q is already declared at %s.", name, first.DefRange)
			continue
		}
		seen[name] = b
		d.checkName(b.LabelRanges[0], "resource", name)
		r := &Resource{Name: name, MaxReads: 1, DeclRange: b.DefRange}
		c := d.content(b.Body, resourceSchema)
		given := 0
		for _, n := range []string{"uri", "uri_pattern", "uri_template"} {
			if c.Attributes[n] != nil {
				given++
			}
		}
		if given != 1 {
			d.errorf(b.DefRange, "Resource needs one of uri, uri_pattern, uri_template", "Give exactly one: uri (one exact URI), uri_pattern (RE2 over the whole URI) or uri_template (an RFC 6570 template the server lists).")
		}
		if a := c.Attributes["uri"]; a != nil {
			if s, ok := d.str(a); ok {
				if s == "" {
					d.errorf(a.Expr.Range(), "Empty uri", "uri is the exact URI of the resource.")
				}
				r.URI = s
			}
		}
		if a := c.Attributes["uri_pattern"]; a != nil {
			if s, ok := d.str(a); ok {
				pat, err := CompilePattern(s)
				if err != nil {
					d.errorf(a.Expr.Range(), "Invalid uri_pattern", "uri_pattern must be an RE2 regular expression: %s.", err)
				}
				r.URIPattern = pat
			}
		}
		if a := c.Attributes["uri_template"]; a != nil {
			if s, ok := d.str(a); ok {
				t, err := uritemplate.New(s)
				if err != nil {
					d.errorf(a.Expr.Range(), "Invalid uri_template", "uri_template must be an RFC 6570 URI template: %s.", err)
				} else {
					r.URITemplate, r.template = s, t.Regexp()
				}
			}
		}
		if a := c.Attributes["max_reads"]; a != nil {
			if n, ok := d.integer(a); ok {
				if n < 1 {
					d.errorf(a.Expr.Range(), "Invalid max_reads", "max_reads must be at least 1; to allow no read, remove the resource.")
				}
				r.MaxReads = n
			}
		}
		r.Input = d.inputBlocks(c.Blocks.OfType("input"))
		out = append(out, r)
	}
	return out
}

func (d *decoder) prompts(blocks hcl.Blocks) []*Prompt {
	var out []*Prompt
	seen := map[string]*hcl.Block{}
	for _, b := range blocks {
		name := b.Labels[0]
		if first, dup := seen[name]; dup {
			d.errorf(b.LabelRanges[0], "Duplicate prompt", "Prompt %q is already declared at %s.", name, first.DefRange)
			continue
		}
		seen[name] = b
		if name == "" {
			d.errorf(b.LabelRanges[0], "Empty prompt name", "A prompt block names the upstream's prompt it allows.")
		}
		pr := &Prompt{Name: name, MaxCalls: 1, DeclRange: b.DefRange}
		c := d.content(b.Body, promptSchema)
		if a := c.Attributes["max_calls"]; a != nil {
			if n, ok := d.integer(a); ok {
				if n < 1 {
					d.errorf(a.Expr.Range(), "Invalid max_calls", "max_calls must be at least 1; to allow no call, remove the prompt.")
				}
				pr.MaxCalls = n
			}
		}
		st := &Step{Name: name, byName: map[string]*Arg{}}
		for _, ab := range c.Blocks.OfType("arg") {
			an := ab.Labels[0]
			if first := st.byName[an]; first != nil {
				d.errorf(ab.LabelRanges[0], "Duplicate argument", "Argument %q is already constrained at %s in this prompt.", an, first.DeclRange)
				continue
			}
			a := d.arg(ab)
			st.Args = append(st.Args, a)
			st.byName[an] = a
		}
		pr.Args, pr.step = st.Args, st
		pr.Input = d.inputBlocks(c.Blocks.OfType("input"))
		out = append(out, pr)
	}
	return out
}

// describeResource says in plain words which URIs a resource block allows.
func describeResource(r *Resource) string {
	var what string
	switch {
	case r.URIPattern != nil:
		what = fmt.Sprintf("URIs matching %s in full", MarkdownCode(r.URIPattern.Source))
	case r.URITemplate != "":
		what = fmt.Sprintf("URIs of the template %s", MarkdownCode(r.URITemplate))
	default:
		what = MarkdownCode(r.URI)
	}
	return fmt.Sprintf("%s may read %s %s", MarkdownCode(r.Name), what, times(r.MaxReads))
}
