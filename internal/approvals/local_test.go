package approvals

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/planlock/planlock/gitapprove"
	"github.com/planlock/planlock/sign"
)

func TestLocalForge(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l := &Local{StateDir: dir}
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	hr := &gitapprove.HoldRequest{ID: "6f1c0d2a9b8e7f60", PlanName: "notes", PlanDigest: "sha256:" + string(bytes.Repeat([]byte("a"), 64)),
		Step: "say", Tool: "echo", Args: json.RawMessage(`{"message":"hi"}`), Reason: "approval", Created: created, Expires: created.Add(time.Hour)}

	pr, err := l.Open(ctx, hr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pr.URL() != LocalPR || pr.Path != LocalRequestPath(dir, hr.ID) {
		t.Fatalf("Open = %+v, want URL %q and the request path", pr, LocalPR)
	}
	want, _ := gitapprove.WriteHold(hr)
	if got, err := os.ReadFile(pr.Path); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("request file %q (%v), want the hold file", got, err)
	}
	// Opening again (a retry) keeps the same file.
	if _, err := l.Open(ctx, hr, nil); err != nil {
		t.Fatal(err)
	}

	status := func(want gitapprove.HoldState) gitapprove.HoldStatus {
		t.Helper()
		st, err := l.Status(ctx, hr, 0)
		if err != nil {
			t.Fatal(err)
		}
		if st.State != want {
			t.Fatalf("Status = %s, want %s", st.State, want)
		}
		return st
	}
	status(gitapprove.HoldPending)

	// An approval: the file and its bundle, read as they are (the caller verifies).
	if err := WriteFileAtomic(sign.BundlePath(pr.Path), []byte(`{"bundle":1}`)); err != nil {
		t.Fatal(err)
	}
	st := status(gitapprove.HoldMerged)
	if !bytes.Equal(st.File, want) || string(st.Bundle) != `{"bundle":1}` {
		t.Fatalf("merged status carries %q / %q", st.File, st.Bundle)
	}
	// A rejection wins over an approval.
	if err := WriteFileAtomic(LocalRejectionPath(dir, hr.ID), []byte("no\n")); err != nil {
		t.Fatal(err)
	}
	status(gitapprove.HoldRejected)

	// An invalid hold is not written.
	bad := *hr
	bad.ID = "../x"
	if _, err := l.Open(ctx, &bad, nil); err == nil {
		t.Fatal("Open accepted an unsafe hold id")
	}
}
