// Package catalog describes an upstream's tools for people: a listing with
// argument names and types (planlock tools), a skeleton plan with every tool
// as a commented-out step (planlock plan init), and the MCP client
// configuration snippet that runs an upstream behind planlock (planlock
// mcp-config).
package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/hclplan/toolpin"
	"github.com/planlock/planlock/internal/oneline"
)

// Tool is one entry of tools/list (hclplan's: one tool type for plan checks
// and for people).
type Tool = hclplan.Tool

// Arg is one property of a tool's input schema, as hclplan reads it.
type Arg struct {
	Name     string
	Type     string // JSON Schema type(s), "any" when unspecified
	Required bool
	Schema   *hclplan.Schema
}

// Decode reads raw tools/list entries.
func Decode(raw []json.RawMessage) ([]Tool, error) {
	out := make([]Tool, 0, len(raw))
	for _, r := range raw {
		var t Tool
		if err := json.Unmarshal(r, &t); err != nil {
			return nil, fmt.Errorf("bad tool definition: %w", err)
		}
		t.Raw = r
		out = append(out, t)
	}
	return out, nil
}

// args returns the tool's arguments in name order.
func args(t Tool) []Arg {
	var out []Arg
	for _, a := range t.Args() {
		out = append(out, Arg{Name: a.Name, Type: schemaType(a.Schema), Required: a.Required, Schema: a.Schema})
	}
	return out
}

func schemaType(s *hclplan.Schema) string {
	if ts := s.Types(); len(ts) > 0 {
		return strings.Join(ts, "|")
	}
	if s.Enum != nil {
		return "enum"
	}
	return "any"
}

