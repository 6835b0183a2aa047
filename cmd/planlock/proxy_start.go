package main

import (
	"bufio"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/planlock/planlock/internal/oneline"
	"github.com/planlock/planlock/proxy"
	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/proxy/ledger/pgstate"
)

// stateOptions are the state directory flags of the proxy and of the
// commands that read its state.
type stateOptions struct {
	State     string
	StateRoot string
}

func (o *stateOptions) flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "state", Usage: "the state `DIR` itself (default: a directory under --state-root per signed path and trust policy), or a postgres:// URL shared by several proxies (see planlock state migrate)", TakesFile: true, Destination: &o.State},
		&cli.StringFlag{Name: "state-root", Usage: "`DIR` holding one state directory per plan (default: $XDG_STATE_HOME/planlock, else ~/.local/state/planlock)", TakesFile: true, Destination: &o.StateRoot},
	}
}

// root is --state-root or the default.
func (o *stateOptions) root() (string, error) {
	if o.StateRoot != "" {
		return o.StateRoot, nil
	}
	r, err := ledger.DefaultDir()
	if err != nil {
		return "", failf("state directory: %v", err)
	}
	return r, nil
}

const proxyLogName = "proxy.log"

// logPath is where the proxy writes why it could not start: --log-file,
// else proxy.log in its state directory once it is known (the plan
// verified), else the state root's.
func (o *proxyOptions) logPath() string {
	if o.LogFile != "" {
		return o.LogFile
	}
	if o.State != "" && !pgstate.IsURL(o.State) {
		return filepath.Join(o.State, proxyLogName)
	}
	if o.localDir != "" {
		return filepath.Join(o.localDir, proxyLogName)
	}
	root, err := o.root()
	if err != nil {
		return ""
	}
	return filepath.Join(root, proxyLogName)
}

// proxyLog appends one line to the proxy's log file.
func proxyLog(path, line string) error {
	if path == "" {
		return errors.New("no log file")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	_, werr := fmt.Fprintf(f, "%s pid %d: %s\n", time.Now().UTC().Format(time.RFC3339), os.Getpid(), oneline.Of(line, 0))
	if err := f.Close(); werr == nil {
		werr = err
	}
	return werr
}

// initializeWait bounds how long a proxy that cannot start waits for the
// client's first request to answer it with the reason.
const initializeWait = 10 * time.Second

// reportStartFailure tells a client that shows only "connection closed" why
// the proxy stopped: the reason goes to the log file and, over stdio, into
// the JSON-RPC error answering the client's first request.
func reportStartFailure(o *proxyOptions, err error) {
	reason := err.Error()
	logPath := o.logPath()
	if lerr := proxyLog(logPath, "cannot start ("+commandLineOf(os.Args)+"): "+reason); lerr != nil {
		logPath = ""
	}
	if o.Listen != "" {
		var ee *exitError
		if errors.As(err, &ee) && ee.code == exitUsage {
			return // the command line is wrong: nobody to answer
		}
		answerHTTP(o, "planlock proxy cannot start: "+reason, logPath, initializeWait)
		return
	}
	answerInitialize(o.IO.in, o.IO.out, "planlock proxy cannot start: "+reason, logPath, initializeWait)
}

// answerHTTP is answerInitialize over streamable HTTP: it listens on
// --listen again (the failed start closed it) and answers each POST to
// /mcp, whatever its method or era, with a JSON-RPC error carrying msg; it
// stops wait after it began listening, or a tenth of it after the last
// answer. A configured listen token is still required, and a browser's
// Origin must still be allowed: the reason is for the proxy's own clients.
// When the address cannot be bound (the failure may be that) nothing is
// answered.
func answerHTTP(o *proxyOptions, msg, logPath string, wait time.Duration) {
	ln := o.startLn
	host, port, err := net.SplitHostPort(o.Listen)
	if ln == nil && (err != nil || port == "0") {
		return // no address a client could know
	}
	if host == "" {
		host = "127.0.0.1"
	}
	token, err := o.listenToken()
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		return // no token to check: better no answer than one to anyone
	}
	allowed := map[string]bool{}
	for _, origin := range o.AllowOrigin.Value() {
		if n, err := proxy.NormalizeOrigin(origin); err == nil {
			allowed[n] = true
		}
	}
	if ln == nil {
		if ln, err = net.Listen("tcp", net.JoinHostPort(host, port)); err != nil {
			return
		}
	}
	serveStartFailure(ln, token, allowed, msg, logPath, wait)
}

