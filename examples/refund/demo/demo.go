package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planlock/planlock/internal/testkit/peers"
)

// options tune a run of the story.
type options struct {
	// Dir is where everything lives; "" makes a temporary directory.
	Dir string
	// Keep leaves the temporary directory in place (and names it).
	Keep bool
	// Progress, when set, gets the build's progress (a cold build takes
	// minutes): packages compiled, and a line every buildTick.
	Progress io.Writer
	// editPlan, when set, changes the plan before it is approved: the test
	// uses it to prove that an outcome other than the expected one fails
	// the run.
	editPlan func(string) string
}

const (
	approvedHash = "9f86d081884c7d65" // the refund script's hash the plan pins
	changedHash  = "0c1f2e3d4b5a6978" // the hash after a colleague redeploys it
	repoSlug     = "acme/plans"
	planPath     = "plans/refund.hcl"
	testsPath    = "plans/refund_test.hcl"
	approvals    = "planlock/approvals"
)

// planTemplate is examples/refund/refund.hcl with the demo's own upstream and
// an expiry computed at run time. The refund step allows max_calls = 2: the
// first refund goes through, and the second one is what the changed pin
// holds. With max_calls = 1 the second refund would be blocked by the count
// before the pin is even read, and there would be no hold to approve.
const planTemplate = `plan "refund-4711" {
  goal         = "Refund order 4711 (at most 30 EUR per refund), email the customer, close the ticket"
  expires      = %s
  order        = "sequential"
  on_violation = "block"

  upstream {
    command = [%s, "--hash-file", %s, "--calls-log", %s]
  }

  step "lookup" {
    tool      = "get_order"
    max_calls = 3
    arg "order_id" { eq = "4711" }
  }

  step "refund" {
    tool      = "refund_customer"
    max_calls = 2
    on_error  = "hold"
    arg "order_id" { eq = "4711" }
    arg "amount" {
      min = 1
      max = 30
    }
    arg "currency" { enum = ["EUR"] }
    arg "note" {
      max_length = 200
      optional   = true
    }
    pin {
      tool  = "get_script_by_path"
      args  = { path = "f/support/refund_customer" }
      field = "hash"
      eq    = "%s"
    }
  }

  step "email" {
    tool     = "send_email"
    approval = "each"
    arg "to" { pattern = "^customer-4711@example\\.com$" }
    arg "body" { max_length = 2000 }
  }

  step "close" {
    tool = "close_ticket"
    arg "ticket_id" { eq = "T-4711" }
    arg "comment" { any = true }
  }
}
`

// story prints the steps and remembers whether each went as expected.
type story struct {
	out        io.Writer
	ok, failed int
}

func (s *story) section(title string) { fmt.Fprintf(s.out, "\n== %s\n", title) }

// step prints one line: ✔ or ✘, who did what, and what came back.
func (s *story) step(good bool, what, answer string) {
	mark := "✔"
	if good {
		s.ok++
	} else {
		mark = "✘"
		s.failed++
	}
	if answer != "" {
		fmt.Fprintf(s.out, "%s %s\n    → %s\n", mark, what, answer)
	} else {
		fmt.Fprintf(s.out, "%s %s\n", mark, what)
	}
}

// world is the set-up: binaries, repositories, keys and files in one directory.
type world struct {
	dir                                  string
	planlock, server                     string
	home                                 string
	origin, author, reviewer, ci, deploy string
	key, pub                             string
	planBundle                           string
	hashFile, callsLog, auditLog, state  string
	proxyLog                             string
	opts                                 options
}

// buildTick is how often a build that is still running says so.
const buildTick = 15 * time.Second

