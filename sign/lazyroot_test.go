package sign

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sigstore/sigstore-go/pkg/root"

	"github.com/planlock/planlock/internal/testkit/sigstoretest"
)

// TestKeylessTrustedRootIsLoadedOnFirstUse: a keyless policy given
// LoadTrustedMaterial reports what is wrong locally (no bundle, another
// file's digest) without loading it; a failed load says what failed and
// how to verify offline, and is tried again on the next bundle; once
// loaded it is not loaded again.
func TestKeylessTrustedRootIsLoadedOnFirstUse(t *testing.T) {
	fs := newFake(t)
	tr, err := fs.TrustedRoot()
	if err != nil {
		t.Fatal(err)
	}
	loads, fail := 0, true
	p := githubPolicy(t, fs, func(o *PolicyOptions) {
		o.TrustedMaterial = nil
		o.LoadTrustedMaterial = func(context.Context) (root.TrustedMaterial, error) {
			loads++
			if fail {
				return nil, errors.New("the public-good sigstore trusted root could not be fetched through TUF (cache /c): connection refused")
			}
			return tr, nil
		}
	})
	ctx := context.Background()
	bundle := signKeyless(t, fs, sigstoretest.GitHub(testRepo, testWorkflow, testRef), testPlan, planPredicate(testPath))
	steps := []struct {
		name      string
		in        VerifyInput
		fail      bool
		wantErr   error  // nil: verifies
		wantText  string // part of the error
		wantLoads int
	}{
		{"no bundle", VerifyInput{Path: testPath, Content: testPlan}, true, ErrBundleMissing, "bundle missing", 0},
		{"another file's bytes", VerifyInput{Path: testPath, Content: []byte("other"), Bundle: bundle}, true, ErrDigestMismatch, "digest mismatch", 0},
		{"offline", VerifyInput{Path: testPath, Content: testPlan, Bundle: bundle}, true, ErrTrustedRootUnavailable,
			"plans/refund.hcl: the public-good sigstore trusted root could not be fetched through TUF (cache /c): connection refused; to verify offline or against a private sigstore, give --trusted-root FILE", 1},
		{"online again", VerifyInput{Path: testPath, Content: testPlan, Bundle: bundle}, false, nil, "", 2},
		{"loaded once", VerifyInput{Path: testPath, Content: testPlan, Bundle: bundle}, false, nil, "", 2},
	}
	for _, s := range steps {
		fail = s.fail
		_, err := p.Verify(ctx, s.in)
		switch {
		case s.wantErr == nil && err != nil:
			t.Fatalf("%s: %v", s.name, err)
		case s.wantErr != nil && (!errors.Is(err, s.wantErr) || !strings.Contains(err.Error(), s.wantText)):
			t.Fatalf("%s: got %v, want %v containing %q", s.name, err, s.wantErr, s.wantText)
		}
		if loads != s.wantLoads {
			t.Fatalf("%s: %d loads, want %d", s.name, loads, s.wantLoads)
		}
	}
}
