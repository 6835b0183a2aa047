// Package githubtest is a fake of the parts of GitHub's REST API planlock
// uses, for tests: GitHub itself cannot run in a test. It is not GitHub: it
// keeps pull requests, reviews, labels and comments in memory and answers
// with GitHub's documented status codes, headers and JSON shapes for what a
// client's behaviour depends on (pagination, merge states, 422 validation
// errors, rate limits with their headers and Retry-After, 403/404
// permission failures, ETag/304, the 65536-character body limit; see
// limits.go and issues.go). Git itself is not faked: tests pair it with a
// real bare repository.
package githubtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server answers as docs.github.com/rest documents:
//
//   - GET  /repos/{owner}/{repo}                       200 repository, 404 {"message":"Not Found"}
//   - POST /repos/{owner}/{repo}/pulls                 201 pull request; 422 "Validation Failed"
//     with errors[].message "A pull request already exists for owner:head." when an open
//     one exists, or "No commits between base and head" style errors; 422 for a missing field
//   - GET  /repos/{owner}/{repo}/pulls?head=owner:branch&state=open&per_page&page
//     200 list (no "merged" field in list items), Link header with rel="next"/"last"
//     pointing at /repositories/{id}/pulls as GitHub does
//   - GET  /repos/{owner}/{repo}/pulls/{n}             200 with merged, merged_at,
//     merge_commit_sha (a test merge sha while open); 404 when unknown
//   - PATCH /repos/{owner}/{repo}/pulls/{n}            200 updated pull request
//   - GET  /repos/{owner}/{repo}/pulls/{n}/reviews     200 list, paginated like pulls
//   - 401 {"message":"Bad credentials"} without "Authorization: Bearer <token>"
//
// Every request must carry Accept: application/vnd.github+json.
type Server struct {
	t     testing.TB
	srv   *httptest.Server
	owner string
	repo  string
	token string

	mu       sync.Mutex
	pulls    []*Pull
	reviews  map[int][]map[string]any
	requests []string // "METHOD path?query"
	// noCommits makes PR creation fail the way GitHub does for an empty diff.
	noCommits bool
	// x: rate limits, permissions, ETags (limits.go), labels and comments (issues.go).
	x extras
	// rules are the active branch rules by branch (see SetBranchRules).
	rules map[string][]map[string]any
}

// Pull is a pull request as the fake stores it.
type Pull struct {
	Number      int
	Title, Body string
	Head, Base  string
	HeadSHA     string
	State       string
	Merged      bool
	MergedAt    string
	MergeSHA    string
}

// New starts a fake for repository owner/repo that accepts only token.
func New(t testing.TB, owner, repo, token string) *Server {
	f := &Server{t: t, owner: owner, repo: repo, token: token, reviews: map[int][]map[string]any{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// URL is the API base URL (as https://api.github.com).
func (f *Server) URL() string { return f.srv.URL }

// WebURL is the web base URL used in html_url.
func (f *Server) WebURL() string { return "https://github.example" }

// Close stops the server: later requests fail as an unreachable GitHub does.
func (f *Server) Close() { f.srv.Close() }

// SetToken changes the accepted token (the old one gets 401).
func (f *Server) SetToken(tok string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.token = tok
}

// SetNoCommits makes creating a pull request fail with GitHub's 422 "No commits between".
func (f *Server) SetNoCommits(v bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.noCommits = v
}

// AddPull stores a pull request as if created earlier.
func (f *Server) AddPull(p Pull) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pulls = append(f.pulls, &p)
}

// AddReview appends a review (GitHub's JSON shape) to pull request n.
func (f *Server) AddReview(n int, review map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reviews[n] = append(f.reviews[n], review)
}

// Requests lists the requests served, as "METHOD /path?query".
func (f *Server) Requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.requests...)
}

func (f *Server) writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (f *Server) fail(w http.ResponseWriter, status int, msg, doc string, errs ...map[string]any) {
	body := map[string]any{"message": msg, "documentation_url": "https://docs.github.com/rest" + doc, "status": strconv.Itoa(status)}
	if len(errs) > 0 {
		body["errors"] = errs
	}
	f.writeJSON(w, status, body)
}