// serveStartFailure serves answerHTTP's answers on ln until it is idle for
// wait (then a tenth of it after each answer), and closes ln.
func serveStartFailure(ln net.Listener, token string, allowed map[string]bool, msg, logPath string, wait time.Duration) {
	answered := make(chan struct{}, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" {
			if n, err := proxy.NormalizeOrigin(origin); err != nil || !allowed[n] {
				http.Error(w, "planlock: origin not allowed", http.StatusForbidden)
				return
			}
		}
		if token != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+token)) != 1 {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "planlock: missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		if r.URL.Path != "/mcp" {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, msg, http.StatusMethodNotAllowed)
			return
		}
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
			http.Error(w, msg, http.StatusBadRequest)
			return
		}
		if len(req.ID) == 0 || string(req.ID) == "null" {
			w.WriteHeader(http.StatusAccepted) // a notification: the request may follow
			return
		}
		e := map[string]any{"code": -32603, "message": msg}
		if logPath != "" {
			e["data"] = map[string]string{"log": logPath}
		}
		b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": e})
		if err != nil {
			http.Error(w, msg, http.StatusInternalServerError)
			return
		}
		// 200: every client era reads a JSON-RPC error in a 200 body; a
		// legacy client would take a 4xx for "legacy SSE server".
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
		select {
		case answered <- struct{}{}:
		default:
		}
	})
	hs := &http.Server{Handler: h, ReadHeaderTimeout: wait}
	done := make(chan struct{})
	go func() { defer close(done); _ = hs.Serve(ln) }()
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-answered:
			t.Reset(wait / 10)
			continue
		case <-t.C:
		}
		break
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = hs.Shutdown(ctx)
	<-done
}

// maxStartLines bounds how many notifications a proxy that cannot start
// reads past while waiting for the client's first request.
const maxStartLines = 16

// answerInitialize answers the client's requests, whatever their method
// (initialize of the 2025 protocols, server/discover of 2026-07-28, a
// stateless client's first call), with a JSON-RPC error carrying msg, and
// skips its notifications: it waits up to wait for the first request, then
// a tenth of it for each next one (a client whose server/discover failed
// tries initialize next), at most maxStartLines messages. A terminal on
// stdin is a person, not a client: nothing is read.
func answerInitialize(in io.Reader, out io.Writer, msg, logPath string, wait time.Duration) {
	if f, ok := in.(*os.File); ok {
		if st, err := f.Stat(); err != nil || st.Mode()&os.ModeCharDevice != 0 {
			return
		}
	}
	lines := make(chan []byte, maxStartLines)
	go func() { // left behind on timeout; the process is ending
		defer close(lines)
		r := bufio.NewReader(io.LimitReader(in, 1<<20))
		for range maxStartLines {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				lines <- line
			}
			if err != nil {
				return
			}
		}
	}()
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		var line []byte
		select {
		case l, ok := <-lines:
			if !ok {
				return
			}
			line = l
		case <-t.C:
			return
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(line, &req) != nil || req.Method == "" {
			return // not a client's message: nothing to answer
		}
		if len(req.ID) == 0 || string(req.ID) == "null" {
			continue // a notification: the request may follow
		}
		e := map[string]any{"code": -32603, "message": msg}
		if logPath != "" {
			e["data"] = map[string]string{"log": logPath}
		}
		b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": e})
		if err != nil {
			return
		}
		if _, err := out.Write(append(b, '\n')); err != nil {
			return
		}
		t.Reset(wait / 10)
	}
}

// commandLineOf is args as one line, for the log.
func commandLineOf(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}
