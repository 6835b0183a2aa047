package sign

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/tuf"
)

// tufCacheValidityDays is how long a refreshed TUF cache is used without
// asking the network.
const tufCacheValidityDays = 1

// LoadTrustedRoot returns the trusted material for keyless verification:
// the trusted_root.json at file when given (offline or private sigstore),
// else the public-good root fetched with sigstore-go's TUF client starting
// from its embedded TUF root. The TUF metadata is cached in cacheDir
// (default: the user cache dir + planlock/sigstore-tuf); when the network is
// unreachable, a cache whose metadata has not expired is used, so a restart
// works offline.
func LoadTrustedRoot(ctx context.Context, file, cacheDir string) (root.TrustedMaterial, error) {
	if file != "" {
		tr, err := root.NewTrustedRootFromPath(file)
		if err != nil {
			return nil, fmt.Errorf("trusted root %s: %w", file, err)
		}
		return tr, nil
	}
	if cacheDir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		cacheDir = filepath.Join(base, "planlock", "sigstore-tuf")
	}
	return loadTUFRoot(ctx, tuf.DefaultOptions(), cacheDir, tufCacheValidityDays)
}

// loadTUFRoot gets trusted_root.json through TUF starting from base (root,
// mirror, fetcher), caching in cacheDir: a cache refreshed less than
// validityDays ago is used as is; otherwise the repository is asked, and if
// it cannot be reached, the cache is used as long as its metadata is valid.
func loadTUFRoot(ctx context.Context, base *tuf.Options, cacheDir string, validityDays int) (root.TrustedMaterial, error) {
	online := *base
	online.WithCachePath(cacheDir).WithCacheValidity(validityDays).WithContext(ctx)
	client, err := tuf.New(&online)
	if err != nil {
		cached := *base
		cached.WithCachePath(cacheDir).WithForceCache().WithContext(ctx)
		var cerr error
		if client, cerr = tuf.New(&cached); cerr != nil {
			return nil, fmt.Errorf("the public-good sigstore trusted root could not be fetched through TUF (cache %s): %w", cacheDir, err)
		}
	}
	tr, err := root.GetTrustedRoot(client)
	if err != nil {
		return nil, fmt.Errorf("public-good trusted root: %w", err)
	}
	return tr, nil
}

// RekorURL returns the base URL of the transparency log the trusted
// material names for new entries at now: the log valid at now that started
// last. It returns "" when the material names none.
func RekorURL(tm root.TrustedMaterial, now time.Time) string {
	var best *root.TransparencyLog
	for _, l := range tm.RekorLogs() {
		if l.BaseURL == "" || now.Before(l.ValidityPeriodStart) || (!l.ValidityPeriodEnd.IsZero() && !now.Before(l.ValidityPeriodEnd)) {
			continue
		}
		if best == nil || l.ValidityPeriodStart.After(best.ValidityPeriodStart) ||
			(l.ValidityPeriodStart.Equal(best.ValidityPeriodStart) && l.BaseURL < best.BaseURL) {
			best = l
		}
	}
	if best == nil {
		return ""
	}
	return best.BaseURL
}