func run(ctx context.Context, out io.Writer, opts options) (err error) {
	if _, err := peers.RepoRoot(); err != nil {
		return fmt.Errorf("run the demo from the planlock repository: %w", err)
	}
	dir := opts.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "planlock-demo-"); err != nil {
			return fmt.Errorf("temporary directory: %w", err)
		}
		// A failed run keeps its directory: the proxy log, the state and
		// the repositories say what happened.
		defer func() {
			if opts.Keep || err != nil {
				fmt.Fprintf(out, "\nEverything is kept in %s (the proxy's log: operator/proxy.log)\n", dir)
				return
			}
			os.RemoveAll(dir)
		}()
	}
	w := &world{opts: opts, dir: dir, home: filepath.Join(dir, "home"),
		origin: filepath.Join(dir, "origin.git"), author: filepath.Join(dir, "alice"), reviewer: filepath.Join(dir, "bob"),
		ci: filepath.Join(dir, "ci"), deploy: filepath.Join(dir, "operator", "plans"),
		hashFile: filepath.Join(dir, "refund-system", "script.hash"), callsLog: filepath.Join(dir, "refund-system", "calls.jsonl"),
		state: filepath.Join(dir, "operator", "state"), auditLog: filepath.Join(dir, "operator", "audit.jsonl"),
		planBundle: filepath.Join(dir, "operator", "refund.hcl.sigstore.json"), proxyLog: filepath.Join(dir, "operator", "proxy.log")}
	s := &story{out: out}

	fmt.Fprintln(out, "planlock demo: an agent may refund order 4711 (at most 30 EUR per refund), nothing else.")
	fmt.Fprintln(out, "Alice writes the plan, Bob reviews and merges, CI signs, the operator runs planlock proxy in front of the refund system, and the agent is a scripted MCP client.")
	fmt.Fprintln(out, "Building planlock and the example refund server ...")
	bins, err := peers.BuildCommandsProgress(filepath.Join(dir, "bin"), opts.Progress, buildTick, "./cmd/planlock", peers.PkgRefundServer)
	if err != nil {
		return err
	}
	w.planlock, w.server = bins["./cmd/planlock"], bins[peers.PkgRefundServer]
	for _, d := range []string{w.home, filepath.Dir(w.hashFile), filepath.Dir(w.state)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	// Git sees only this file, never the machine's configuration.
	if err := os.WriteFile(filepath.Join(w.home, ".gitconfig"), []byte("[user]\n\tname = Demo\n\temail = demo@example.com\n[init]\n\tdefaultBranch = main\n"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(w.hashFile, []byte(approvedHash+"\n"), 0o644); err != nil {
		return err
	}

	if err := w.observeFirst(ctx, s); err != nil {
		return err
	}
	if err := w.approvePlan(ctx, s); err != nil {
		return err
	}
	if err := w.agentStory(ctx, s); err != nil {
		return err
	}
	w.checkAudit(ctx, s)

	fmt.Fprintf(out, "\nSummary: %d of %d steps went as expected.\n", s.ok, s.ok+s.failed)
	if s.failed > 0 {
		return fmt.Errorf("%d step(s) differ from the expected outcome", s.failed)
	}
	fmt.Fprintln(out, "Nothing outside the approved plan reached the refund system; the one extra refund ran after a human merged its hold, exactly once.")
	return nil
}

// env is what every command of the demo sees: a clean environment, so no
// token or Git setting of the machine (or of a CI job) changes the story.
func (w *world) env(who string) []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + w.home,
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + filepath.Join(w.home, ".gitconfig"),
		"GIT_AUTHOR_NAME=" + who, "GIT_AUTHOR_EMAIL=" + strings.ToLower(who) + "@example.com",
		"GIT_COMMITTER_NAME=" + who, "GIT_COMMITTER_EMAIL=" + strings.ToLower(who) + "@example.com",
		"GITHUB_TOKEN=", "GH_TOKEN=", "TZ=UTC"}
}

// cmd runs a command as who in dir and returns its combined output.
func (w *world) cmd(ctx context.Context, who, dir, name string, args ...string) (string, error) {
	c := exec.CommandContext(ctx, name, args...)
	c.Dir = dir
	c.Env = w.env(who)
	out, err := c.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if msg != "" {
			msg = "\n" + msg
		}
		return string(out), fmt.Errorf("%s %s (in %s): %w%s", filepath.Base(name), strings.Join(args, " "), dir, err, msg)
	}
	return strings.TrimSpace(string(out)), nil
}

func (w *world) git(ctx context.Context, who, dir string, args ...string) (string, error) {
	return w.cmd(ctx, who, dir, "git", args...)
}

// gits runs several git commands in dir, stopping at the first failure.
func (w *world) gits(ctx context.Context, who, dir string, cmds ...[]string) error {
	for _, a := range cmds {
		if _, err := w.git(ctx, who, dir, a...); err != nil {
			return err
		}
	}
	return nil
}

