//go:build e2e

package e2e

// The whole hold loop with real peers: a bare Git repository made by the real
// git as origin, the plans repository cloned with the real git, the planlock
// binary as the proxy (over stdio, driven by the mcp-go client as the agent),
// the refund example server as the upstream, the real git merging as "the
// reviewer", and `planlock sign --kind hold --key` plus a push to the
// approvals branch as CI. GitHub is internal/testkit/githubtest: GitHub cannot run
// here, and the fake answers the REST endpoints as GitHub documents them.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planlock/planlock/gitapprove"
	"github.com/planlock/planlock/internal/testkit/githubtest"
	"github.com/planlock/planlock/internal/testkit/peers"
	"github.com/planlock/planlock/sign"
)

const loopPlan = `plan "refund-4711" {
  goal  = "Refund order 4711 (at most 30 EUR) and email the customer"
  order = "any"

  step "refund" {
    tool      = "refund_customer"
    max_calls = 1
    arg "order_id" { eq = "4711" }
    arg "amount" {
      min = 1
      max = 30
    }
    arg "currency" { enum = ["EUR"] }
    pin {
      tool  = "get_script_by_path"
      args  = { path = "f/support/refund_customer" }
      field = "hash"
      eq    = "9f86d081884c7d65"
    }
  }

  step "email" {
    tool      = "send_email"
    max_calls = 10
    approval  = "each"
    arg "to" { pattern = "^customer-4711@example\\.com$" }
    arg "body" { max_length = 2000 }
  }
}
`

// The token is distinctive so that finding it anywhere is a leak.
const ghToken = "ghp_planlockHoldLoopSecret0123456789"

// gitEnv isolates the real git from the machine's configuration.
func gitEnv(home string) []string {
	return append(os.Environ(), "HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+filepath.Join(home, ".gitconfig"),
		"GIT_AUTHOR_NAME=Reviewer", "GIT_AUTHOR_EMAIL=reviewer@example.com",
		"GIT_COMMITTER_NAME=Reviewer", "GIT_COMMITTER_EMAIL=reviewer@example.com")
}