// List writes the human listing of planlock tools.
func List(tools []Tool) string {
	var b strings.Builder
	for i, t := range tools {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(t.Name)
		if d := firstLine(t.Description); d != "" {
			b.WriteString("  " + d)
		}
		b.WriteString("\n")
		args := args(t)
		if len(args) == 0 {
			b.WriteString("    (no arguments)\n")
		}
		for _, a := range args {
			req := "optional"
			if a.Required {
				req = "required"
			}
			fmt.Fprintf(&b, "    %s: %s, %s\n", a.Name, a.Type, req)
		}
	}
	return b.String()
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if r := []rune(s); len(r) > 100 {
		s = string(r[:100]) + "…"
	}
	return s
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Skeleton writes a plan with every tool as a commented-out step, each
// argument with a suggested constraint. Uncommenting a whole step gives a
// valid step; the plan needs at least one. The plan expires at expires, or
// never when it is zero: an expiry is written only when asked for.
func Skeleton(name string, tools []Tool, command []string, url string, expires time.Time) []byte {
	return SkeletonWith(name, tools, Extras{}, command, url, expires)
}

// Extras are the upstream's resources, resource templates and prompts, for
// the skeleton's commented resource and prompt blocks.
type Extras struct {
	Resources []struct {
		URI, Name, Description string
	}
	Templates []struct {
		URITemplate       string `json:"uriTemplate"`
		Name, Description string
	}
	Prompts []struct {
		Name, Description string
		Arguments         []struct {
			Name     string
			Required bool
		}
	}
}

// DecodeExtras decodes raw resources/list, resources/templates/list and
// prompts/list entries; entries it cannot read are skipped.
func DecodeExtras(resources, templates, prompts []json.RawMessage) Extras {
	var e Extras
	for _, r := range resources {
		var v struct{ URI, Name, Description string }
		if json.Unmarshal(r, &v) == nil && v.URI != "" {
			e.Resources = append(e.Resources, v)
		}
	}
	for _, r := range templates {
		var v struct {
			URITemplate       string `json:"uriTemplate"`
			Name, Description string
		}
		if json.Unmarshal(r, &v) == nil && v.URITemplate != "" {
			e.Templates = append(e.Templates, v)
		}
	}
	for _, r := range prompts {
		var v struct {
			Name, Description string
			Arguments         []struct {
				Name     string
				Required bool
			}
		}
		if json.Unmarshal(r, &v) == nil && v.Name != "" {
			e.Prompts = append(e.Prompts, v)
		}
	}
	return e
}

// SkeletonWith is Skeleton with the upstream's resources and prompts as
// commented-out resource and prompt blocks too.
func SkeletonWith(name string, tools []Tool, extras Extras, command []string, url string, expires time.Time) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Plan skeleton written by `planlock plan init` from the upstream's tools.\n")
	fmt.Fprintf(&b, "# Uncomment the steps the task needs (a plan needs at least one), tighten\n")
	fmt.Fprintf(&b, "# every suggested constraint, then check it with `planlock plan validate`.\n")
	fmt.Fprintf(&b, "plan %s {\n", hclString(name))
	if expires.IsZero() {
		fmt.Fprintf(&b, "  goal  = %s\n", hclString("Describe the task in one sentence"))
		fmt.Fprintf(&b, "  order = \"sequential\"\n")
	} else {
		fmt.Fprintf(&b, "  goal    = %s\n", hclString("Describe the task in one sentence"))
		fmt.Fprintf(&b, "  expires = %s\n", hclString(expires.UTC().Truncate(time.Second).Format(time.RFC3339)))
		fmt.Fprintf(&b, "  order   = \"sequential\"\n")
	}
	b.WriteString("\n  upstream {\n")
	if url != "" {
		fmt.Fprintf(&b, "    url = %s\n", hclString(url))
	} else {
		var parts []string
		for _, c := range command {
			parts = append(parts, hclString(c))
		}
		fmt.Fprintf(&b, "    command = [%s]\n", strings.Join(parts, ", "))
	}
	b.WriteString("  }\n")
	for _, t := range tools {
		b.WriteString("\n")
		if d := firstLine(t.Description); d != "" {
			fmt.Fprintf(&b, "  # %s\n", oneline.Of(d, 0))
		}
		if !nameRE.MatchString(t.Name) {
			fmt.Fprintf(&b, "  # (tool %q has a name a plan cannot use as a step name; name the step yourself)\n", t.Name)
		}
		fmt.Fprintf(&b, "  # step %s {\n", hclString(stepName(t.Name)))
		fmt.Fprintf(&b, "  #   tool      = %s\n", hclString(t.Name))
		fmt.Fprintf(&b, "  #   max_calls = 1\n")
		for _, a := range args(t) {
			writeArg(&b, a)
		}
		writeToolPin(&b, t, "  #   ")
		b.WriteString("  # }\n")
	}
	used := map[string]bool{}
	resourceName := func(n string) string {
		s := stepName(n)
		for i := 2; used[s]; i++ {
			s = fmt.Sprintf("%s-%d", stepName(n), i)
		}
		used[s] = true
		return s
	}
	for _, r := range extras.Resources {
		b.WriteString("\n")
		if d := firstLine(r.Description); d != "" {
			fmt.Fprintf(&b, "  # %s\n", oneline.Of(d, 0))
		}
		fmt.Fprintf(&b, "  # resource %s {\n", hclString(resourceName(r.Name)))
		fmt.Fprintf(&b, "  #   uri       = %s\n", hclString(r.URI))
		fmt.Fprintf(&b, "  #   max_reads = 1\n")
		b.WriteString("  # }\n")
	}
	for _, t := range extras.Templates {
		b.WriteString("\n")
		if d := firstLine(t.Description); d != "" {
			fmt.Fprintf(&b, "  # %s\n", oneline.Of(d, 0))
		}
		fmt.Fprintf(&b, "  # resource %s {\n", hclString(resourceName(t.Name)))
		fmt.Fprintf(&b, "  #   uri_template = %s\n", hclString(t.URITemplate))
		fmt.Fprintf(&b, "  #   max_reads    = 1\n")
		b.WriteString("  # }\n")
	}
	for _, p := range extras.Prompts {
		b.WriteString("\n")
		if d := firstLine(p.Description); d != "" {
			fmt.Fprintf(&b, "  # %s\n", oneline.Of(d, 0))
		}
		fmt.Fprintf(&b, "  # prompt %s {\n", hclString(p.Name))
		fmt.Fprintf(&b, "  #   max_calls = 1\n")
		for _, a := range p.Arguments {
			if a.Required {
				fmt.Fprintf(&b, "  #   arg %s { max_length = 100 }\n", hclString(a.Name))
			} else {
				fmt.Fprintf(&b, "  #   arg %s {\n  #     max_length = 100\n  #     optional   = true\n  #   }\n", hclString(a.Name))
			}
		}
		b.WriteString("  # }\n")
	}
	b.WriteString("}\n")
	return b.Bytes()
}

func stepName(tool string) string {
	var b strings.Builder
	for i, r := range tool {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || (i > 0 && (r == '.' || r == '_' || r == '-'))
		if ok {
			b.WriteRune(r)
		} else {
			b.WriteRune('_')
		}
	}
	s := b.String()
	if s == "" || s[0] == '_' {
		s = "s" + s
	}
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}

