package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
)

// journal6 writes a real six-record journal and returns its lines (with newlines).
func journal6(t *testing.T) [][]byte {
	t.Helper()
	l := openT(t, Options{Dir: t.TempDir()})
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		tk, err := l.Reserve(ctx, Reservation{Call: call("lookup", 0, "get_order", `{"order_id":"4711"}`), MaxCalls: 3})
		if err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			if err := l.Complete(ctx, tk, Outcome{OK: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := l.Block(ctx, call("lookup", 0, "get_order", `{"order_id":"4711"}`), "max_calls"); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(l.AuditPath())
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	lines = lines[:len(lines)-1] // the empty rest after the last newline
	if len(lines) != 6 {
		t.Fatalf("%d lines, want 6", len(lines))
	}
	return lines
}

// rehash recomputes a line's own hash after an edit, as a careful forger would.
func rehash(line []byte) []byte {
	line = bytes.TrimSuffix(line, []byte("\n"))
	body := line[:len(line)-hashSuffixLen]
	sum := sha256.Sum256(body)
	out := append([]byte(nil), body...)
	out = append(out, hashField...)
	out = append(out, hex.EncodeToString(sum[:])...)
	return append(out, "\"}\n"...)
}

func TestVerifyTamperMatrix(t *testing.T) {
	tests := []struct {
		name     string
		tamper   func(l [][]byte) [][]byte
		wantLine int
		want     string
		torn     bool
	}{
		{"edit a field", func(l [][]byte) [][]byte {
			l[2] = bytes.Replace(l[2], []byte(`"used":2`), []byte(`"used":1`), 1)
			return l
		}, 3, "record hash does not match its content", false},
		{"edit a field and recompute its hash", func(l [][]byte) [][]byte {
			l[2] = rehash(bytes.Replace(l[2], []byte(`"used":2`), []byte(`"used":1`), 1))
			return l
		}, 4, "prev does not match", false},
		{"edit the last line", func(l [][]byte) [][]byte {
			l[5] = bytes.Replace(l[5], []byte(`max_calls`), []byte(`whatever`), 1)
			return l
		}, 6, "record hash does not match", false},
		{"delete a line", func(l [][]byte) [][]byte {
			return append(l[:2:2], l[3:]...)
		}, 3, "seq 4 where 3 was expected", false},
		{"delete the first line", func(l [][]byte) [][]byte { return l[1:] }, 1, "seq 2 where 1 was expected", false},
		{"swap two lines", func(l [][]byte) [][]byte {
			l[1], l[2] = l[2], l[1]
			return l
		}, 2, "seq 3 where 2 was expected", false},
		{"insert a copied line", func(l [][]byte) [][]byte {
			return append(l[:4:4], append([][]byte{l[1]}, l[4:]...)...)
		}, 5, "seq 2 where 5 was expected", false},
		{"insert a forged line with its own hash", func(l [][]byte) [][]byte {
			forged := rehash(bytes.Replace(l[3], []byte(`"seq":4`), []byte(`"seq":5`), 1))
			return append(l[:4:4], append([][]byte{forged}, l[4:]...)...)
		}, 5, "prev does not match", false},
		{"truncate mid-line", func(l [][]byte) [][]byte {
			l[5] = l[5][:40]
			return l
		}, 6, "torn: the last line is incomplete", true},
		{"non-JSON line", func(l [][]byte) [][]byte {
			l[3] = []byte("hello world\n")
			return l
		}, 4, "not a JSON record", false},
		{"JSON but not a record", func(l [][]byte) [][]byte {
			l[3] = []byte(`{"seq":4,"tool":"x"}` + "\n")
			return l
		}, 4, `no "hash" field`, false},
		{"empty line", func(l [][]byte) [][]byte {
			return append(l[:3:3], append([][]byte{[]byte("\n")}, l[3:]...)...)
		}, 4, "empty line", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lines := tt.tamper(journal6(t))
			_, err := Verify(bytes.NewReader(bytes.Join(lines, nil)))
			var ve *VerifyError
			if !errors.As(err, &ve) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Verify: %v, want a *VerifyError", err)
			}
			if ve.Line != tt.wantLine || ve.Torn != tt.torn || !strings.Contains(ve.Reason, tt.want) {
				t.Fatalf("got %q (torn %v), want line %d with %q (torn %v)", err, ve.Torn, tt.wantLine, tt.want, tt.torn)
			}
		})
	}
}

func TestVerifyGood(t *testing.T) {
	lines := journal6(t)
	res, err := Verify(bytes.NewReader(bytes.Join(lines, nil)))
	if err != nil {
		t.Fatal(err)
	}
	last := bytes.TrimSuffix(lines[5], []byte("\n"))
	if res.Records != 6 || res.Head != string(last[len(last)-66:len(last)-2]) {
		t.Fatalf("result %+v", res)
	}
	res, err = Verify(strings.NewReader(""))
	if err != nil || res.Records != 0 || res.Head != genesis {
		t.Fatalf("empty journal: %+v %v", res, err)
	}
}

func TestVerifyLongLine(t *testing.T) {
	l := openT(t, Options{Dir: t.TempDir()})
	big := `{"body":"` + strings.Repeat("x", 300_000) + `"}`
	if _, err := l.Reserve(context.Background(), Reservation{Call: call("a", 0, "t", big), MaxCalls: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Reserve(context.Background(), Reservation{Call: call("a", 0, "t", `{}`), MaxCalls: 2}); err != nil {
		t.Fatal(err)
	}
	recs := readRecordsAfterClose(t, l)
	if len(recs) != 2 || len(recs[0].Args) != len(big) {
		t.Fatalf("long line: %d records", len(recs))
	}
}
