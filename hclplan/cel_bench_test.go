package hclplan

import (
	"runtime"
	"strings"
	"testing"
)

// The cost CEL adds to a call: compare BenchmarkCheckRefundNoCEL with
// BenchmarkCheckRefundCEL (same arguments, plus one step check).
const benchRefundArgs = `arg "order_id" { eq = "4711" }
arg "amount" {
  min = 1
  max = 300
}
arg "currency" { enum = ["EUR", "USD"] }`

func benchCheck(b *testing.B, body, args string) {
	s := stepFrom(b, body)
	m := decode(b, args)
	if err := s.Check(m); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := s.Check(m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckRefundNoCEL(b *testing.B) {
	benchCheck(b, benchRefundArgs, `{"order_id": "4711", "amount": 30, "currency": "USD"}`)
}

func BenchmarkCheckRefundCEL(b *testing.B) {
	benchCheck(b, benchRefundArgs+`
check {
  expr    = "args.amount <= 30 || args.currency == 'EUR'"
  message = "above 30 only in EUR"
}`, `{"order_id": "4711", "amount": 30, "currency": "USD"}`)
}

func BenchmarkCheckPathsNoCEL(b *testing.B) {
	benchCheck(b, `arg "paths" {
  max_items = 5
  items { pattern = "/srv/docs/.+" }
}`, `{"paths": ["/srv/docs/a.md", "/srv/docs/b.md", "/srv/docs/c/d.md"]}`)
}

func BenchmarkCheckPathsCEL(b *testing.B) {
	benchCheck(b, `arg "paths" {
  max_items = 5
  items { pattern = "/srv/docs/.+" }
  expr    = "self.all(p, p.startsWith('/srv/docs/') && !p.contains('..'))"
  message = "paths must stay inside /srv/docs"
}`, `{"paths": ["/srv/docs/a.md", "/srv/docs/b.md", "/srv/docs/c/d.md"]}`)
}

// The largest calls the input bounds allow, each against an expression
// whose estimated cost validate still accepts: what one evaluation can cost
// at most. bytes-alloc/call is everything the call allocates (an upper
// bound of the heap it adds at its peak); input-bytes is the size of the
// argument the expression reads.
func BenchmarkCELLargestAllowedCall(b *testing.B) {
	maxString := strings.Repeat("/", defaultStringHint)
	benches := []struct {
		name, body string
		args       map[string]any
		input      int
	}{
		{"split", `arg "path" { any = true }
check { expr = "args.path.split('/').size() <= 64" }`, map[string]any{"path": maxString}, defaultStringHint},
		{"split-every-char", `arg "path" { any = true }
check { expr = "args.path.split('').size() <= 64" }`, map[string]any{"path": maxString}, defaultStringHint},
		{"replace", `arg "path" { any = true }
check { expr = "args.path.replace('/', '//').size() <= 64" }`, map[string]any{"path": maxString}, defaultStringHint},
		// The most memory one evaluation can hold: 1000 lists of 801 parts
		// alive at once, at the largest max_length validate accepts for it.
		{"retained-splits", `arg "l" {
  max_items = 1000
  items { max_length = 800 }
  expr = "self.map(x, x.split('')).size() > 0"
}`, map[string]any{"l": listOf(1000, maxString[:800])}, 1000 * 800},
		{"list-all", `arg "l" { any = true }
check { expr = "args.l.all(x, x.startsWith('/'))" }`, map[string]any{"l": listOf(defaultListHint, maxString[:100])}, defaultListHint * 100},
	}
	for _, bb := range benches {
		b.Run(bb.name, func(b *testing.B) {
			s := stepFrom(b, bb.body)
			_ = s.Check(bb.args) // refused or not: the cost is what is measured
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			n := 0
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				_ = s.Check(bb.args)
				n++
			}
			b.StopTimer()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(n), "bytes-alloc/call")
			b.ReportMetric(float64(bb.input), "input-bytes")
		})
	}
}