// writeArg suggests a constraint from the argument's schema: the schema's
// own enum or bounds when it has them, else a deliberately tight default.
func writeArg(b *bytes.Buffer, a Arg) {
	var lines []string
	if e, ok := a.Schema.Enum.([]any); ok && len(e) > 0 {
		if vals, ok := hclList(e); ok {
			lines = append(lines, "enum = "+vals)
		}
	}
	if len(lines) == 0 {
		switch a.Type {
		case "string":
			n := "200"
			if v, ok := a.Schema.MaxLength.(json.Number); ok {
				n = v.String()
			}
			lines = append(lines, "max_length = "+n)
		case "number", "integer":
			lo, hi := "0", "100"
			if v, ok := a.Schema.Minimum.(json.Number); ok {
				lo = v.String()
			}
			if v, ok := a.Schema.Maximum.(json.Number); ok {
				hi = v.String()
			}
			lines = append(lines, "min = "+lo, "max = "+hi)
		case "boolean":
			lines = append(lines, "eq = false")
		case "array":
			lines = append(lines, "max_length = 10")
		default:
			lines = append(lines, "any = true")
		}
	}
	if !a.Required {
		lines = append(lines, "optional = true")
	}
	comment := a.Type
	if d, ok := a.Schema.Description.(string); ok && d != "" {
		comment += ": " + oneline.Of(firstLine(d), 0)
	}
	fmt.Fprintf(b, "  #   arg %s { # %s\n", hclString(a.Name), comment)
	// Align the "=" as planlock plan fmt would.
	width := 0
	for _, l := range lines {
		k, _, _ := strings.Cut(l, " = ")
		width = max(width, len(k))
	}
	for _, l := range lines {
		k, v, _ := strings.Cut(l, " = ")
		fmt.Fprintf(b, "  #     %-*s = %s\n", width, k, v)
	}
	b.WriteString("  #   }\n")
}

func hclList(vals []any) (string, bool) {
	var parts []string
	for _, v := range vals {
		switch x := v.(type) {
		case string:
			parts = append(parts, hclString(x))
		case json.Number:
			parts = append(parts, x.String())
		case bool:
			parts = append(parts, strconv.FormatBool(x))
		default:
			return "", false
		}
	}
	return "[" + strings.Join(parts, ", ") + "]", true
}

// writeToolPin writes the tool_pin block of t's definition as the upstream
// sent it, each line after prefix; nothing when the definition has no digest.
func writeToolPin(b *bytes.Buffer, t Tool, prefix string) {
	digest, err := toolpin.Digest(t.Raw)
	if err != nil {
		fmt.Fprintf(b, "%s# (no tool_pin: %s)\n", prefix, oneline.Of(err.Error(), 0))
		return
	}
	def, err := toolpin.HCL(t.Raw, "  ")
	if err != nil {
		fmt.Fprintf(b, "%s# (no tool_pin: %s)\n", prefix, oneline.Of(err.Error(), 0))
		return
	}
	fmt.Fprintf(b, "%stool_pin {\n", prefix)
	fmt.Fprintf(b, "%s  digest      = %s\n", prefix, hclString(digest))
	fmt.Fprintf(b, "%s  description = %s\n", prefix, HCLText(t.Description))
	// The definition, so that the pull request summary (plan show) can show
	// the schemas the digest pins.
	fmt.Fprintf(b, "%s  definition  = %s\n", prefix, strings.ReplaceAll(def, "\n", "\n"+prefix))
	fmt.Fprintf(b, "%s}\n", prefix)
}

// Pins writes a tool_pin block for every tool, under a comment naming it
// (planlock tools --pins), to paste into the steps of a plan.
func Pins(tools []Tool) string {
	var b bytes.Buffer
	for i, t := range tools {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "# %s\n", oneline.Of(t.Name, 0))
		writeToolPin(&b, t, "")
	}
	return b.String()
}

// HCLText quotes any text as an HCL string literal that parses back to
// exactly it: only the escapes HCL knows (\n \r \t \" \\ \uNNNN
// \UNNNNNNNN), every other control or invisible character as \u, and
// template sequences escaped. (strconv.Quote writes \a or \x, which HCL
// does not read.)
func HCLText(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case (r == '$' || r == '%') && strings.HasPrefix(s[i+1:], "{"):
			b.WriteRune(r)
			b.WriteRune(r)
		case r > 0xffff && !unicode.IsPrint(r):
			fmt.Fprintf(&b, `\U%08x`, r)
		case !unicode.IsPrint(r) && r != ' ':
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// hclString quotes s as an HCL string literal; template sequences are escaped.
func hclString(s string) string {
	q := strconv.Quote(s)
	q = strings.ReplaceAll(q, "${", "$${")
	return strings.ReplaceAll(q, "%{", "%%{")
}

// MCPConfig is the JSON snippet that runs upstream behind planlock proxy for
// Claude Desktop, Cursor and Claude Code (their "mcpServers" format).
func MCPConfig(serverName, planlockPath, planPath string, extra []string, upstream []string) ([]byte, error) {
	args := append([]string{"proxy", "--plan", planPath}, extra...)
	if len(upstream) > 0 {
		args = append(append(args, "--"), upstream...)
	}
	cfg := map[string]any{"mcpServers": map[string]any{serverName: map[string]any{"command": planlockPath, "args": args}}}
	out, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}
