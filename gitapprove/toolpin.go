package gitapprove

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	"github.com/planlock/planlock/hclplan/toolpin"
)

// ToolPinChange asks a hold pull request to also update the plan's
// tool_pin of a tool to the definition the upstream lists now, so that
// merging it approves the new definition (the proxy lists the tool again
// once the merged plan is signed and loaded).
type ToolPinChange struct {
	Tool           string
	OldDigest      string
	OldDescription *string // the pinned description; nil when the pin gives none
	NewDigest      string
	NewDescription string
	// Definition is the new definition as canonical JSON (hclplan/toolpin).
	Definition []byte
	// OldDefinition is the pinned definition as canonical JSON, nil when
	// unknown; the body then shows the new definition whole.
	OldDefinition []byte
}

// updateToolPin sets digest, description and (when given) the recorded
// definition in the tool_pin block of every step of tool (steps of one tool
// pin the same definition).
func updateToolPin(src []byte, tool, digest, description string, definition []byte) ([]byte, error) {
	f, diags := hclwrite.ParseConfig(src, "plan.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		return nil, fmt.Errorf("parse plan: %w", diags)
	}
	var defTokens hclwrite.Tokens
	if definition != nil {
		heredoc, err := toolpin.HCL(definition, "      ")
		if err != nil {
			return nil, err
		}
		// The heredoc's tokens, as hclwrite reads them back.
		g, diags := hclwrite.ParseConfig([]byte("definition = "+heredoc+"\n"), "definition.hcl", hcl.InitialPos)
		if diags.HasErrors() {
			return nil, fmt.Errorf("write the definition: %w", diags)
		}
		defTokens = g.Body().GetAttribute("definition").Expr().BuildTokens(nil)
	}
	n := 0
	for _, pb := range f.Body().Blocks() {
		if pb.Type() != "plan" {
			continue
		}
		for _, sb := range pb.Body().Blocks() {
			if sb.Type() != "step" || stringAttr(sb.Body(), "tool") != tool {
				continue
			}
			for _, tp := range sb.Body().Blocks() {
				if tp.Type() != "tool_pin" {
					continue
				}
				// Replaced whole: a one-line block cannot take a second
				// attribute.
				sb.Body().RemoveBlock(tp)
				nb := sb.Body().AppendNewBlock("tool_pin", nil).Body()
				nb.SetAttributeValue("digest", cty.StringVal(digest))
				nb.SetAttributeValue("description", cty.StringVal(description))
				if defTokens != nil {
					nb.SetAttributeRaw("definition", defTokens)
				}
				n++
			}
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("no step of tool %q has a tool_pin", tool)
	}
	return hclwrite.Format(f.Bytes()), nil
}

// stringAttr is the value of a constant string attribute, "" otherwise.
func stringAttr(b *hclwrite.Body, name string) string {
	a := b.GetAttribute(name)
	if a == nil {
		return ""
	}
	e, diags := hclsyntax.ParseExpression(a.Expr().BuildTokens(nil).Bytes(), name, hcl.InitialPos)
	if diags.HasErrors() {
		return ""
	}
	v, vd := e.Value(nil)
	if vd.HasErrors() || v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
		return ""
	}
	return v.AsString()
}

// toolPinSection is the part of a hold body that shows the changed tool
// definition: both digests, the description as a line diff and the new
// definition. Text from the upstream is shown only inside fences it cannot
// close, with invisible characters quoted.
func toolPinSection(c *ToolPinChange, planPath string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n### Tool definition changed: %s\n\n", mdCode(clip(c.Tool, 200)))
	fmt.Fprintf(&b, "- **Pinned digest:** %s\n- **Digest now:** %s\n", mdCode(c.OldDigest), mdCode(c.NewDigest))
	fmt.Fprintf(&b, "- Merging updates the tool_pin of %s in %s to the new definition; the call itself is not run by this approval.\n", mdCode(clip(c.Tool, 200)), mdCode(planPath))
	old := "(the pin gives no description)"
	if c.OldDescription != nil {
		old = *c.OldDescription
	}
	d := lineDiff(clip(old, 8000), clip(c.NewDescription, 8000))
	fence := strings.Repeat("`", max(3, longestRun(d, '`')+1))
	fmt.Fprintf(&b, "\nDescription, pinned (-) and now (+):\n\n%sdiff\n%s%s\n", fence, d, fence)
	if c.OldDefinition != nil {
		// Canonical JSON has its keys sorted, so the indented forms line up
		// and the diff shows only what changed.
		d := lineDiff(clip(prettyJSON(c.OldDefinition), 20000), clip(prettyJSON(c.Definition), 20000))
		fence = strings.Repeat("`", max(3, longestRun(d, '`')+1))
		fmt.Fprintf(&b, "\nDefinition, pinned (-) and now (+), as the agent would read it:\n\n%sdiff\n%s%s\n", fence, d, fence)
		return b.String()
	}
	def := clip(quoteInvisible(prettyJSON(c.Definition)), 20000)
	fence = strings.Repeat("`", max(3, longestRun(def, '`')+1))
	b.WriteString("\nThe definition that matched the pin was not seen by this proxy, so only the pinned description is compared.\n")
	fmt.Fprintf(&b, "\nThe new definition, as the agent would read it:\n\n%sjson\n%s\n%s\n", fence, def, fence)
	return b.String()
}

// prettyJSON is canonical JSON indented by two spaces (as it is when it
// cannot be indented).
func prettyJSON(canon []byte) string {
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, canon, "", "  "); err != nil {
		return string(canon)
	}
	return pretty.String()
}

// lineDiff writes old and new line by line: common lines with "  ", removed
// with "- ", added with "+ " (longest common subsequence; long texts
// fall back to all removed, all added).
func lineDiff(old, new string) string {
	a, b := strings.Split(old, "\n"), strings.Split(new, "\n")
	var out strings.Builder
	line := func(prefix, s string) { out.WriteString(prefix + quoteInvisible(s) + "\n") }
	if len(a)*len(b) > 250000 {
		for _, s := range a {
			line("- ", s)
		}
		for _, s := range b {
			line("+ ", s)
		}
		return out.String()
	}
	// lcs[i][j] is the common length of a[i:] and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			line("  ", a[i])
			i, j = i+1, j+1
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			line("- ", a[i])
			i++
		default:
			line("+ ", b[j])
			j++
		}
	}
	return out.String()
}

// quoteInvisible shows every character a reader cannot see, or that
// reorders what they see, as a Go escape; the rest as it is.
func quoteInvisible(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == '\n' || (unicode.IsGraphic(r) && !unicode.Is(unicode.Cf, r) && (r == ' ' || !unicode.Is(unicode.Zs, r))) {
			b.WriteRune(r)
			continue
		}
		q := strconv.QuoteRuneToASCII(r)
		b.WriteString(q[1 : len(q)-1])
	}
	return b.String()
}
