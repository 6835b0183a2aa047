package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Records that widen what may be forwarded are not taken on the chain's
// word: the chain shows an edit, but anyone who can append to the journal
// (or insert rows into a shared state) can compute a valid next record. So
// a record that vouches for a whole state (checkpoint, segment) must equal
// the state replay computes from the records before it, and an approval
// read back from the journal is used only after this process verified the
// signed approval again (state.unverified). docs/audit-log.md has the table
// of every record type.

// fullDigest is the sha256 of the state as a checkpoint or segment record
// vouches for it (prepareCheckpointLocked, prepareSegmentLocked).
func fullDigest(s *state) string {
	b, err := json.Marshal(s.checkpoint())
	if err != nil {
		return "" // only plain data: cannot happen
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// rederive checks a record that vouches for the state against s, the state
// of the records before it; whole says s holds every record before it (the
// replay started at the journal's first record, at a segment or checkpoint
// already re-derived, or at one the anchor covers). It returns why the
// record is refused ("" to apply it).
func (s *state) rederive(p *parsed, whole bool) string {
	switch p.Type {
	case typeHoldUpdate:
		// Only what UpdateHold writes: a pending hold approved or
		// rejected, or an approval read back verified again (or
		// rejected). Anything else would revive a consumed, rejected or
		// expired hold, whose signed approval may still verify.
		h := s.holds[p.Hold]
		if p.HoldState == "" || h == nil {
			return ""
		}
		st := view(h, p.Time).State
		if (p.HoldState != HoldApproved && p.HoldState != HoldRejected) || (st != HoldPending && st != HoldApproved) {
			return fmt.Sprintf("hold_update record %d sets hold %s from %s to %s, which planlock never writes: it was not written by planlock from this journal", p.Seq, p.Hold, st, p.HoldState)
		}
	case typeCheckpoint:
		if whole && fullDigest(s) != p.StateSHA {
			return fmt.Sprintf("checkpoint record %d vouches for a state that the records before it do not give: it was not written by planlock from this journal (a forged record is refused; the state is re-derived from the records)", p.Seq)
		}
	case typeSegment:
		sum := sha256.Sum256(p.State)
		if hex.EncodeToString(sum[:]) != p.StateSHA {
			return fmt.Sprintf("segment record %d carries a state whose sha256 is not its state_sha256", p.Seq)
		}
		if whole && fullDigest(s) != p.StateSHA {
			return fmt.Sprintf("segment record %d carries a state that the records before it (in the file before) do not give: it was not written by planlock from this journal", p.Seq)
		}
	}
	return ""
}

// replayer applies records to a state, re-deriving those that vouch for it.
type replayer struct {
	st    *state
	whole bool // st is the state of every record before the next
}

// apply is scanFrom's callback; first is set for a file's first record.
func (r *replayer) apply(p *parsed, first bool) string {
	if p.Type == typeSegment && first {
		// The state before a file's first record is in the file before,
		// not here: re-derived by the caller when it has that file.
		if why := r.st.rederive(p, false); why != "" {
			return why
		}
		r.st.apply(p)
		r.whole = true
		return ""
	}
	if why := r.st.rederive(p, r.whole); why != "" {
		return why
	}
	r.st.apply(p)
	return ""
}
