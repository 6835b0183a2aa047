package hclplan

import "testing"

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
