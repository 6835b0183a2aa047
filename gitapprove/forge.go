package gitapprove

import (
	"context"
	"time"
)

// PRState is a pull request's state as planlock needs it.
type PRState string

const (
	PROpen   PRState = "open"
	PRMerged PRState = "merged"
	PRClosed PRState = "closed" // closed without merge: rejected
)

// PR is a pull request on the forge.
type PR struct {
	Number int
	URL    string
	State  PRState
	// MergeCommit is the commit the merge produced (empty unless merged).
	MergeCommit string
	// HeadSHA is the tip of the pull request's branch.
	HeadSHA string
	Base    string
}

// Review is one review submitted on a pull request.
type Review struct {
	User        string
	State       string // APPROVED, CHANGES_REQUESTED, COMMENTED, DISMISSED, PENDING
	CommitID    string
	SubmittedAt time.Time
}

// Forge is the part of a code forge planlock uses.
type Forge interface {
	// CreateOrUpdatePR opens a pull request from head into base, or updates
	// the title and body of the open one for head.
	CreateOrUpdatePR(ctx context.Context, head, base, title, body string) (PR, error)
	// GetPR reads a pull request by number.
	GetPR(ctx context.Context, number int) (PR, error)
	// FindPR finds the open pull request for branch head; ok=false when none.
	FindPR(ctx context.Context, head string) (PR, bool, error)
	// Reviews lists the reviews of a pull request, oldest first.
	Reviews(ctx context.Context, number int) ([]Review, error)
	// DefaultBranch is the repository's default branch.
	DefaultBranch(ctx context.Context) (string, error)
	// CompareURL is the web page where a person opens a pull request by hand.
	CompareURL(head, base string) string
}
