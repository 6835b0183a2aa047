package ledger

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rotatedDir writes a journal rotated into several files and returns its
// directory and the files in chain order.
func rotatedDir(t *testing.T) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir, RotateSize: 1, SyncEachCall: true})
	reserveCalls(t, l, 4, 10)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, seriesOf(t, l.AuditPath())
}

func names(files []*os.File) []string {
	var out []string
	for _, f := range files {
		out = append(out, filepath.Base(f.Name()))
	}
	return out
}

func bases(paths []string) []string {
	var out []string
	for _, p := range paths {
		out = append(out, filepath.Base(p))
	}
	return out
}

func TestOpenSeries(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string, files []string) (want []string)
		wantErr string
	}{
		{"rotated journal", func(t *testing.T, dir string, files []string) []string {
			return bases(files)
		}, ""},
		{
			// A rotation stopped (or seen) between archiving the journal's
			// name and renaming the next file over it: the journal and its
			// archived name are one file, read once, as the journal.
			"journal linked, not yet renamed", func(t *testing.T, dir string, files []string) []string {
				journal := files[len(files)-1]
				res := verifyPath(t, journal)
				if err := os.Link(journal, filepath.Join(dir, SegmentName(journal, res.First, uint64(res.Records)))); err != nil {
					t.Fatal(err)
				}
				return bases(files)
			}, "",
		},
		{"archived segments only", func(t *testing.T, dir string, files []string) []string {
			if err := os.Remove(files[len(files)-1]); err != nil {
				t.Fatal(err)
			}
			return bases(files[:len(files)-1])
		}, ""},
		{"a second journal", func(t *testing.T, dir string, files []string) []string {
			if err := os.WriteFile(filepath.Join(dir, "other.jsonl"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return nil
		}, "more than one audit log (audit.jsonl, other.jsonl)"},
		{"two journals' segments only", func(t *testing.T, dir string, files []string) []string {
			if err := os.Remove(files[len(files)-1]); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(files[0], filepath.Join(dir, SegmentName("other.jsonl", 1, 2))); err != nil {
				t.Fatal(err)
			}
			return nil
		}, "archived segments of more than one audit log"},
		{"no journal files", func(t *testing.T, dir string, files []string) []string {
			for _, f := range files {
				if err := os.Remove(f); err != nil {
					t.Fatal(err)
				}
			}
			return nil
		}, "no audit log files"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, files := rotatedDir(t)
			want := tt.setup(t, dir, files)
			got, err := OpenSeries(dir)
			defer CloseFiles(got)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("OpenSeries: %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || strings.Join(names(got), " ") != strings.Join(want, " ") {
				t.Fatalf("OpenSeries = %v, %v; want %v", names(got), err, want)
			}
			if _, res, err := VerifyFiles(got, nil); err != nil || res.First != 1 {
				t.Fatalf("VerifyFiles: %+v, %v", res, err)
			}
		})
	}
}

func verifyPath(t *testing.T, path string) VerifyResult {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := Verify(f)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// VerifyLive reads a torn last line again: one a writer completes in the
// meantime verifies; one that stays torn (a crash) is still reported.
func TestVerifyLiveRereadsTornLine(t *testing.T) {
	_, files := rotatedDir(t)
	journal := files[len(files)-1]
	whole, err := os.ReadFile(journal)
	if err != nil {
		t.Fatal(err)
	}
	cut := len(whole) - 7 // inside the last record
	if err := os.WriteFile(journal, whole[:cut], 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(journal)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	waits := 0
	if _, err := verifyLive(f, nil, func() { waits++ }, nil); !isTorn(err) || waits != tornRereads {
		t.Fatalf("VerifyLive of a torn journal: %v after %d waits, want torn after %d", err, waits, tornRereads)
	}
	// The rest of the record written while VerifyLive waits.
	waits = 0
	res, err := verifyLive(f, nil, func() {
		if waits++; waits == 2 {
			appendFile(t, journal, whole[cut:])
		}
	}, nil)
	if err != nil || waits != 2 || res.Head != verifyPath(t, journal).Head {
		t.Fatalf("VerifyLive while the record is completed: %+v, %v after %d waits", res, err, waits)
	}
}

func appendFile(t *testing.T, path string, b []byte) {
	t.Helper()
	w, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
}
