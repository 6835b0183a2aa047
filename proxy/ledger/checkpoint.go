package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

const checkpointName = "checkpoint.json"

// checkpoint is the state as of a byte offset of the journal, written at a
// clean Close so that the next Open replays only what came after. It is a
// cache: when it does not match the journal it is ignored and the whole
// journal is replayed.
type checkpoint struct {
	Audit     string               `json:"audit"`
	Records   int                  `json:"records"`
	Head      string               `json:"head"`       // hash of record number Records
	Offset    int64                `json:"offset"`     // journal bytes covered
	LastStart int64                `json:"last_start"` // offset of the last covered line
	Plans     map[string]cpPlan    `json:"plans"`
	Holds     []*Hold              `json:"holds"` // creation order, stored state
	Newest    map[string]time.Time `json:"newest"`
}

type cpPlan struct {
	Current int      `json:"current"`
	Used    []int    `json:"used"`
	Done    []bool   `json:"done"`
	Held    []bool   `json:"held"`
	Leased  []int    `json:"leased,omitempty"`
	Names   []string `json:"names,omitempty"`
}

func (s *state) checkpoint() checkpoint {
	cp := checkpoint{Plans: map[string]cpPlan{}, Newest: s.newest}
	for d, p := range s.plans {
		cp.Plans[d] = cpPlan{Current: p.current, Used: p.used, Done: p.done, Held: p.held, Leased: p.leased, Names: p.names}
	}
	for _, id := range s.order {
		cp.Holds = append(cp.Holds, s.holds[id])
	}
	return cp
}

func (cp *checkpoint) state() *state {
	s := newState()
	for d, p := range cp.Plans {
		ps := &planState{current: p.Current, used: p.Used, done: p.Done, held: p.Held}
		n := max(len(ps.used), len(ps.done), len(ps.held), len(p.Leased), len(p.Names))
		// Keep the per-step slices the same length whatever the file says.
		ps.used, ps.done, ps.held = ps.used[:0:0], ps.done[:0:0], ps.held[:0:0]
		ps.grow(n - 1)
		copy(ps.used, p.Used)
		copy(ps.done, p.Done)
		copy(ps.held, p.Held)
		copy(ps.leased, p.Leased)
		copy(ps.names, p.Names)
		s.plans[d] = ps
	}
	for _, h := range cp.Holds {
		if h != nil && h.ID != "" {
			s.addHold(h)
		}
	}
	for n, t := range cp.Newest {
		s.newest[n] = t
	}
	return s
}

// encodeCheckpoint is the state as of the journal's end. Call with mu held,
// from the writer or after it stopped, when no record is queued.
func (l *Ledger) encodeCheckpoint() []byte {
	cp := l.st.checkpoint()
	cp.Audit, cp.Records, cp.Head = l.auditPath, int(l.seq), l.head
	cp.Offset, cp.LastStart = l.end.size, l.end.lastStart
	data, err := json.Marshal(cp)
	if err != nil {
		return nil // only plain data: cannot happen
	}
	return data
}

// writeCheckpoint replaces the checkpoint atomically.
func writeCheckpoint(dir string, data []byte) error {
	tmp := filepath.Join(dir, checkpointName+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, checkpointName)); err != nil {
		return err
	}
	return syncDir(dir)
}

// loadCheckpoint returns the checkpoint of dir if it belongs to this journal
// and its last record is still there, byte for byte, where it says.
func loadCheckpoint(dir, audit string, f *os.File) (*checkpoint, bool) {
	data, err := os.ReadFile(filepath.Join(dir, checkpointName))
	if err != nil {
		return nil, false
	}
	var cp checkpoint
	if err := json.Unmarshal(data, &cp); err != nil || cp.Audit != audit || cp.Records < 1 ||
		cp.LastStart < 0 || cp.Offset <= cp.LastStart || cp.Offset-cp.LastStart > 64<<20 {
		return nil, false
	}
	line := make([]byte, cp.Offset-cp.LastStart)
	if _, err := f.ReadAt(line, cp.LastStart); err != nil || line[len(line)-1] != '\n' {
		return nil, false
	}
	if cp.LastStart > 0 {
		// The covered part must end a line before the last record starts.
		var b [1]byte
		if _, err := f.ReadAt(b[:], cp.LastStart-1); err != nil || b[0] != '\n' {
			return nil, false
		}
	}
	body := line[:len(line)-1]
	if seq, _, ok := chainHeader(body); !ok || seq != uint64(cp.Records) || lineHash(body) != cp.Head {
		return nil, false
	}
	return &cp, true
}

// lineHash is the hash field of a well-formed line, or "" when its own hash
// does not hold.
func lineHash(line []byte) string {
	n := len(line)
	if n < hashSuffixLen+2 {
		return ""
	}
	body := line[:n-hashSuffixLen]
	want := string(line[n-64-2 : n-2])
	sum := sha256.Sum256(body)
	if hex.EncodeToString(sum[:]) != want {
		return ""
	}
	return want
}

// journalEnd is where the good records of a journal end.
type journalEnd struct {
	size      int64 // bytes of complete, verified records
	lastStart int64 // offset of the last record's line; -1 when there is none
}

// replayFile rebuilds the state from f, starting at the checkpoint when one
// fits. A torn last line comes back as a *VerifyError with Torn set.
func replayFile(dir, audit string, f *os.File) (*state, VerifyResult, journalEnd, error) {
	st := newState()
	from := VerifyResult{Head: genesis}
	end := journalEnd{lastStart: -1}
	if cp, ok := loadCheckpoint(dir, audit, f); ok {
		st = cp.state()
		from = VerifyResult{Records: cp.Records, Head: cp.Head}
		end = journalEnd{size: cp.Offset, lastStart: cp.LastStart}
	}
	if _, err := f.Seek(end.size, io.SeekStart); err != nil {
		return nil, from, end, fmt.Errorf("read %s: %w", audit, err)
	}
	res, good, last, err := scanFrom(f, from, st.apply)
	if last >= 0 {
		end.lastStart = end.size + last
	}
	end.size += good
	return st, res, end, err
}

// removeCheckpoint drops a checkpoint that no longer matches, so it cannot
// be mistaken for the state later. A missing one is fine.
func removeCheckpoint(dir string) error {
	err := os.Remove(filepath.Join(dir, checkpointName))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
