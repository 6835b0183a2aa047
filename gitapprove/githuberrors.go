package gitapprove

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ErrPermanent marks a GitHub answer that repeating the same request will
// not change (a permission or validation failure): someone has to fix the
// token, the repository settings or the request first.
var ErrPermanent = errors.New("GitHub refused the request")

// RateLimitError is GitHub's primary rate limit: the token used its hourly
// requests (X-RateLimit-Remaining: 0); they come back at Reset.
type RateLimitError struct {
	*APIError
	Reset time.Time
}

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("%s (primary rate limit; resets at %s)", e.APIError.Error(), e.Reset.UTC().Format(time.RFC3339))
}
func (e *RateLimitError) Unwrap() []error { return []error{ErrUnavailable, e.APIError} }

// SecondaryRateLimitError is GitHub's secondary (abuse) rate limit: wait
// RetryAfter before the next request.
type SecondaryRateLimitError struct {
	*APIError
	RetryAfter time.Duration
}

func (e *SecondaryRateLimitError) Error() string {
	return fmt.Sprintf("%s (secondary rate limit; retry after %s)", e.APIError.Error(), e.RetryAfter)
}
func (e *SecondaryRateLimitError) Unwrap() []error { return []error{ErrUnavailable, e.APIError} }

// PermissionError is a 403 or 404 that means the token may not do this, or
// cannot see the repository. Hint says what to change.
type PermissionError struct {
	*APIError
	Hint string
}

func (e *PermissionError) Error() string { return e.APIError.Error() + " (" + e.Hint + ")" }
func (e *PermissionError) Unwrap() []error {
	return []error{ErrPermanent, e.APIError}
}

// ValidationError is a 422: GitHub will refuse the same request again.
type ValidationError struct{ *APIError }

func (e *ValidationError) Unwrap() []error { return []error{ErrPermanent, e.APIError} }

// classify turns a non-success answer into one of the typed errors (or the
// APIError itself: 401, 5xx and others).
func classify(ae *APIError, h http.Header, now time.Time) error {
	msg := strings.ToLower(ae.Error())
	limited := ae.Status == http.StatusForbidden || ae.Status == http.StatusTooManyRequests
	switch {
	case limited && h.Get("Retry-After") != "":
		secs, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After")))
		if err != nil || secs < 0 {
			secs = 60
		}
		return &SecondaryRateLimitError{APIError: ae, RetryAfter: time.Duration(secs) * time.Second}
	case limited && h.Get("X-RateLimit-Remaining") == "0":
		reset := now.Add(time.Minute)
		if n, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			reset = time.Unix(n, 0)
		}
		return &RateLimitError{APIError: ae, Reset: reset}
	case limited && strings.Contains(msg, "secondary rate limit"):
		// GitHub documents: without Retry-After, wait at least a minute.
		return &SecondaryRateLimitError{APIError: ae, RetryAfter: time.Minute}
	case ae.Status == http.StatusForbidden && strings.Contains(msg, "github actions is not permitted to create or approve pull requests"):
		return &PermissionError{APIError: ae, Hint: "allow it in the repository's (or organization's) Settings → Actions → General → Workflow permissions: \"Allow GitHub Actions to create and approve pull requests\""}
	case ae.Status == http.StatusForbidden:
		return &PermissionError{APIError: ae, Hint: "the token may not do this: it needs contents: write and pull-requests: write on the repository (a fine-grained token: Contents and Pull requests read and write)"}
	case ae.Status == http.StatusNotFound:
		return &PermissionError{APIError: ae, Hint: "not found: the repository or pull request does not exist, or is private and not visible to this token (give the token access to the repository)"}
	case ae.Status == http.StatusUnprocessableEntity:
		return &ValidationError{APIError: ae}
	}
	return ae
}