func rgit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv(t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// loop is one running set-up.
type loop struct {
	t                      *testing.T
	planlock               string
	origin, work, reviewer string
	state                  string
	gh                     *githubtest.Server
	refund                 *peers.Refund
	envFile                string
	ciKey, otherKey        string
	agent                  *client.Client
}

// newLoop starts the set-up; without github the proxy has no token and
// works from Git alone.
func newLoop(t *testing.T, github bool) *loop { return newLoopWith(t, github, false) }

// newLoopWith: with gitops the proxy takes its plan from the origin
// (--repo), its bundle from the approvals branch, instead of the checkout.
func newLoopWith(t *testing.T, github, gitops bool) *loop {
	return newLoopOf(t, github, gitops, loopPlan, nil)
}

// newLoopOf is newLoopWith for plan in front of upstream (nil: the refund
// example server).
func newLoopOf(t *testing.T, github, gitops bool, plan string, upstream []string) *loop {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	root := t.TempDir()
	l := &loop{t: t, planlock: planlockBin, origin: filepath.Join(root, "origin.git"),
		work: filepath.Join(root, "work"), reviewer: filepath.Join(root, "reviewer"), state: filepath.Join(root, "state"),
		envFile: filepath.Join(root, "upstream.env")}
	rgit(t, root, "init", "--bare", "-q", "-b", "main", l.origin)
	rgit(t, root, "clone", "-q", l.origin, l.work)
	rgit(t, l.work, "checkout", "-q", "-b", "main")
	writeFile(t, filepath.Join(l.work, "plans", "refund.hcl"), plan)
	// CI's signing key (the operator trusts its public half, ci.pub beside
	// it) and a key nobody trusts.
	for _, k := range []*string{&l.ciKey, &l.otherKey} {
		priv, pub, err := sign.GenerateKeyPair("ecdsa-p256")
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		*k = filepath.Join(dir, "ci.key")
		writeFile(t, *k, string(priv))
		writeFile(t, filepath.Join(dir, "ci.pub"), string(pub))
	}

	// The plan as approved: merged and signed by CI with the same key.
	sign := exec.Command(l.planlock, "sign", "--kind", "plan", "--key", l.ciKey, filepath.Join("plans", "refund.hcl"))
	sign.Dir = l.work
	sign.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	if out, err := sign.CombinedOutput(); err != nil {
		t.Fatalf("planlock sign the plan: %v\n%s", err, out)
	}
	rgit(t, l.work, "add", "-A")
	rgit(t, l.work, "commit", "-q", "-m", "refund plan")
	rgit(t, l.work, "push", "-q", "origin", "main")
	rgit(t, root, "clone", "-q", l.origin, l.reviewer)
	if gitops {
		bundle, err := os.ReadFile(filepath.Join(l.work, "plans", "refund.hcl.sigstore.json"))
		if err != nil {
			t.Fatal(err)
		}
		l.publish("plans/refund.hcl", bundle)
	}

	l.gh = githubtest.New(t, "acme", "plans", ghToken)
	if upstream == nil {
		l.refund = peers.NewRefund(t, refundBin)
		// The upstream records its whole environment before it starts serving.
		upstream = append([]string{"/bin/sh", "-c", `env > "` + l.envFile + `"; exec "$0" "$@"`}, l.refund.Argv()...)
	}
	planArgs := []string{"--plan", filepath.Join(l.work, "plans", "refund.hcl")}
	if gitops {
		planArgs = []string{"--repo", "file://" + l.origin, "--plan", "plans/refund.hcl", "--repo-interval", "50ms", "--reload-interval", "50ms"}
	}
	args := []string{"proxy", planArgs[0], planArgs[1],
		"--key", filepath.Join(filepath.Dir(l.ciKey), "ci.pub"), "--state", l.state,
		// Deterministic in a test: the held call waits for its pull request.
		"--hold-open-wait", "10m", "--hold-status-cache", "0"}
	args = append(args, planArgs[2:]...)
	token := ""
	if github {
		args = append(args, "--github-api", l.gh.URL(), "--github-repo", "acme/plans")
		token = ghToken
	}
	args = append(append(args, "--"), upstream...)
	tr := transport.NewStdioWithOptions(l.planlock, nil, args,
		transport.WithCommandFunc(func(ctx context.Context, command string, _ []string, args []string) (*exec.Cmd, error) {
			cmd := exec.Command(command, args...)
			home := t.TempDir()
			cmd.Env = append(os.Environ(), "GITHUB_TOKEN="+token, "GH_TOKEN=", "HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+filepath.Join(home, ".gitconfig"))
			cmd.Stderr = &testWriter{t: t}
			return cmd, nil
		}))
	c := client.NewClient(tr)
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "hold-loop-agent", Version: "1"}
	if _, err := c.Initialize(context.Background(), init); err != nil {
		t.Fatal(err)
	}
	l.agent = c
	return l
}

type testWriter struct{ t *testing.T }

func (w *testWriter) Write(b []byte) (int, error) {
	w.t.Logf("proxy: %s", strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// call makes one tools/call as the agent and returns its text and isError.
func (l *loop) call(tool string, args map[string]any) (string, bool) {
	l.t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := l.agent.CallTool(ctx, req)
	if err != nil {
		l.t.Fatalf("call %s: %v", tool, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	l.t.Logf("%s → isError=%v: %s", tool, res.IsError, b.String())
	return b.String(), res.IsError
}

// expect checks a held or blocked answer: isError and every fragment.
func (l *loop) expect(what, text string, isError bool, fragments ...string) {
	l.t.Helper()
	if !isError {
		l.t.Fatalf("%s: got a result without isError: %s", what, text)
	}
	for _, f := range fragments {
		if !strings.Contains(text, f) {
			l.t.Fatalf("%s: answer lacks %q:\n%s", what, f, text)
		}
	}
}

var holdIDRe = regexp.MustCompile(`hold ([0-9a-f]{16})`)

func holdID(t *testing.T, text string) string {
	t.Helper()
	m := holdIDRe.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no hold id in %q", text)
	}
	return m[1]
}

// merge plays the reviewer: the real git merges the hold branch into main.
func (l *loop) merge(branch string) string {
	l.t.Helper()
	rgit(l.t, l.reviewer, "checkout", "-q", "main")
	rgit(l.t, l.reviewer, "pull", "-q", "--ff-only", "origin", "main")
	rgit(l.t, l.reviewer, "fetch", "-q", "origin")
	rgit(l.t, l.reviewer, "merge", "-q", "--no-ff", "-m", "Merge "+branch, "origin/"+branch)
	rgit(l.t, l.reviewer, "push", "-q", "origin", "main")
	return rgit(l.t, l.reviewer, "rev-parse", "HEAD")
}

// ciSign plays CI after a merge: `planlock sign --kind hold` over the file
// as merged on main, then the bundle committed beside its path on the
// approvals branch and pushed.
func (l *loop) ciSign(path string, pr int, key string) {
	l.t.Helper()
	rgit(l.t, l.reviewer, "checkout", "-q", "main")
	rgit(l.t, l.reviewer, "pull", "-q", "--ff-only", "origin", "main")
	bundle := filepath.Join(l.t.TempDir(), "bundle.json")
	cmd := exec.Command(l.planlock, "sign", "--kind", "hold", "--key", key, "--pr", strconv.Itoa(pr), "--path", path, "--out", bundle, filepath.FromSlash(path))
	cmd.Dir = l.reviewer
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + l.t.TempDir()}
	if out, err := cmd.CombinedOutput(); err != nil {
		l.t.Fatalf("planlock sign: %v\n%s", err, out)
	}
	data, err := os.ReadFile(bundle)
	if err != nil {
		l.t.Fatal(err)
	}
	l.publish(path, data)
}

// publish plays CI's publish job: the bundle committed beside path on the
// approvals branch and pushed.
func (l *loop) publish(path string, data []byte) {
	l.t.Helper()
	rgit(l.t, l.reviewer, "fetch", "-q", "origin")
	if rgit(l.t, l.reviewer, "ls-remote", "--heads", "origin", gitapprove.DefaultApprovalsBranch) == "" {
		rgit(l.t, l.reviewer, "checkout", "-q", "--orphan", "approvals")
		rgit(l.t, l.reviewer, "rm", "-rfq", "--ignore-unmatch", ".")
	} else {
		rgit(l.t, l.reviewer, "checkout", "-q", "-B", "approvals", "origin/"+gitapprove.DefaultApprovalsBranch)
	}
	writeFile(l.t, filepath.Join(l.reviewer, filepath.FromSlash(path+gitapprove.BundleSuffix)), string(data))
	rgit(l.t, l.reviewer, "add", path+gitapprove.BundleSuffix)
	rgit(l.t, l.reviewer, "commit", "-q", "-m", "sign "+path)
	rgit(l.t, l.reviewer, "push", "-q", "origin", "approvals:"+gitapprove.DefaultApprovalsBranch)
	rgit(l.t, l.reviewer, "checkout", "-q", "main")
}

// waitComment waits for a comment on pull request n containing want (the
// proxy writes it in the background) and returns it.
func (l *loop) waitComment(n int, want string) string {
	l.t.Helper()
	deadline := time.Now().Add(time.Minute) // a bound on waiting, not a timing assertion
	for {
		for _, c := range l.gh.Comments(n) {
			if strings.Contains(c, want) {
				return c
			}
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("no comment on #%d containing %q: %q", n, want, l.gh.Comments(n))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// calls counts the calls of tool that reached the upstream.
func (l *loop) calls(tool string) []peers.CallRecord {
	l.t.Helper()
	var out []peers.CallRecord
	for _, c := range l.refund.Calls(l.t) {
		if c.Tool == tool {
			out = append(out, c)
		}
	}
	return out
}

// holdsCLI runs planlock holds against the proxy's state while it runs.
func (l *loop) holdsCLI(args ...string) string {
	l.t.Helper()
	cmd := exec.Command(l.planlock, append([]string{"holds", args[0], "--state", l.state}, args[1:]...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		l.t.Fatalf("planlock holds %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func TestHoldLoop(t *testing.T) {
	l := newLoop(t, true)
	refundArgs := map[string]any{"order_id": "4711", "amount": 30, "currency": "EUR"}
	const prURL = "https://github.example/acme/plans/pull/"

	// A colleague redeploys the refund script: the pin no longer matches.
	l.refund.SetHash(t, "0c1f2e3d4b5a6978")
	text, isErr := l.call("refund_customer", refundArgs)
	l.expect("pin change", text, isErr, "needs approval", prURL+"1", "repeat exactly the same call", "changed since the plan was approved")
	id := holdID(t, text)
	branch := "planlock/hold/refund-4711/" + id
	path := "holds/refund-4711/" + id + ".hcl"

	// The hold branch is in the bare origin, with the hold file and the plan's new pin.
	holdFile := rgit(t, l.origin, "show", branch+":"+path)
	if !strings.Contains(holdFile, `arguments    = "{\"amount\":30,\"currency\":\"EUR\",\"order_id\":\"4711\"}"`) ||
		!strings.Contains(holdFile, `observed_pin = "0c1f2e3d4b5a6978"`) {
		t.Fatalf("hold file on %s:\n%s", branch, holdFile)
	}
	if plan := rgit(t, l.origin, "show", branch+":plans/refund.hcl"); !strings.Contains(plan, `eq    = "0c1f2e3d4b5a6978"`) {
		t.Fatalf("the pin change PR does not update the pin:\n%s", plan)
	}
	if pr := l.gh.Pull(1); pr.Head != branch || pr.Base != "main" || !strings.Contains(pr.Body, `"amount": 30`) {
		t.Fatalf("pull request 1: %+v", pr)
	}
	if n := len(l.calls("refund_customer")); n != 0 {
		t.Fatalf("a held call reached the upstream %d times", n)
	}

	// Still open: the same answer, no second pull request.
	text, isErr = l.call("refund_customer", refundArgs)
	l.expect("still open", text, isErr, "needs approval", prURL+"1", "hold "+id)
	if l.gh.Count() != 1 {
		t.Fatalf("%d pull requests, want 1", l.gh.Count())
	}

	// The reviewer merges with the real git; CI has not signed yet.
	l.gh.Merge(1, l.merge(branch))
	text, isErr = l.call("refund_customer", refundArgs)
	l.expect("merged, unsigned", text, isErr, "not published yet", "hold "+id)

	// CI signs the merged hold file and publishes the bundle; the agent repeats.
	l.ciSign(path, 1, l.ciKey)
	text, isErr = l.call("refund_customer", refundArgs)
	if isErr {
		t.Fatalf("approved call: %s", text)
	}
	got := l.calls("refund_customer")
	if len(got) != 1 || string(got[0].Arguments) != `{"amount":30,"currency":"EUR","order_id":"4711"}` {
		t.Fatalf("upstream got %+v, want the approved call exactly once", got)
	}
	// The hold pull request is labelled, and says (in the background) that
	// its call ran, with the audit record.
	if labels := l.gh.Labels(1); len(labels) != 1 || labels[0] != gitapprove.LabelHold {
		t.Errorf("labels of the hold pull request: %q", labels)
	}
	ranComment := l.waitComment(1, "planlock ran the approved call of hold `"+id+"` once: audit record #")
	if !strings.Contains(ranComment, "result `ok`") {
		t.Errorf("comment: %s", ranComment)
	}

	// A third identical call: the approval was used up.
	text, isErr = l.call("refund_customer", refundArgs)
	l.expect("third call", text, isErr, "blocked")
	if n := len(l.calls("refund_customer")); n != 1 {
		t.Fatalf("refund_customer reached the upstream %d times, want 1", n)
	}

	// Rejected: the pull request is closed without merging.
	rejArgs := map[string]any{"to": "customer-4711@example.com", "body": "please reject"}
	text, isErr = l.call("send_email", rejArgs)
	l.expect("approval each", text, isErr, "needs approval", prURL+"2")
	rejID := holdID(t, text)
	l.gh.ClosePull(2)
	for i := 0; i < 2; i++ {
		text, isErr = l.call("send_email", rejArgs)
		l.expect("rejected", text, isErr, "blocked", "rejected", "do not retry", rejID)
	}

	// GitHub refuses (rotated token): blocked, hold kept; then it works again.
	ghArgs := map[string]any{"to": "customer-4711@example.com", "body": "github outage"}
	text, isErr = l.call("send_email", ghArgs)
	l.expect("github hold", text, isErr, prURL+"3")
	ghID := holdID(t, text)
	l.gh.SetToken("rotated")
	text, isErr = l.call("send_email", ghArgs)
	l.expect("github unreachable", text, isErr, "blocked", "could not be checked", "hold is kept", ghID)
	l.gh.SetToken(ghToken)
	text, isErr = l.call("send_email", ghArgs)
	l.expect("github back", text, isErr, "needs approval", prURL+"3", ghID)

	// Git unreachable while opening: blocked, hold kept; the next call opens it.
	gitArgs := map[string]any{"to": "customer-4711@example.com", "body": "git outage"}
	away := l.origin + ".away"
	if err := os.Rename(l.origin, away); err != nil {
		t.Fatal(err)
	}
	text, isErr = l.call("send_email", gitArgs)
	l.expect("git unreachable", text, isErr, "blocked", "could not be opened", "hold is kept")
	gitID := holdID(t, text)
	if list := l.holdsCLI("list"); !strings.Contains(list, gitID) {
		t.Fatalf("the hold is not kept:\n%s", list)
	}
	if err := os.Rename(away, l.origin); err != nil {
		t.Fatal(err)
	}
	text, isErr = l.call("send_email", gitArgs)
	l.expect("git back", text, isErr, "needs approval", prURL+"4", gitID)
	if err := os.Rename(l.origin, away); err != nil {
		t.Fatal(err)
	}
	text, isErr = l.call("send_email", gitArgs)
	l.expect("git unreachable on check", text, isErr, "blocked", "could not be checked", "hold is kept", gitID)
	if err := os.Rename(away, l.origin); err != nil {
		t.Fatal(err)
	}

	// Signed by a key the operator does not trust: refused, then CI's key works.
	l.gh.Merge(3, l.merge("planlock/hold/refund-4711/"+ghID))
	l.ciSign("holds/refund-4711/"+ghID+".hcl", 3, l.otherKey)
	text, isErr = l.call("send_email", ghArgs)
	l.expect("untrusted key", text, isErr, "blocked", "does not verify")
	l.ciSign("holds/refund-4711/"+ghID+".hcl", 3, l.ciKey)
	if text, isErr = l.call("send_email", ghArgs); isErr {
		t.Fatalf("approved after the retry: %s", text)
	}

	// A signed approval for other arguments: the reviewer edits the hold
	// file in the pull request before merging; CI signs what was merged.
	origArgs := map[string]any{"to": "customer-4711@example.com", "body": "original"}
	text, isErr = l.call("send_email", origArgs)
	l.expect("edited hold", text, isErr, prURL+"5")
	edID := holdID(t, text)
	edBranch, edPath := "planlock/hold/refund-4711/"+edID, "holds/refund-4711/"+edID+".hcl"
	rgit(t, l.reviewer, "fetch", "-q", "origin")
	rgit(t, l.reviewer, "checkout", "-q", "-B", "edit", "origin/"+edBranch)
	src, err := os.ReadFile(filepath.Join(l.reviewer, filepath.FromSlash(edPath)))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(l.reviewer, filepath.FromSlash(edPath)), strings.Replace(string(src), `original`, `edited by the reviewer`, 1))
	rgit(t, l.reviewer, "commit", "-q", "-am", "edit the call")
	rgit(t, l.reviewer, "push", "-q", "origin", "edit:"+edBranch)
	rgit(t, l.reviewer, "checkout", "-q", "main")
	l.gh.Merge(5, l.merge(edBranch))
	l.ciSign(edPath, 5, l.ciKey)
	text, isErr = l.call("send_email", origArgs)
	l.expect("approval for other arguments", text, isErr, "blocked", "for another call", "edited by the reviewer")
	for _, c := range l.calls("send_email") {
		if strings.Contains(string(c.Arguments), "original") || strings.Contains(string(c.Arguments), "edited") {
			t.Fatalf("a call without a matching approval reached the upstream: %s", c.Arguments)
		}
	}
	if n := len(l.calls("send_email")); n != 1 {
		t.Fatalf("send_email reached the upstream %d times, want 1 (the approved github-outage call)", n)
	}

	// planlock holds shows every hold with its state and pull request.
	list := l.holdsCLI("list")
	for _, want := range []string{id + "  consumed", rejID + "  rejected", ghID + "  consumed", gitID + "  pending", edID + "  pending", prURL + "1", prURL + "2", prURL + "5"} {
		if !strings.Contains(list, want) {
			t.Errorf("holds list lacks %q:\n%s", want, list)
		}
	}
	if show := l.holdsCLI("show", rejID); !strings.Contains(show, "rejected") || !strings.Contains(show, prURL+"2") {
		t.Errorf("holds show %s:\n%s", rejID, show)
	}

	// The proxy's token never reached the upstream.
	env, err := os.ReadFile(l.envFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(env), ghToken) || strings.Contains(string(env), "GITHUB_TOKEN") {
		t.Fatalf("the upstream's environment holds the GitHub token:\n%s", env)
	}
}

// Without a GitHub token the proxy decides from Git alone: it pushes the
// hold branch and says where to open the pull request; merged means the
// hold file reached main (and CI signed it); a hold branch deleted without
// merging means refused.
func TestHoldLoopGitOnly(t *testing.T) {
	l := newLoop(t, false)
	args := map[string]any{"to": "customer-4711@example.com", "body": "git only"}
	text, isErr := l.call("send_email", args)
	l.expect("git only hold", text, isErr, "needs approval", "open a pull request from it into main", "repeat exactly the same call")
	id := holdID(t, text)
	branch, path := "planlock/hold/refund-4711/"+id, "holds/refund-4711/"+id+".hcl"
	if !strings.Contains(text, "pushed branch "+branch) {
		t.Fatalf("the answer does not name the pushed branch: %s", text)
	}
	rgit(t, l.origin, "rev-parse", "--verify", "refs/heads/"+branch)

	l.merge(branch)
	text, isErr = l.call("send_email", args)
	l.expect("merged, unsigned", text, isErr, "not published yet")
	l.ciSign(path, 0, l.ciKey)
	if text, isErr = l.call("send_email", args); isErr {
		t.Fatalf("approved call: %s", text)
	}
	text, isErr = l.call("send_email", args)
	l.expect("after consumption", text, isErr, "needs approval")
	if again := holdID(t, text); again == id {
		t.Fatalf("the consumed hold %s was offered again", id)
	}

	// Refused: the reviewer deletes the hold branch without merging.
	rej := map[string]any{"to": "customer-4711@example.com", "body": "refuse me"}
	text, isErr = l.call("send_email", rej)
	l.expect("to be refused", text, isErr, "needs approval")
	rejID := holdID(t, text)
	rgit(t, l.reviewer, "push", "-q", "origin", "--delete", "planlock/hold/refund-4711/"+rejID)
	text, isErr = l.call("send_email", rej)
	l.expect("branch deleted", text, isErr, "blocked", "rejected", "its branch was deleted without merging", "do not retry", rejID)

	got := l.calls("send_email")
	if len(got) != 1 || !strings.Contains(string(got[0].Arguments), "git only") {
		t.Fatalf("upstream got %+v, want the approved call once", got)
	}
}
