package githubtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Labels and comments live on the issue side of a pull request, as on
// GitHub (same number):
//
//   - POST /repos/{o}/{r}/issues/{n}/labels {"labels":[...]}  200 the issue's labels
//     (label objects: id, node_id, url, name, color, default, description);
//     a label that does not exist yet is created
//   - GET  /repos/{o}/{r}/issues/{n}/labels                   200 list
//   - POST /repos/{o}/{r}/issues/{n}/comments {"body":...}    201 comment (id, node_id,
//     url, html_url, body, user.login, created_at, updated_at); 422 over 65536 characters
//   - GET  /repos/{o}/{r}/issues/{n}/comments                 200 list, paginated
//   - PATCH /repos/{o}/{r}/pulls/{n} {"state":"closed"|"open"} closes or reopens; a
//     merged pull request cannot be reopened (422)

// serveIssues answers the issue endpoints; false when the path is not one.
func (f *Server) serveIssues(w http.ResponseWriter, r *http.Request, parts []string) bool {
	if len(parts) != 3 || parts[0] != "issues" || (parts[2] != "labels" && parts[2] != "comments") {
		return false
	}
	p := f.pull(parts[1])
	if p == nil {
		f.fail(w, http.StatusNotFound, "Not Found", "/issues/issues#get-an-issue")
		return true
	}
	if f.x.labels == nil {
		f.x.labels, f.x.comments = map[int][]string{}, map[int][]map[string]any{}
	}
	switch {
	case parts[2] == "labels" && r.Method == http.MethodPost:
		var in struct {
			Labels []string `json:"labels"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Labels == nil {
			f.fail(w, http.StatusUnprocessableEntity, "Invalid request.\n\nFor 'links/0/schema', nil is not an object.", "/issues/labels#add-labels-to-an-issue")
			return true
		}
		for _, l := range in.Labels {
			if !contains(f.x.labels[p.Number], l) {
				f.x.labels[p.Number] = append(f.x.labels[p.Number], l)
			}
		}
		f.writeJSON(w, http.StatusOK, f.labelsJSON(p.Number))
	case parts[2] == "labels" && r.Method == http.MethodGet:
		f.writeJSON(w, http.StatusOK, f.labelsJSON(p.Number))
	case parts[2] == "comments" && r.Method == http.MethodPost:
		var in struct {
			Body *string `json:"body"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Body == nil {
			f.fail(w, http.StatusUnprocessableEntity, "Validation Failed", "/issues/comments#create-an-issue-comment",
				map[string]any{"resource": "IssueComment", "field": "body", "code": "missing_field"})
			return true
		}
		if f.bodyTooLong(w, *in.Body, "IssueComment") {
			return true
		}
		f.x.nextCommentID++
		id := f.x.nextCommentID
		now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC).Format(time.RFC3339)
		c := map[string]any{
			"id": id, "node_id": fmt.Sprintf("IC_%d", id),
			"url":      fmt.Sprintf("%s/repos/%s/%s/issues/comments/%d", f.srv.URL, f.owner, f.repo, id),
			"html_url": fmt.Sprintf("https://github.example/%s/%s/pull/%d#issuecomment-%d", f.owner, f.repo, p.Number, id),
			"body":     *in.Body, "user": map[string]any{"login": "planlock-bot", "type": "Bot"},
			"created_at": now, "updated_at": now,
		}
		f.x.comments[p.Number] = append(f.x.comments[p.Number], c)
		f.writeJSON(w, http.StatusCreated, c)
	case parts[2] == "comments" && r.Method == http.MethodGet:
		f.page(w, r, "/issues/"+parts[1]+"/comments", f.x.comments[p.Number])
	default:
		f.fail(w, http.StatusNotFound, "Not Found", "")
	}
	return true
}

func (f *Server) labelsJSON(n int) []map[string]any {
	out := []map[string]any{}
	for i, l := range f.x.labels[n] {
		out = append(out, map[string]any{"id": i + 1, "node_id": "LA_" + strconv.Itoa(i+1), "url": f.srv.URL + "/repos/" + f.owner + "/" + f.repo + "/labels/" + l,
			"name": l, "color": "ededed", "default": false, "description": nil})
	}
	return out
}

// patchState applies a PATCH's "state"; false when it answered an error.
func (f *Server) patchState(w http.ResponseWriter, p *Pull, in map[string]string) bool {
	st, ok := in["state"]
	if !ok {
		return true
	}
	switch {
	case st != "open" && st != "closed":
		f.fail(w, http.StatusUnprocessableEntity, "Validation Failed", "/pulls/pulls#update-a-pull-request",
			map[string]any{"resource": "PullRequest", "field": "state", "code": "invalid"})
		return false
	case p.Merged && st == "open":
		f.fail(w, http.StatusUnprocessableEntity, "Validation Failed", "/pulls/pulls#update-a-pull-request",
			map[string]any{"resource": "PullRequest", "code": "custom", "message": "state cannot be changed. The pull request cannot be reopened because it was merged."})
		return false
	case !p.Merged:
		p.State = st
	}
	return true
}

// Labels lists the labels of issue (pull request) n.
func (f *Server) Labels(n int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.x.labels[n]...)
}

// Comments lists the comment bodies of issue (pull request) n.
func (f *Server) Comments(n int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.x.comments[n] {
		out = append(out, c["body"].(string))
	}
	return out
}

// ReopenPull reopens a closed, unmerged pull request as a person does.
func (f *Server) ReopenPull(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p := f.pull(strconv.Itoa(n)); p != nil && !p.Merged {
		p.State = "open"
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
