package ledger

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// OpenSeries opens the files of the one journal in dir, in chain order:
// its archived segments (<stem>.<first>-<last><ext>) in name order, then
// the journal itself (<stem><ext>) when it is there. A directory of
// archived segments only is one journal's when they share a stem.
//
// The journal is opened before its segments are listed, so that a live
// proxy's rotation cannot make the two disagree: a rotation in between
// archives the very file opened, and that segment (found by being the same
// file) and any newer ones are left out. The series is then the journal as
// opened and every segment before it, never a file twice or one missing.
// The caller closes the files.
func OpenSeries(dir string) ([]*os.File, error) {
	names, err := journalFiles(dir)
	if err != nil {
		return nil, err
	}
	journal, err := journalName(dir, names)
	if err != nil {
		return nil, err
	}
	if journal == "" {
		// Archived segments only: nothing writes to them.
		slices.Sort(names)
		return openAll(dir, names, nil)
	}
	live, err := os.Open(filepath.Join(dir, journal))
	if err != nil {
		return nil, err
	}
	liveInfo, err := live.Stat()
	if err != nil {
		live.Close()
		return nil, err
	}
	// Listed again, after the journal was opened: every segment older than
	// it is archived by now.
	if names, err = journalFiles(dir); err != nil {
		live.Close()
		return nil, err
	}
	var segs []string
	for _, n := range names {
		if _, _, ok := ParseSegmentName(journal, n); ok {
			segs = append(segs, n)
		}
	}
	slices.Sort(segs)
	files, err := openAll(dir, segs, liveInfo)
	if err != nil {
		live.Close()
		return nil, err
	}
	return append(files, live), nil
}

// openAll opens dir's files names in order, up to the first that is the
// same file as stop (when stop is set).
func openAll(dir string, names []string, stop os.FileInfo) ([]*os.File, error) {
	var files []*os.File
	for _, n := range names {
		f, err := os.Open(filepath.Join(dir, n))
		if err == nil && stop != nil {
			var fi os.FileInfo
			if fi, err = f.Stat(); err == nil && os.SameFile(fi, stop) {
				f.Close()
				break // the journal opened, archived since: it and newer segments are not in the series
			}
		}
		if err != nil {
			if f != nil {
				f.Close()
			}
			CloseFiles(files)
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// CloseFiles closes files opened for a series.
func CloseFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// journalFiles lists dir's regular *.jsonl files.
func journalFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".jsonl") {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// journalName is the one journal among names, a file that is not an
// archived segment; "" when names are the segments of one journal only
// (archived elsewhere). The segments of other journals are left out of
// the series.
func journalName(dir string, names []string) (string, error) {
	var journals []string
	of := map[string]bool{} // the journals segments belong to
	for _, n := range names {
		if j, ok := segmentOf(n); ok {
			of[j] = true
		} else {
			journals = append(journals, n)
		}
	}
	switch {
	case len(journals) == 1:
		return journals[0], nil
	case len(journals) > 1:
		return "", fmt.Errorf("%s holds the files of more than one audit log (%s): give the files", dir, strings.Join(journals, ", "))
	case len(of) == 1:
		return "", nil
	case len(of) == 0:
		return "", fmt.Errorf("%s: no audit log files (*.jsonl)", dir)
	}
	return "", fmt.Errorf("%s holds the archived segments of more than one audit log: give the files", dir)
}

// segmentOf reports whether name is an archived segment
// (<stem>.<first>-<last><ext>), and of which journal (<stem><ext>).
func segmentOf(name string) (journal string, ok bool) {
	ext := filepath.Ext(name)
	rest := strings.TrimSuffix(name, ext)
	i := strings.LastIndexByte(rest, '.')
	if i <= 0 {
		return "", false
	}
	journal = rest[:i] + ext
	_, _, ok = ParseSegmentName(journal, name)
	return journal, ok
}
