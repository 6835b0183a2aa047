package githubtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// What GitHub does around every request that matters to a client's error
// handling, as docs.github.com/rest documents it:
//
//   - Primary rate limit: every answer carries X-RateLimit-Limit, -Remaining,
//     -Used, -Reset (epoch seconds) and -Resource: core. With none left, the
//     answer is 403 {"message":"API rate limit exceeded for user ID 1. ..."}
//     with X-RateLimit-Remaining: 0. A 304 Not Modified does not count.
//   - Secondary rate limit: 403 (or 429) {"message":"You have exceeded a
//     secondary rate limit. ..."} with Retry-After: <seconds>.
//   - Permissions: a private repository the token cannot see is 404 Not
//     Found on every endpoint; a token without write access gets 403
//     "Resource not accessible by integration" on writes; the Actions token
//     of a repository that does not allow it gets 403 "GitHub Actions is not
//     permitted to create or approve pull requests." when it opens a PR.
//   - Conditional requests: GET answers carry a strong ETag; a GET with a
//     matching If-None-Match gets 304 and no body.
//   - Pull request and comment bodies are at most 65536 characters: longer
//     is 422 "Validation Failed" with errors[] {resource Issue, field body,
//     code custom, message "body is too long (maximum is 65536 characters)"}.

// Denial is a permission failure the fake answers with.
type Denial string

const (
	DenyNone Denial = ""
	// DenyPrivate: the repository is private and not visible to the token.
	DenyPrivate Denial = "private"
	// DenyWrite: the token has read access only.
	DenyWrite Denial = "write"
	// DenyActionsPRs: an Actions token in a repository where Actions may
	// not create pull requests.
	DenyActionsPRs Denial = "actions"
)

// MaxBody is GitHub's limit for pull request, issue and comment bodies.
const MaxBody = 65536

type extras struct {
	rateLimit     int // requests per window; 0 means 5000
	rateUsed      int
	rateReset     time.Time
	secondary     int // that many next requests get the secondary limit
	retryAfter    int
	deny          Denial
	notModified   int // 304 answers given
	labels        map[int][]string
	comments      map[int][]map[string]any
	nextCommentID int
}

// SetRateLimit sets how many requests remain in the window ending at reset.
func (f *Server) SetRateLimit(remaining int, reset time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.x.rateLimit, f.x.rateUsed, f.x.rateReset = 5000, 5000-remaining, reset
}

// SetSecondaryRateLimit makes the next n requests fail with the secondary
// rate limit and Retry-After: retryAfter seconds.
func (f *Server) SetSecondaryRateLimit(n, retryAfter int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.x.secondary, f.x.retryAfter = n, retryAfter
}

// Deny makes requests fail the way GitHub refuses a token without access.
func (f *Server) Deny(d Denial) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.x.deny = d
}

// NotModified counts the 304 answers given.
func (f *Server) NotModified() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.x.notModified
}

// limited answers the request when a rate limit or a denial applies. Called
// with f.mu held, after authentication.
func (f *Server) limited(w http.ResponseWriter, r *http.Request, rest string) bool {
	if f.x.secondary > 0 {
		f.x.secondary--
		w.Header().Set("Retry-After", strconv.Itoa(f.x.retryAfter))
		f.fail(w, http.StatusForbidden, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.", "/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits")
		return true
	}
	if f.x.rateLimit > 0 && f.x.rateUsed >= f.x.rateLimit {
		f.fail(w, http.StatusForbidden, "API rate limit exceeded for user ID 1. If you reach out to GitHub Support for help, please include the request ID.", "/overview/rate-limits-for-the-rest-api")
		return true
	}
	switch {
	case f.x.deny == DenyPrivate:
		f.fail(w, http.StatusNotFound, "Not Found", "/repos/repos#get-a-repository")
		return true
	case f.x.deny == DenyWrite && r.Method != http.MethodGet:
		f.fail(w, http.StatusForbidden, "Resource not accessible by integration", "/pulls/pulls#create-a-pull-request")
		return true
	case f.x.deny == DenyActionsPRs && r.Method == http.MethodPost && rest == "/pulls":
		f.fail(w, http.StatusForbidden, "GitHub Actions is not permitted to create or approve pull requests.", "/pulls/pulls#create-a-pull-request")
		return true
	}
	return false
}

// bodyTooLong answers 422 when a body is over GitHub's limit.
func (f *Server) bodyTooLong(w http.ResponseWriter, body string, resource string) bool {
	if len([]rune(body)) <= MaxBody {
		return false
	}
	f.fail(w, http.StatusUnprocessableEntity, "Validation Failed", "/pulls/pulls#create-a-pull-request",
		map[string]any{"resource": resource, "code": "custom", "field": "body", "message": "body is too long (maximum is 65536 characters)"})
	return true
}

// recorder holds an answer until serve returns, so that the rate-limit
// headers and the ETag (which depend on the whole answer) can be added.
type recorder struct {
	w      http.ResponseWriter
	r      *http.Request
	status int
	body   bytes.Buffer
}

func (c *recorder) Header() http.Header { return c.w.Header() }
func (c *recorder) WriteHeader(s int) {
	if c.status == 0 {
		c.status = s
	}
}
func (c *recorder) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	return c.body.Write(b)
}

// finish writes the held answer: 304 for a GET whose ETag the client has,
// and the rate-limit headers GitHub sends.
func (f *Server) finish(c *recorder) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := c.w.Header()
	if c.status == 0 {
		c.status = http.StatusOK
	}
	notModified := false
	if c.r.Method == http.MethodGet && c.status == http.StatusOK {
		sum := sha256.Sum256(c.body.Bytes())
		etag := `"` + hex.EncodeToString(sum[:16]) + `"`
		h.Set("ETag", etag)
		for _, v := range strings.Split(c.r.Header.Get("If-None-Match"), ",") {
			if strings.TrimSpace(v) == etag {
				notModified = true
			}
		}
	}
	limit := f.x.rateLimit
	if limit == 0 {
		limit = 5000
	}
	if f.x.rateReset.IsZero() {
		f.x.rateReset = time.Now().Add(time.Hour)
	}
	if !notModified && c.status != http.StatusUnauthorized && !(c.status == http.StatusForbidden && f.x.rateUsed >= limit) {
		f.x.rateUsed++
	}
	h.Set("X-RateLimit-Limit", strconv.Itoa(limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(max(0, limit-f.x.rateUsed)))
	h.Set("X-RateLimit-Used", strconv.Itoa(f.x.rateUsed))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(f.x.rateReset.Unix(), 10))
	h.Set("X-RateLimit-Resource", "core")
	if notModified {
		f.x.notModified++
		h.Del("Content-Type")
		c.w.WriteHeader(http.StatusNotModified)
		return
	}
	c.w.WriteHeader(c.status)
	_, _ = c.w.Write(c.body.Bytes())
}
