package approvals

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/planlock/planlock/gitapprove"
	"github.com/planlock/planlock/proxy/holdreq"
	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/sign"
)

// appendRecord appends one record to the journal at path, chained as
// planlock chains them: what anyone who can write the state directory can
// do without a key.
func appendRecord(t *testing.T, path, body string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	var last struct {
		Seq  uint64 `json:"seq"`
		Hash string `json:"hash"`
	}
	if err := json.Unmarshal(lines[len(lines)-1], &last); err != nil {
		t.Fatal(err)
	}
	line := fmt.Sprintf(`{"seq":%d,"prev":"%s",%s`, last.Seq+1, last.Hash, body)
	sum := sha256.Sum256([]byte(line))
	line += `,"hash":"` + hex.EncodeToString(sum[:]) + "\"}\n"
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(line); err != nil {
		t.Fatal(err)
	}
}

// TestApprovalReadBackIsVerifiedAgain: after a restart, an approval in the
// journal is used only once its signed approval verifies again against the
// proxy's trust policy. An approval record appended without one approves
// nothing; a genuine one whose signer is no longer trusted is refused.
func TestApprovalReadBackIsVerifiedAgain(t *testing.T) {
	_, otherPub, err := sign.GenerateKeyPair("ed25519")
	if err != nil {
		t.Fatal(err)
	}
	otherKey, err := sign.ParsePublicKey(otherPub)
	if err != nil {
		t.Fatal(err)
	}
	otherPolicy, err := sign.NewPolicy(sign.PolicyOptions{PublicKey: otherKey})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		// approve makes the first run's approval; restart is the forge's
		// status and the policy after the restart.
		genuine   bool
		newPolicy bool
		want      holdreq.Outcome
	}{
		{name: "hold_update appended, no signed approval", want: holdreq.Held},
		{name: "genuine approval, same trust policy", genuine: true, want: holdreq.Approved},
		{name: "genuine approval, signer no longer trusted", genuine: true, newPolicy: true, want: holdreq.Refused},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			e := newEnv(t, Config{})
			// newEnv's ledger is replaced by one in dir, so it can restart.
			e.led.Close()
			led, err := ledger.Open(ctx, ledger.Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			a, err := New(Config{Store: led, PRs: e.forge, Policy: e.policy, OpenWait: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			r := req(`{"n":5}`)
			if d := a.Decide(ctx, r); d.Outcome != holdreq.Held {
				t.Fatalf("first call: %+v, want held", d)
			}
			h, ok := led.FindHold(r.Call)
			if !ok || h.PRURL == "" {
				t.Fatalf("hold %+v %v, want one with its pull request", h, ok)
			}
			hr := *e.forge.lastReq
			if tc.genuine {
				e.forge.setStatus(e.signed(&hr, e.priv, hr.Path()), nil)
				if d := a.Decide(ctx, r); d.Outcome != holdreq.Approved {
					t.Fatalf("merged and signed: %+v, want approved", d)
				}
				if g, _ := led.GetHold(h.ID); g.ApprovalSHA256 == "" {
					t.Fatalf("approved hold carries no evidence: %+v", g)
				}
			}
			a.Close()
			if err := led.Close(); err != nil {
				t.Fatal(err)
			}
			if !tc.genuine {
				appendRecord(t, filepath.Join(dir, "audit.jsonl"), fmt.Sprintf(
					`"time":"%s","type":"hold_update","plan":"%s","step":"email","tool":"send_email","hold":"%s","hold_state":"approved","note":"approval verified"`,
					time.Now().UTC().Format(time.RFC3339Nano), digest, h.ID))
				e.forge.setStatus(gitapprove.HoldStatus{State: gitapprove.HoldPending, PR: &gitapprove.PR{Number: 7, State: gitapprove.PROpen}}, nil)
			}

			led, err = ledger.Open(ctx, ledger.Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			defer led.Close()
			policy := e.policy
			if tc.newPolicy {
				policy = otherPolicy
			}
			a, err = New(Config{Store: led, PRs: e.forge, Policy: policy, OpenWait: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			d := a.Decide(ctx, r)
			if d.Outcome != tc.want {
				t.Fatalf("after the restart: %+v, want outcome %v", d, tc.want)
			}
			rv := ledger.Reservation{Call: r.Call, MaxCalls: 1, HoldID: h.ID, OverLimit: true}
			_, err = led.Reserve(ctx, rv)
			if (err == nil) != (tc.want == holdreq.Approved) {
				t.Fatalf("consume the hold after the restart: %v (decision %v)", err, d.Outcome)
			}
		})
	}
}
