package doctest

import (
	"strings"
	"testing"
)

func TestExtract(t *testing.T) {
	md := "# Title\n" +
		"```sh\n" + // 2
		"# a comment\n" +
		"planlock plan fmt x   # trailing comment\n" + // 4
		"\n" +
		"planlock verify a \\\n" + // 6
		"  --key k\n" +
		"```\n" +
		"```hcl\nplan \"x\" {}\n```\n" + // 9-11
		"<!-- doctest: skip needs GitHub -->\n" + // 12
		"```sh\n" +
		"planlock approve p\n" + // 14
		"```\n" +
		"Edit it.\n" +
		"<!-- doctest: run sed -i s/a/b/ p -->\n" + // 17
		"```bash\n" +
		"echo ok\n" + // 19
		"```\n"
	steps, err := Extract("r.md", []byte(md))
	if err != nil {
		t.Fatal(err)
	}
	want := []Step{
		{File: "r.md", Line: 4, Text: "planlock plan fmt x   # trailing comment"},
		{File: "r.md", Line: 6, Text: "planlock verify a \\\n  --key k"},
		{File: "r.md", Line: 14, Text: "planlock approve p", Skip: "needs GitHub"},
		{File: "r.md", Line: 17, Text: "sed -i s/a/b/ p", Hidden: true},
		{File: "r.md", Line: 19, Text: "echo ok"},
	}
	if len(steps) != len(want) {
		t.Fatalf("got %d steps %+v, want %d", len(steps), steps, len(want))
	}
	for i := range want {
		if steps[i] != want[i] {
			t.Errorf("step %d = %+v, want %+v", i, steps[i], want[i])
		}
	}
}

// Nothing is skipped silently: every malformed annotation is an error.
func TestExtractErrors(t *testing.T) {
	tests := []struct{ name, md, want string }{
		{"skip without reason", "<!-- doctest: skip -->\n```sh\nx\n```\n", "needs a reason"},
		{"skip before prose", "<!-- doctest: skip r -->\ntext\n```sh\nx\n```\n", "not followed by a sh block"},
		{"skip before hcl", "<!-- doctest: skip r -->\n```hcl\nx\n```\n", "not followed by a sh block"},
		{"skip at the end", "<!-- doctest: skip r -->\n", "not followed by a sh block"},
		{"typo", "<!-- doctest: skp r -->\n```sh\nx\n```\n", `unknown doctest directive "skp"`},
		{"run without command", "<!-- doctest: run -->\n", "needs a command"},
		{"unclosed comment", "<!-- doctest: skip r\n```sh\nx\n```\n", "end with -->"},
		{"unclosed block", "```sh\nx\n", "not closed"},
		{"dangling backslash", "```sh\nx \\\n```\n", "ends with a backslash"},
		{"unclosed here-document", "```sh\ncat <<EOF\nx\n```\n", "here-document <<EOF is not closed"},
		{"here-document closed by another word", "```sh\ncat <<'EOF'\nx\nEND\n```\n", "here-document <<EOF is not closed"},
		{"console", "```console\n$ x\n```\n", "use ```sh"},
		{"unlabelled command", "```\nplanlock plan fmt\n```\n", "label it ```sh"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Extract("r.md", []byte(tt.md))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

// A here-document is part of its command: its body lines (blank lines and
// "#" lines included) are not commands of their own.
func TestExtractHereDoc(t *testing.T) {
	tests := []struct {
		name, block string
		want        []string // the steps' texts
	}{
		{"unquoted", "cat > p.hcl <<EOF\nplan \"x\" {\n\n  # a comment\n  goal = \"$HOME\"\n}\nEOF\nplanlock plan fmt p.hcl\n",
			[]string{"cat > p.hcl <<EOF\nplan \"x\" {\n\n  # a comment\n  goal = \"$HOME\"\n}\nEOF", "planlock plan fmt p.hcl"}},
		{"quoted", "cat <<'END' > a\nx \\\nEND\necho b\n", []string{"cat <<'END' > a\nx \\\nEND", "echo b"}},
		{"double quoted, spaced", "cat << \"END\"\nx\nEND\n", []string{"cat << \"END\"\nx\nEND"}},
		{"tabs stripped", "cat <<-EOF\n\tx\n\tEOF\necho b\n", []string{"cat <<-EOF\n\tx\n\tEOF", "echo b"}},
		{"indented delimiter is body without <<-", "cat <<EOF\n  EOF\nEOF\n", []string{"cat <<EOF\n  EOF\nEOF"}},
		{"two in one command", "paste /dev/fd/3 3<<A - <<B\na\nA\nb\nB\necho c\n", []string{"paste /dev/fd/3 3<<A - <<B\na\nA\nb\nB", "echo c"}},
		{"after a continuation", "planlock x \\\n  --y <<EOF\nz\nEOF\n", []string{"planlock x \\\n  --y <<EOF\nz\nEOF"}},
		{"here-string is not one", "cat <<<word\necho b\n", []string{"cat <<<word", "echo b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			steps, err := Extract("r.md", []byte("```sh\n"+tt.block+"```\n"))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range steps {
				got = append(got, s.Text)
			}
			if strings.Join(got, "\n--\n") != strings.Join(tt.want, "\n--\n") {
				t.Errorf("steps = %q, want %q", got, tt.want)
			}
		})
	}
}
