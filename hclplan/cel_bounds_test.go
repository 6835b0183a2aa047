package hclplan

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// nest wraps v in depth arrays.
func nest(v any, depth int) any {
	for range depth {
		v = []any{v}
	}
	return v
}

func objectOf(n int, val func(i int) any) map[string]any {
	m := make(map[string]any, n)
	for i := range n {
		m[fmt.Sprintf("k%d", i)] = val(i)
	}
	return m
}

func listOf(n int, val any) []any {
	l := make([]any, n)
	for i := range l {
		l[i] = val
	}
	return l
}

// Every value an expression reads is bounded before the expression runs:
// by the plan's max_length, max_items and closed field blocks, or by the
// documented defaults the cost estimate assumes. A value beyond them is
// refused with a bounds reason, and CEL never sees it.
func TestCheckCELBoundsInputBeforeEval(t *testing.T) {
	const splitCheck = `arg "path" { any = true }
check {
  expr = "args.path.split('/').size() <= 64"
}`
	const listCheck = `arg "l" { any = true }
check {
  expr = "args.l.all(x, x != '')"
}`
	tests := []struct {
		name string
		body string
		args map[string]any
		want string // "" passes; else a substring of the refusal
	}{
		{"string at the default bound passes", splitCheck, map[string]any{"path": strings.Repeat("a", defaultStringHint)}, ""},
		{"string over the default bound", splitCheck, map[string]any{"path": strings.Repeat("/", 2<<20)}, `argument "path" has 2097152 characters, more than the 10000 an expression may read`},
		{"one character over", splitCheck, map[string]any{"path": strings.Repeat("a", defaultStringHint+1)}, "has 10001 characters, more than the 10000"},
		{"multi-byte characters count as characters", splitCheck, map[string]any{"path": strings.Repeat("é", defaultStringHint)}, ""},
		{"list at the default bound passes", listCheck, map[string]any{"l": listOf(defaultListHint, "x")}, ""},
		{"list over the default bound", listCheck, map[string]any{"l": listOf(defaultListHint+1, "x")}, `argument "l" has 1001 items, more than the 1000 an expression may read`},
		{"long string inside a list", listCheck, map[string]any{"l": []any{"a", strings.Repeat("b", 20_000)}}, `argument "l"[1] has 20000 characters`},
		{"object over the default bound", `arg "o" { any = true }
check { expr = "size(args.o) > 0" }`, map[string]any{"o": objectOf(defaultListHint+1, func(int) any { return 1 })}, `argument "o" has 1001 keys, more than the 1000`},
		{"long key", `arg "o" { any = true }
check { expr = "size(args.o) > 0" }`, map[string]any{"o": map[string]any{strings.Repeat("k", 20_000): 1}}, "key of 20000 characters, more than the 10000"},
		{"too deep", `arg "o" { any = true }
check { expr = "size(args.o) > 0" }`, map[string]any{"o": nest("x", maxExprDepth+1)}, fmt.Sprintf("nests deeper than %d levels", maxExprDepth)},
		{"deep but within the bound", `arg "o" { any = true }
check { expr = "size(args.o) > 0" }`, map[string]any{"o": nest("x", maxExprDepth-1)}, ""},
		{"declared max_length above the default is the bound", `arg "path" { max_length = 50000 }
check { expr = "args.path.size() > 0" }`, map[string]any{"path": strings.Repeat("a", 50_000)}, ""},
		{"self expr on an arg without max_items", `arg "l" {
  items { any = true }
  expr = "self.all(x, x != '')"
}`, map[string]any{"l": listOf(5000, "x")}, `argument "l" has 5000 items, more than the 1000`},
		{"self expr on a field of an open object", `arg "o" {
  field "a" { eq = "x" }
  any_other_fields = true
  expr = "self.all(k, k != '')"
}`, map[string]any{"o": map[string]any{"a": "x", "b": strings.Repeat("z", 30_000)}}, `argument "o".b has 30000 characters`},
		{"an argument the check does not read is not bounded", `arg "path" { any = true }
arg "content" { any = true }
check { expr = "args.path.startsWith('/')" }`, map[string]any{"path": "/a", "content": strings.Repeat("x", 1<<20)}, ""},
		{"read by a constant index", `arg "path" { any = true }
arg "content" { any = true }
check { expr = "args['content'].size() > 0" }`, map[string]any{"path": "/a", "content": strings.Repeat("x", 1<<20)}, `argument "content" has 1048576 characters`},
		{"presence test reads it", `arg "path" { any = true }
arg "content" {
  any      = true
  optional = true
}
check { expr = "!has(args.content) || args.path != ''" }`, map[string]any{"path": "/a", "content": listOf(5000, 1)}, `argument "content" has 5000 items`},
		{"args used whole bounds every argument", `arg "path" { any = true }
arg "content" { any = true }
check { expr = "args.exists(k, k == 'path')" }`, map[string]any{"path": "/a", "content": strings.Repeat("x", 1<<20)}, `argument "content" has 1048576 characters`},
		{"size of args bounds every argument", `arg "path" { any = true }
arg "content" { any = true }
check { expr = "size(args) == 2" }`, map[string]any{"path": "/a", "content": []any{strings.Repeat("x", 20_000)}}, `argument "content"[0] has 20000 characters`},
		{"items expr", `arg "l" {
  max_items = 3
  items { expr = "self.split(',').size() < 5" }
}`, map[string]any{"l": []any{"a", strings.Repeat(",", 1<<20)}}, `argument "l"[1] has 1048576 characters`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := stepFrom(t, tt.body)
			err := s.Check(tt.args)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Fatalf("Check\n got: %.300s\nwant: %s", got, tt.want)
			}
		})
	}
}

// The reproduction: a 15 MiB argument against a natural split check is
// refused before CEL runs, so the call allocates a small fraction of its
// size instead of tens of times it.
func TestCheckCELHugeSplitAllocatesLittle(t *testing.T) {
	s := stepFrom(t, `arg "path" { any = true }
check {
  expr    = "args.path.split('/').size() <= 64"
  message = "at most 64 path segments"
}`)
	args := map[string]any{"path": strings.Repeat("/", 15<<20)}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err := s.Check(args)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "more than the 10000 an expression may read") {
		t.Fatalf("Check = %.200v, want the bounds refusal", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Fatalf("Check of a 15 MiB argument allocated %d bytes, want under 1 MiB", alloc)
	}
}