// approvePlan is part 1: the plan goes through a pull request, a merge and
// CI's signature, and the operator deploys it.
func (w *world) approvePlan(ctx context.Context, s *story) error {
	s.section("1. The plan is written, approved by a merge, and signed")
	if err := w.gits(ctx, "Admin", w.dir,
		[]string{"init", "-q", "--bare", "-b", "main", w.origin},
		[]string{"clone", "-q", w.origin, w.author}); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(w.author, "README.md"), []byte("# Plans of acme's agents\n"), 0o644); err != nil {
		return err
	}
	if err := w.gits(ctx, "Admin", w.author, []string{"checkout", "-q", "-B", "main"}, []string{"add", "README.md"},
		[]string{"commit", "-q", "-m", "plans repository"}, []string{"push", "-q", "origin", "main"}); err != nil {
		return err
	}
	s.step(true, "admin: a plans repository (bare origin "+filepath.Base(w.origin)+", branch main)", "")

	if err := os.MkdirAll(filepath.Join(w.author, "plans"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(w.author, planPath), []byte(w.plan()), 0o644); err != nil {
		return err
	}
	// The plan's tests, written in act 0, go beside it and so into the
	// approval pull request.
	if err := os.WriteFile(filepath.Join(w.author, testsPath), []byte(planTests), 0o644); err != nil {
		return err
	}
	got, err := w.cmd(ctx, "Alice", w.author, w.planlock, "approve", planPath)
	branch := "planlock/approve/refund-4711"
	tests, terr := w.git(ctx, "Alice", w.origin, "show", branch+":"+testsPath)
	s.step(err == nil && strings.Contains(got, "pushed branch "+branch) && terr == nil && tests == strings.TrimSpace(planTests),
		"alice: planlock approve "+planPath+" (no GitHub token: the branch is pushed, the PR is opened by hand)", lastLine(got))
	if err != nil {
		return err
	}

	if err := w.gits(ctx, "Bob", w.dir, []string{"clone", "-q", w.origin, w.reviewer}); err != nil {
		return err
	}
	merge, err := w.merge(ctx, branch, 1)
	s.step(err == nil, "bob (reviewer): reads pull request #1 and merges it: git merge --no-ff origin/"+branch, "main is now "+short(merge))
	if err != nil {
		return err
	}

	if _, err := w.cmd(ctx, "CI", w.dir, w.planlock, "keygen", "--out-dir", filepath.Join(w.ci, "keys"), "--name", "ci"); err != nil {
		return err
	}
	w.key, w.pub = filepath.Join(w.ci, "keys", "ci.key"), filepath.Join(w.ci, "keys", "ci.pub")
	s.step(true, "ci: planlock keygen (the operator trusts ci.pub; ci.key stays with CI)", "")
	signed, err := w.ciSign(ctx, "plan", planPath, 1, merge)
	s.step(err == nil, "ci: on the merge, planlock sign --key ci.key --kind plan --repository "+repoSlug+" --pr 1 --commit "+short(merge)+" "+planPath+", then publish the bundle on "+approvals, signed)
	if err != nil {
		return err
	}

	// The operator deploys main and takes the plan's bundle from the
	// approvals branch, as docs/approvals.md describes.
	if err := w.gits(ctx, "Operator", w.dir, []string{"clone", "-q", w.origin, w.deploy}); err != nil {
		return err
	}
	bundle, err := w.git(ctx, "Operator", w.deploy, "show", "origin/"+approvals+":"+planPath+".sigstore.json")
	if err != nil {
		return err
	}
	if err := os.WriteFile(w.planBundle, []byte(bundle), 0o644); err != nil {
		return err
	}
	got, err = w.cmd(ctx, "Operator", w.deploy, w.planlock, "verify", "--key", w.pub, "--bundle", w.planBundle, planPath)
	s.step(err == nil, "operator: clones main, fetches the bundle, planlock verify --key ci.pub "+planPath, lastLine(got))
	return err
}

