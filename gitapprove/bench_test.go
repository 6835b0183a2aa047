package gitapprove

import (
	"fmt"
	"testing"
)

func BenchmarkWriteHold(b *testing.B) {
	h := sampleHold()
	for b.Loop() {
		if _, err := WriteHold(h); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseHold(b *testing.B) {
	src, err := WriteHold(sampleHold())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if _, err := ParseHold(src); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCommitFiles measures building a commit (blob, trees, commit)
// with go-git in a repository of 1000 files in 10 directories.
func BenchmarkCommitFiles(b *testing.B) {
	files := map[string]string{}
	for i := 0; i < 1000; i++ {
		files[fmt.Sprintf("dir%d/f%d.txt", i%10, i)] = fmt.Sprint(i)
	}
	f := newFixture(b, "main", files)
	r := openRepo(b, f.work)
	if err := r.Fetch(b.Context()); err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		i++
		_, err := r.CommitFiles(CommitRequest{Branch: "bench", Base: "main", Files: map[string][]byte{"dir3/plans/p.hcl": []byte(fmt.Sprint(i))}, Message: "m"})
		if err != nil {
			b.Fatal(err)
		}
	}
}
