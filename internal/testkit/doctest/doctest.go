// Package doctest extracts the shell commands of Markdown documents, so that
// a test can run every command a reader is told to type.
//
// Every ```sh block is run, one logical command (backslash continuations
// joined, a here-document kept with its command up to its delimiter line)
// at a time, in document order. A block that cannot run in a
// sandbox says so, with a reason a reviewer can judge, in an HTML comment
// on the line before it:
//
//	<!-- doctest: skip needs a GitHub token -->
//
// A step the reader does by hand (an edit) can be given to the test as a
// hidden command, where the reader would do it:
//
//	<!-- doctest: run sed -i s/a/b/ plans/x.hcl -->
//
// Any other "doctest:" comment is an error, so a typo never skips silently,
// and so is a planlock command in a code block without a language (label a
// synopsis ```text).
package doctest

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strings"
)

// Step is one command of a document.
type Step struct {
	File string
	Line int    // 1-based line of the command's first line
	Text string // the command; continuation and here-document lines joined with "\n"
	// Skip is the reason given for not running it; "" means run it.
	Skip string
	// Hidden marks a "doctest: run" command, not shown to the reader.
	Hidden bool
}

func (s Step) String() string { return fmt.Sprintf("%s:%d", s.File, s.Line) }

const directive = "<!-- doctest:"

// heredoc matches a here-document operator (<<WORD, <<'WORD', <<"WORD",
// <<-WORD), not a here-string (<<<).
var heredoc = regexp.MustCompile(`(?:^|[^<])<<(-?)[ \t]*(?:'(\w+)'|"(\w+)"|(\w+))`)

// hereDoc is a here-document whose body is being read.
type hereDoc struct {
	delim    string
	stripTab bool // <<- : the delimiter line may be indented with tabs
}

// hereDocs returns the here-documents a command line opens, in order.
func hereDocs(line string) []hereDoc {
	var docs []hereDoc
	for _, m := range heredoc.FindAllStringSubmatch(line, -1) {
		docs = append(docs, hereDoc{delim: m[2] + m[3] + m[4], stripTab: m[1] == "-"})
	}
	return docs
}

// Extract returns the steps of a Markdown document named file.
func Extract(file string, md []byte) ([]Step, error) {
	var steps []Step
	var skip string // the reason of a skip comment waiting for its block
	skipLine := 0
	sc := bufio.NewScanner(bytes.NewReader(md))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	line := 0
	var fence string      // the open fence ("```" or "~~~"), "" outside a block
	inSh := false         // the open block is a shell block
	plain := false        // the open block has no language
	var cmd []string      // the logical command being read
	cmdLine := 0          // where it started
	var pending []hereDoc // here-documents of cmd whose body is being read
	blockSkip := ""       // the skip reason of the open block
	flush := func() {
		if len(cmd) == 0 {
			return
		}
		steps = append(steps, Step{File: file, Line: cmdLine, Text: strings.Join(cmd, "\n"), Skip: blockSkip})
		cmd = nil
	}
	for sc.Scan() {
		line++
		text := sc.Text()
		trimmed := strings.TrimSpace(text)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				if inSh {
					if len(pending) > 0 {
						return nil, fmt.Errorf("%s:%d: the here-document <<%s is not closed (no %s line before the end of the block)", file, cmdLine, pending[0].delim, pending[0].delim)
					}
					if len(cmd) > 0 {
						return nil, fmt.Errorf("%s:%d: the command ends with a backslash", file, cmdLine)
					}
				}
				fence, inSh = "", false
				continue
			}
			if !inSh {
				if plain && strings.HasPrefix(trimmed, "planlock ") {
					return nil, fmt.Errorf("%s:%d: a planlock command in an unlabelled code block: label it ```sh (it runs as a test) or ```text (a synopsis)", file, line)
				}
				continue
			}
			if len(pending) > 0 {
				// A body line, kept verbatim; the delimiter line ends it.
				cmd = append(cmd, text)
				end := text
				if pending[0].stripTab {
					end = strings.TrimLeft(end, "\t")
				}
				if end == pending[0].delim {
					if pending = pending[1:]; len(pending) == 0 {
						flush()
					}
				}
				continue
			}
			if len(cmd) == 0 {
				if trimmed == "" || strings.HasPrefix(trimmed, "#") {
					continue
				}
				cmdLine = line
			}
			cmd = append(cmd, text)
			if pending = hereDocs(text); len(pending) > 0 {
				continue
			}
			if !strings.HasSuffix(text, "\\") {
				flush()
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			info := strings.TrimSpace(strings.TrimLeft(trimmed, fence[:1]))
			inSh = info == "sh" || info == "bash" || info == "shell" || info == "console"
			plain = info == ""
			if info == "console" {
				return nil, fmt.Errorf("%s:%d: use ```sh for commands (```console mixes in output)", file, line)
			}
			blockSkip = ""
			if inSh {
				blockSkip, skip = skip, ""
			} else if skip != "" {
				return nil, fmt.Errorf("%s:%d: doctest skip is not followed by a sh block", file, skipLine)
			}
			continue
		}
		if strings.HasPrefix(trimmed, directive) {
			body, ok := strings.CutSuffix(strings.TrimPrefix(trimmed, directive), "-->")
			if !ok {
				return nil, fmt.Errorf("%s:%d: a doctest comment must fit on one line and end with -->", file, line)
			}
			verb, arg, _ := strings.Cut(strings.TrimSpace(body), " ")
			arg = strings.TrimSpace(arg)
			switch verb {
			case "skip":
				if arg == "" {
					return nil, fmt.Errorf("%s:%d: doctest skip needs a reason", file, line)
				}
				if skip != "" {
					return nil, fmt.Errorf("%s:%d: doctest skip is not followed by a sh block", file, skipLine)
				}
				skip, skipLine = arg, line
			case "run":
				if arg == "" {
					return nil, fmt.Errorf("%s:%d: doctest run needs a command", file, line)
				}
				steps = append(steps, Step{File: file, Line: line, Text: arg, Hidden: true})
			default:
				return nil, fmt.Errorf("%s:%d: unknown doctest directive %q (skip REASON or run COMMAND)", file, line, verb)
			}
			continue
		}
		if skip != "" && trimmed != "" {
			return nil, fmt.Errorf("%s:%d: doctest skip is not followed by a sh block", file, skipLine)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if fence != "" {
		return nil, fmt.Errorf("%s: a code block is not closed", file)
	}
	if skip != "" {
		return nil, fmt.Errorf("%s:%d: doctest skip is not followed by a sh block", file, skipLine)
	}
	return steps, nil
}