// plan is the plan Alice approves: planTemplate with the demo's upstream and
// an expiry a week from now.
func (w *world) plan() string {
	expires := time.Now().Add(7 * 24 * time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	plan := fmt.Sprintf(planTemplate, strconv.Quote(expires), strconv.Quote(w.server), strconv.Quote(w.hashFile), strconv.Quote(w.callsLog), approvedHash)
	if w.opts.editPlan != nil {
		plan = w.opts.editPlan(plan)
	}
	return plan
}

// merge plays the reviewer: the real git merges branch into main and pushes.
func (w *world) merge(ctx context.Context, branch string, pr int) (string, error) {
	if err := w.gits(ctx, "Bob", w.reviewer,
		[]string{"checkout", "-q", "main"}, []string{"pull", "-q", "--ff-only", "origin", "main"}, []string{"fetch", "-q", "origin"},
		[]string{"merge", "-q", "--no-ff", "-m", fmt.Sprintf("Merge pull request #%d from %s", pr, branch), "origin/" + branch},
		[]string{"push", "-q", "origin", "main"}); err != nil {
		return "", err
	}
	return w.git(ctx, "Bob", w.reviewer, "rev-parse", "HEAD")
}

// ciSign plays the sign-on-merge job: a checkout of main at the merge, the
// file signed with the CI key and the predicate a CI job knows (repository,
// ref, pull request, merge commit), and the bundle committed at the file's
// path on the approvals branch.
func (w *world) ciSign(ctx context.Context, kind, path string, pr int, commit string) (string, error) {
	work := filepath.Join(w.ci, "work")
	if _, err := os.Stat(work); err != nil {
		if err := w.gits(ctx, "CI", w.dir, []string{"clone", "-q", w.origin, work}); err != nil {
			return "", err
		}
	}
	if err := w.gits(ctx, "CI", work, []string{"fetch", "-q", "origin"}, []string{"checkout", "-q", "-B", "main", commit}); err != nil {
		return "", err
	}
	bundle := filepath.Join(w.ci, "bundle.json")
	got, err := w.cmd(ctx, "CI", work, w.planlock, "sign", "--key", w.key, "--kind", kind,
		"--repository", repoSlug, "--ref", "refs/heads/main", "--pr", strconv.Itoa(pr), "--commit", commit, "--out", bundle, path)
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(bundle)
	if err != nil {
		return "", err
	}
	if _, err := w.git(ctx, "CI", work, "ls-remote", "--exit-code", "--heads", "origin", approvals); err != nil {
		err = w.gits(ctx, "CI", work, []string{"checkout", "-q", "--orphan", "approvals"}, []string{"rm", "-rfq", "--ignore-unmatch", "."})
		if err != nil {
			return "", err
		}
	} else if err := w.gits(ctx, "CI", work, []string{"checkout", "-q", "-B", "approvals", "origin/" + approvals}); err != nil {
		return "", err
	}
	dst := filepath.Join(work, filepath.FromSlash(path)+".sigstore.json")
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		return "", err
	}
	err = w.gits(ctx, "CI", work, []string{"add", path + ".sigstore.json"}, []string{"commit", "-q", "-m", "sign " + path},
		[]string{"push", "-q", "origin", "approvals:" + approvals}, []string{"checkout", "-q", "main"})
	return lastLine(got), err
}

// agent is the scripted MCP client, talking to the proxy over stdio.
type agent struct {
	c   *client.Client
	log *os.File // the proxy's stderr
}

// stop ends the proxy (closing its stdin) and closes its log.
func (a *agent) stop() error {
	err := a.c.Close()
	if cerr := a.log.Close(); err == nil {
		err = cerr
	}
	return err
}

func (w *world) startAgent(ctx context.Context) (*agent, error) {
	args := []string{"proxy", "--plan", filepath.Join(w.deploy, planPath), "--bundle", w.planBundle, "--key", w.pub,
		"--state", w.state, "--audit", w.auditLog,
		// The held call waits for its branch to be pushed, so that the
		// answer names it (the default gives up after 5s and goes on in
		// the background).
		"--hold-open-wait", "2m"}
	return w.startProxy(ctx, w.deploy, w.proxyLog, args)
}

