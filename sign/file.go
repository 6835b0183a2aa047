package sign

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/planlock/planlock/internal/boundedio"
)

// FileInput names a file on disk to verify.
type FileInput struct {
	// File is the file to read.
	File string
	// Bundle is the bundle file; empty means BundlePath(File).
	Bundle string
	// Path is the file's path in the repository; empty means RepoPath(File).
	Path string
	// Kind is the approval kind expected; empty means KindPlan.
	Kind Kind
}

// MaxFileBytes is the size limit of a file approved as kind: a hold request
// quotes a call's arguments and may be larger than a plan.
func MaxFileBytes(kind Kind) int64 {
	if kind == KindHold {
		return boundedio.MaxHoldBytes
	}
	return boundedio.MaxPlanBytes
}

// VerifyFile reads in.File once and verifies those bytes. It returns them
// with the approval, so the caller parses exactly the bytes that verified
// and never reads the file again. A bundle file that does not exist is
// ErrBundleMissing.
func (p *Policy) VerifyFile(ctx context.Context, in FileInput) ([]byte, *Approval, error) {
	path := in.Path
	if path == "" {
		var err error
		if path, err = RepoPath(in.File); err != nil {
			return nil, nil, err
		}
	}
	content, err := boundedio.ReadFile(in.File, MaxFileBytes(in.Kind))
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", in.File, err)
	}
	bundleFile := in.Bundle
	if bundleFile == "" {
		bundleFile = BundlePath(in.File)
	}
	// The size is checked before the bundle is read whole.
	bundle, err := boundedio.ReadFile(bundleFile, boundedio.MaxBundleBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil, refuse(ErrBundleMissing, "%s: bundle missing: no %s (sign it with planlock sign, or give the bundle)", path, bundleFile)
	case err != nil:
		return nil, nil, fmt.Errorf("read bundle: %w", err)
	}
	a, err := p.Verify(ctx, VerifyInput{Path: path, Content: content, Bundle: bundle, Kind: in.Kind})
	if err != nil {
		return nil, nil, err
	}
	return content, a, nil
}
