// Package holdreq is the contract between the proxy and a hold approver: the
// held call the proxy asks about (Request) and what the approver decided
// (Decision). It is a leaf of its own so that the relay (package proxy)
// depends on this contract and not on an approver's implementation, which
// reads Git and GitHub and verifies signatures.
package holdreq

import (
	"time"

	"github.com/planlock/planlock/proxy/ledger"
)

// Request is one held call.
type Request struct {
	PlanName string
	// Call is the call as the gate matched it (plan digest, step, tool, arguments).
	Call   ledger.Call
	Reason string
	// Cause is what the hold stands for (ledger.HoldSpec.Cause); it
	// contains "pin" when the pin read differed from the plan.
	Cause string
	// ObservedPin is the pin value read from the upstream when the step has
	// a pin; the hold request shows it next to the plan's.
	ObservedPin string
	// Expires is the expiry of a new hold.
	Expires time.Time
	// ToolChange, when the hold is for a changed tool definition, is the
	// plan's tool_pin and the definition the upstream lists now; the
	// approval pull request shows both and updates the pin.
	ToolChange *ToolChange
}

// ToolChange is a tool definition that differs from the plan's tool_pin.
type ToolChange struct {
	Tool              string
	PinnedDigest      string
	PinnedDescription *string // nil when the pin gives none
	Digest            string
	Description       string
	Definition        []byte // canonical JSON (hclplan/toolpin)
	// PinnedDefinition is the definition that matched the pin, canonical
	// JSON: the one the upstream listed while it matched, else the one the
	// plan records; nil when neither is known.
	PinnedDefinition []byte
}

// Outcome is what the proxy does with the call.
type Outcome int

const (
	// Held: answer Message (isError); nothing is forwarded.
	Held Outcome = iota
	// Approved: forward the call once, consuming Hold.ID.
	Approved
	// Refused: block the call with Message as the reason.
	Refused
)

func (o Outcome) String() string {
	switch o {
	case Approved:
		return "approved"
	case Refused:
		return "refused"
	}
	return "held"
}

// Decision is the answer for one held call.
type Decision struct {
	Outcome Outcome
	Hold    ledger.Hold
	// Message is one line for the agent (Held) or the block reason (Refused).
	Message string
}