// startProxy runs planlock with args in dir (its stderr in logPath) and
// connects the scripted agent to it.
func (w *world) startProxy(ctx context.Context, dir, logPath string, args []string) (*agent, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	env := w.env("Proxy")
	tr := transport.NewStdioWithOptions(w.planlock, nil, args,
		transport.WithCommandFunc(func(ctx context.Context, command string, _ []string, args []string) (*exec.Cmd, error) {
			cmd := exec.CommandContext(ctx, command, args...)
			cmd.Dir = dir
			cmd.Env = env
			cmd.Stderr = logf
			return cmd, nil
		}))
	c := client.NewClient(tr)
	if err := c.Start(ctx); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start the proxy: %w", err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "refund-agent", Version: "1"}
	ictx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := c.Initialize(ictx, init); err != nil {
		c.Close()
		logf.Close()
		log, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("the proxy did not start: %w\n%s", err, log)
	}
	return &agent{c: c, log: logf}, nil
}

// outcome of one call as the agent sees it.
type outcome struct {
	text    string
	isError bool
}

func (o outcome) kind() string {
	switch {
	case !o.isError:
		return "forwarded"
	case strings.Contains(o.text, "needs approval"):
		return "held"
	case strings.HasPrefix(o.text, "blocked"):
		return "blocked"
	default:
		// Forwarded, and the refund system answered with an error.
		return "failed upstream"
	}
}