func (f *Server) pullJSON(p *Pull, full bool) map[string]any {
	m := map[string]any{
		"url":      fmt.Sprintf("%s/repos/%s/%s/pulls/%d", f.srv.URL, f.owner, f.repo, p.Number),
		"html_url": fmt.Sprintf("https://github.example/%s/%s/pull/%d", f.owner, f.repo, p.Number),
		"number":   p.Number, "state": p.State, "title": p.Title, "body": p.Body,
		"head":      map[string]any{"ref": p.Head, "sha": p.HeadSHA, "label": f.owner + ":" + p.Head},
		"base":      map[string]any{"ref": p.Base, "label": f.owner + ":" + p.Base},
		"merged_at": nil, "merge_commit_sha": "e5bd3914e2e596debea16f433f57875b5b90bcd6",
	}
	if p.Merged {
		m["merged_at"] = p.MergedAt
		m["merge_commit_sha"] = p.MergeSHA
	}
	if full { // only the single-PR endpoint has these
		m["merged"] = p.Merged
		m["mergeable"] = true
	}
	return m
}

func (f *Server) serve(rw http.ResponseWriter, r *http.Request) {
	rec := &recorder{w: rw, r: r}
	defer f.finish(rec) // runs after the unlock below
	var w http.ResponseWriter = rec
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r.Method+" "+r.URL.RequestURI())
	if r.Header.Get("Accept") != "application/vnd.github+json" {
		f.t.Errorf("request %s %s without Accept: application/vnd.github+json", r.Method, r.URL)
	}
	if r.Header.Get("Authorization") != "Bearer "+f.token {
		f.fail(w, http.StatusUnauthorized, "Bad credentials", "")
		return
	}
	path := r.URL.Path
	prefix := "/repos/" + f.owner + "/" + f.repo
	// GitHub's Link headers name the repository by id.
	if strings.HasPrefix(path, "/repositories/1/") || path == "/repositories/1" {
		path = prefix + strings.TrimPrefix(path, "/repositories/1")
	}
	if path != prefix && !strings.HasPrefix(path, prefix+"/") {
		f.fail(w, http.StatusNotFound, "Not Found", "/repos/repos#get-a-repository")
		return
	}
	rest := strings.TrimPrefix(path, prefix)
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	if f.limited(w, r, rest) {
		return
	}
	if f.serveApprovals(w, r, rest) {
		return
	}
	switch {
	case rest == "" && r.Method == http.MethodGet:
		f.writeJSON(w, 200, map[string]any{"id": 1, "name": f.repo, "full_name": f.owner + "/" + f.repo, "default_branch": "main", "private": true})
	case rest == "/pulls" && r.Method == http.MethodPost:
		f.createPull(w, r)
	case rest == "/pulls" && r.Method == http.MethodGet:
		var out []map[string]any
		head, state := r.URL.Query().Get("head"), r.URL.Query().Get("state")
		for _, p := range f.pulls {
			if head != "" && f.owner+":"+p.Head != head {
				continue
			}
			if state != "all" && (state == "" && p.State != "open" || state != "" && p.State != state) {
				continue
			}
			out = append(out, f.pullJSON(p, false))
		}
		f.page(w, r, "/pulls", out)
	case len(parts) == 2 && parts[0] == "pulls":
		p := f.pull(parts[1])
		if p == nil {
			f.fail(w, http.StatusNotFound, "Not Found", "/pulls/pulls#get-a-pull-request")
			return
		}
		switch r.Method {
		case http.MethodGet:
			f.writeJSON(w, 200, f.pullJSON(p, true))
		case http.MethodPatch:
			var in map[string]string
			if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
				f.fail(w, http.StatusBadRequest, "Problems parsing JSON", "")
				return
			}
			if f.bodyTooLong(w, in["body"], "Issue") || !f.patchState(w, p, in) {
				return
			}
			if v, ok := in["title"]; ok {
				p.Title = v
			}
			if v, ok := in["body"]; ok {
				p.Body = v
			}
			f.writeJSON(w, 200, f.pullJSON(p, true))
		default:
			f.fail(w, http.StatusNotFound, "Not Found", "")
		}
	case len(parts) == 3 && parts[0] == "pulls" && parts[2] == "reviews" && r.Method == http.MethodGet:
		p := f.pull(parts[1])
		if p == nil {
			f.fail(w, http.StatusNotFound, "Not Found", "/pulls/reviews#list-reviews-for-a-pull-request")
			return
		}
		f.page(w, r, "/pulls/"+parts[1]+"/reviews", f.reviews[p.Number])
	case f.serveIssues(w, r, parts):
	default:
		f.fail(w, http.StatusNotFound, "Not Found", "")
	}
}

