package boundedio

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	exact, over := write("exact", "12345"), write("over", "123456")
	tests := []struct {
		name, path, want, err string
	}{
		{"at the limit", exact, "12345", ""},
		{"over the limit", over, "", over + " is larger than 5 bytes"},
		{"endless device", "/dev/zero", "", "/dev/zero is larger than 5 bytes"},
		{"missing", filepath.Join(dir, "none"), "", "open " + filepath.Join(dir, "none") + ": no such file or directory"},
		{"a directory", dir, "", "read " + dir + ": is a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := ReadFile(tt.path, 5)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("got %q, %v; want error %q", b, err, tt.err)
				}
				return
			}
			if err != nil || string(b) != tt.want {
				t.Fatalf("got %q, %v", b, err)
			}
		})
	}
	if _, err := ReadFile(over, 5); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("%v is not ErrTooLarge", err)
	}
}

// slowZeros is an endless reader without a size, as a pipe is.
type slowZeros struct{ n int64 }

func (z *slowZeros) Read(p []byte) (int, error) {
	clear(p)
	z.n += int64(len(p))
	return len(p), nil
}

func TestReadAllStopsAfterTheLimit(t *testing.T) {
	z := &slowZeros{}
	_, err := ReadAll(z, "<stdin>", 1<<20)
	if err == nil || err.Error() != "<stdin> is larger than 1048576 bytes" {
		t.Fatalf("got %v", err)
	}
	if z.n > 2<<20 {
		t.Fatalf("read %d bytes for a limit of 1 MiB", z.n)
	}
}

func TestLineLimit(t *testing.T) {
	tests := []struct {
		name, in string
		lines    []string
		err      string
	}{
		{"short lines", "ab\ncd\n", []string{"ab", "cd"}, ""},
		{"at the limit", "abcd\nabcd", []string{"abcd", "abcd"}, ""},
		// A scanner hands on the part that was read before the error.
		{"second line too long", "ab\nabcde\n", []string{"ab", "abcd"}, "log: line 2 is longer than 4 bytes"},
		{"no newline at all", strings.Repeat("x", 100), []string{"xxxx"}, "log: line 1 is longer than 4 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := bufio.NewScanner(LineLimit(strings.NewReader(tt.in), "log", 4))
			var got []string
			for sc.Scan() {
				got = append(got, sc.Text())
			}
			err := sc.Err()
			if strings.Join(got, "|") != strings.Join(tt.lines, "|") || (err == nil) != (tt.err == "") || (err != nil && err.Error() != tt.err) {
				t.Fatalf("got %q, %v; want %q, %q", got, err, tt.lines, tt.err)
			}
		})
	}
	// Endless input without a newline ends after the limit.
	z := &slowZeros{}
	_, err := io.Copy(io.Discard, LineLimit(z, "/dev/zero", 1<<20))
	if !errors.Is(err, ErrTooLarge) || z.n > 2<<20 {
		t.Fatalf("got %v after %d bytes", err, z.n)
	}
}