func (a *agent) call(ctx context.Context, tool string, args map[string]any) (outcome, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	res, err := a.c.CallTool(cctx, req)
	if err != nil {
		return outcome{}, fmt.Errorf("call %s: %w", tool, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return outcome{text: b.String(), isError: res.IsError}, nil
}

// attempt is one thing the agent tries and what planlock must answer.
type attempt struct {
	what string
	tool string
	args map[string]any
	want string // forwarded, blocked or held
	// has are fragments the answer must contain.
	has []string
}

func (w *world) try(ctx context.Context, s *story, a *agent, at attempt) (outcome, error) {
	o, err := a.call(ctx, at.tool, at.args)
	if err != nil {
		s.step(false, "agent: "+at.what, err.Error())
		return o, err
	}
	good := o.kind() == at.want
	for _, f := range at.has {
		good = good && strings.Contains(o.text, f)
	}
	answer := firstLine(o.text)
	if o.kind() == "held" {
		answer = strings.TrimSpace(o.text) // what the model is told to do, in full
	}
	if !strings.HasPrefix(answer, o.kind()) {
		answer = o.kind() + ": " + answer
	}
	s.step(good, fmt.Sprintf("agent: %s (expected: %s)", at.what, at.want), answer)
	return o, nil
}

var holdIDRe = regexp.MustCompile(`hold ([0-9a-f]{16})`)

// agentStory is part 2: the proxy in front of the refund server, and the agent.
func (w *world) agentStory(ctx context.Context, s *story) error {
	s.section("2. The agent works through planlock proxy")
	a, err := w.startAgent(ctx)
	if err != nil {
		return err
	}
	closed := false
	defer func() {
		if !closed {
			a.stop()
		}
	}()
	s.step(true, "operator: planlock proxy --plan "+planPath+" --key ci.pub --state ... --audit ... (upstream: the refund server, from the plan)", "plan verified and loaded")

	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	tools, err := a.c.ListTools(lctx, mcp.ListToolsRequest{})
	cancel()
	if err != nil {
		return fmt.Errorf("tools/list: %w", err)
	}
	var names []string
	for _, t := range tools.Tools {
		names = append(names, t.Name)
	}
	want := "close_ticket get_order refund_customer send_email"
	s.step(sortedJoin(names) == want, "agent: lists the tools (the server has 5, get_script_by_path is not in the plan)", "shown: "+strings.Join(names, ", "))

	refund := func(order string, amount float64) map[string]any {
		return map[string]any{"order_id": order, "amount": amount, "currency": "EUR"}
	}
	for _, at := range []attempt{
		{what: "get_order 4711", tool: "get_order", args: map[string]any{"order_id": "4711"}, want: "forwarded"},
		{what: "refund_customer 300 EUR on order 4711 (above the approved maximum)", tool: "refund_customer", args: refund("4711", 300), want: "blocked", has: []string{"amount"}},
		{what: "refund_customer 30 EUR on order 4712 (another customer's order)", tool: "refund_customer", args: refund("4712", 30), want: "blocked", has: []string{"order_id"}},
		{what: "send_email to the customer before refunding (out of order)", tool: "send_email", args: map[string]any{"to": "customer-4711@example.com", "body": "Your refund is on its way."}, want: "blocked", has: []string{"refund"}},
		{what: "refund_customer 30 EUR on order 4711", tool: "refund_customer", args: refund("4711", 30), want: "forwarded"},
	} {
		if _, err := w.try(ctx, s, a, at); err != nil {
			return err
		}
	}

	s.section("3. The refund script changes under the running plan")
	if err := os.WriteFile(w.hashFile, []byte(changedHash+"\n"), 0o644); err != nil {
		return err
	}
	s.step(true, "colleague: redeploys the refund script (its hash is now "+changedHash+", the plan pins "+approvedHash+")", "")
	second := refund("4711", 20)
	o, err := w.try(ctx, s, a, attempt{what: "refund_customer 20 EUR on order 4711", tool: "refund_customer", args: second, want: "held", has: []string{"repeat exactly the same call"}})
	if err != nil {
		return err
	}
	m := holdIDRe.FindStringSubmatch(o.text)
	if m == nil {
		s.step(false, "planlock: names the hold in its answer", firstLine(o.text))
		return errors.New("the held call's answer names no hold; the rest of the story needs it")
	}
	id := m[1]
	branch, holdPath := "planlock/hold/refund-4711/"+id, "holds/refund-4711/"+id+".hcl"
	holdFile, err := w.git(ctx, "Bob", w.origin, "show", branch+":"+holdPath)
	s.step(err == nil && strings.Contains(holdFile, `observed_pin = "`+changedHash+`"`),
		"origin: hold branch "+branch+" appeared with "+holdPath, holdLine(holdFile, "reason"))
	if err != nil {
		return err
	}

	// The agent is impatient: the same call while the pull request is open
	// gets the same hold back, and no second branch.
	if _, err := w.try(ctx, s, a, attempt{what: "repeats the call before anyone reviewed it", tool: "refund_customer", args: second,
		want: "held", has: []string{"hold " + id, "Ask the user to review and merge it"}}); err != nil {
		return err
	}
	heads, err := w.git(ctx, "Bob", w.origin, "for-each-ref", "--format=%(refname:short)", "refs/heads/planlock/hold/")
	s.step(err == nil && heads == branch, "origin: still exactly one hold branch", heads)

	merge, err := w.merge(ctx, branch, 2)
	s.step(err == nil, "bob (reviewer): checks the new script, merges pull request #2: git merge --no-ff origin/"+branch, "main is now "+short(merge))
	if err != nil {
		return err
	}
	// Merged is not enough: the proxy runs the call only once CI's
	// signature over the merged hold file is published.
	if _, err := w.try(ctx, s, a, attempt{what: "repeats the call right after the merge, before CI signed it", tool: "refund_customer", args: second,
		want: "held", has: []string{"hold " + id, "not published yet"}}); err != nil {
		return err
	}
	signed, err := w.ciSign(ctx, "hold", holdPath, 2, merge)
	s.step(err == nil, "ci: planlock sign --key ci.key --kind hold --pr 2 --commit "+short(merge)+" "+holdPath+", bundle published on "+approvals, signed)
	if err != nil {
		return err
	}
	// The merge also moved the plan's pin to the new hash; CI signs every
	// plan a merge changes. The running proxy keeps its deployed plan.
	signed, err = w.ciSign(ctx, "plan", planPath, 2, merge)
	s.step(err == nil, "ci: the merge also updated the pin in "+planPath+": signed and published too", signed)
	if err != nil {
		return err
	}

	if _, err := w.try(ctx, s, a, attempt{what: "repeats exactly the same call: refund_customer 20 EUR on order 4711", tool: "refund_customer", args: second, want: "forwarded"}); err != nil {
		return err
	}
	if _, err := w.try(ctx, s, a, attempt{what: "repeats it once more", tool: "refund_customer", args: second, want: "blocked"}); err != nil {
		return err
	}
	list, err := w.cmd(ctx, "Operator", w.dir, w.planlock, "holds", "list", "--state", w.state)
	s.step(err == nil && strings.Contains(list, id+"  consumed"), "operator: planlock holds list", holdRow(list, id))
	closed = true
	if err := a.stop(); err != nil {
		return fmt.Errorf("stop the proxy: %w", err)
	}
	return nil
}

// checkAudit is part 4: the audit chain verifies and the refund system saw
// exactly the calls the plan and the reviewer allowed.
func (w *world) checkAudit(ctx context.Context, s *story) {
	s.section("4. What happened, checked")
	got, err := w.cmd(ctx, "Auditor", w.dir, w.planlock, "audit", "verify", w.auditLog)
	s.step(err == nil, "auditor: planlock audit verify "+filepath.Base(w.auditLog), strings.ReplaceAll(got, "\n", ", "))

	decisions, err := readDecisions(w.auditLog)
	wantDecisions := "allow get_order, block refund_customer, block refund_customer, block send_email, allow refund_customer, " +
		"hold refund_customer, hold refund_customer, hold refund_customer, allow refund_customer, block refund_customer"
	answer := strings.Join(decisions, ", ")
	if err != nil {
		answer = err.Error()
	}
	s.step(err == nil && answer == wantDecisions, "auditor: the audit log records every decision, in order", answer)

	calls, pins, err := readCalls(w.callsLog)
	want := []string{
		`get_order {"order_id":"4711"}`,
		`refund_customer {"amount":30,"currency":"EUR","order_id":"4711"}`,
		`refund_customer {"amount":20,"currency":"EUR","order_id":"4711"}`,
	}
	good := err == nil && strings.Join(calls, "\n") == strings.Join(want, "\n")
	answer = fmt.Sprintf("%d agent calls reached it (plus %d pin reads by planlock itself)", len(calls), pins)
	if err != nil {
		answer = err.Error()
	}
	s.step(good, "refund system: its calls log holds exactly get_order 4711, the 30 EUR refund and the approved 20 EUR refund", answer)
	for _, c := range calls {
		fmt.Fprintf(s.out, "      %s\n", c)
	}
}

// auditRecord is what the demo reads of an audit log line.
type auditRecord struct {
	Type     string `json:"type"`
	Decision string `json:"decision"`
	Tool     string `json:"tool"`
}

// readAudit reads every record of an audit log.
func readAudit(path string) ([]auditRecord, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	defer f.Close()
	var out []auditRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec auditRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return nil, fmt.Errorf("audit log line %q: %w", sc.Text(), err)
		}
		out = append(out, rec)
	}
	return out, sc.Err()
}