func (f *Server) pull(num string) *Pull {
	n, err := strconv.Atoi(num)
	if err != nil {
		return nil
	}
	for _, p := range f.pulls {
		if p.Number == n {
			return p
		}
	}
	return nil
}

func (f *Server) createPull(w http.ResponseWriter, r *http.Request) {
	var in map[string]any
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		f.fail(w, http.StatusBadRequest, "Problems parsing JSON", "")
		return
	}
	str := func(k string) string { s, _ := in[k].(string); return s }
	for _, k := range []string{"head", "base"} {
		if str(k) == "" {
			f.fail(w, http.StatusUnprocessableEntity, "Validation Failed", "/pulls/pulls#create-a-pull-request",
				map[string]any{"resource": "PullRequest", "field": k, "code": "missing_field"})
			return
		}
	}
	if f.bodyTooLong(w, str("body"), "Issue") {
		return
	}
	for _, p := range f.pulls {
		if p.Head == str("head") && p.State == "open" {
			f.fail(w, http.StatusUnprocessableEntity, "Validation Failed", "/pulls/pulls#create-a-pull-request",
				map[string]any{"resource": "PullRequest", "code": "custom", "message": "A pull request already exists for " + f.owner + ":" + str("head") + "."})
			return
		}
	}
	if f.noCommits {
		f.fail(w, http.StatusUnprocessableEntity, "Validation Failed", "/pulls/pulls#create-a-pull-request",
			map[string]any{"resource": "PullRequest", "code": "custom", "message": "No commits between " + str("base") + " and " + str("head")})
		return
	}
	p := &Pull{Number: len(f.pulls) + 1, Title: str("title"), Body: str("body"), Head: str("head"), Base: str("base"), State: "open", HeadSHA: strings.Repeat("a", 40)}
	f.pulls = append(f.pulls, p)
	w.Header().Set("Location", fmt.Sprintf("%s/repos/%s/%s/pulls/%d", f.srv.URL, f.owner, f.repo, p.Number))
	f.writeJSON(w, http.StatusCreated, f.pullJSON(p, true))
}

// page answers a list endpoint with per_page/page and a Link header.
func (f *Server) page(w http.ResponseWriter, r *http.Request, sub string, all []map[string]any) {
	q := r.URL.Query()
	per, _ := strconv.Atoi(q.Get("per_page"))
	if per <= 0 {
		per = 30
	}
	if per > 100 {
		per = 100
	}
	page, _ := strconv.Atoi(q.Get("page"))
	if page <= 0 {
		page = 1
	}
	last := (len(all) + per - 1) / per
	if last == 0 {
		last = 1
	}
	link := func(n int, rel string) string {
		q2 := url.Values{}
		for k, v := range q {
			q2[k] = v
		}
		q2.Set("page", strconv.Itoa(n))
		return fmt.Sprintf("<%s/repositories/1%s?%s>; rel=%q", f.srv.URL, sub, q2.Encode(), rel)
	}
	var links []string
	if page < last {
		links = append(links, link(page+1, "next"), link(last, "last"))
	}
	if page > 1 {
		links = append(links, link(1, "first"), link(page-1, "prev"))
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, ", "))
	}
	out := []map[string]any{}
	for i := (page - 1) * per; i < len(all) && i < page*per; i++ {
		out = append(out, all[i])
	}
	f.writeJSON(w, 200, out)
}

// Merge marks a pull request merged, as GitHub does after the merge button.
func (f *Server) Merge(n int, sha string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.pull(strconv.Itoa(n))
	p.State, p.Merged, p.MergeSHA, p.MergedAt = "closed", true, sha, time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC).Format(time.RFC3339)
}

// ClosePull closes pull request n without merging.
func (f *Server) ClosePull(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pull(strconv.Itoa(n)).State = "closed"
}

// Pull returns a copy of pull request n.
func (f *Server) Pull(n int) Pull {
	f.mu.Lock()
	defer f.mu.Unlock()
	return *f.pull(strconv.Itoa(n))
}

// Count is the number of pull requests.
func (f *Server) Count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pulls)
}