// readDecisions lists the audit log's decisions as "decision tool".
func readDecisions(path string) ([]string, error) {
	recs, err := readAudit(path)
	var out []string
	for _, rec := range recs {
		if rec.Type == "decision" {
			out = append(out, rec.Decision+" "+rec.Tool)
		}
	}
	return out, err
}

// readCalls reads the refund server's calls log: the agent's calls as
// "tool arguments" lines (arguments re-encoded with sorted keys), and the
// number of pin reads (get_script_by_path, made by the proxy).
func readCalls(path string) ([]string, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("calls log: %w", err)
	}
	defer f.Close()
	var calls []string
	pins := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec struct {
			Tool      string          `json:"tool"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return nil, 0, fmt.Errorf("calls log line %q: %w", sc.Text(), err)
		}
		if rec.Tool == "get_script_by_path" {
			pins++
			continue
		}
		var v any
		if err := json.Unmarshal(rec.Arguments, &v); err != nil {
			return nil, 0, fmt.Errorf("calls log arguments %s: %w", rec.Arguments, err)
		}
		canon, err := json.Marshal(v) // maps marshal with sorted keys
		if err != nil {
			return nil, 0, err
		}
		calls = append(calls, rec.Tool+" "+string(canon))
	}
	return calls, pins, sc.Err()
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	const max = 220
	if r := []rune(s); len(r) > max {
		s = string(r[:max]) + "…"
	}
	return s
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return firstLine(s)
}

// holdLine returns the value line of attribute name in a hold file.
func holdLine(src, name string) string {
	for _, l := range strings.Split(src, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == name {
			return strings.TrimSpace(l)
		}
	}
	return firstLine(src)
}

// holdRow is the line of planlock holds list about hold id.
func holdRow(list, id string) string {
	for _, l := range strings.Split(list, "\n") {
		if strings.Contains(l, id) {
			return strings.Join(strings.Fields(l), " ")
		}
	}
	return firstLine(list)
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

func sortedJoin(names []string) string {
	cp := append([]string(nil), names...)
	sort.Strings(cp)
	return strings.Join(cp, " ")
}
