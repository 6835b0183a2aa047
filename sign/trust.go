package sign

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

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
	opts := tuf.DefaultOptions().WithCachePath(cacheDir).WithCacheValidity(tufCacheValidityDays).WithContext(ctx)
	client, err := tuf.New(opts)
	if err != nil {
		// Offline: fall back to the cache as long as its metadata is valid.
		cached := tuf.DefaultOptions().WithCachePath(cacheDir).WithForceCache().WithContext(ctx)
		var cerr error
		client, cerr = tuf.New(cached)
		if cerr != nil {
			return nil, fmt.Errorf("public-good trusted root via TUF (cache %s): %w", cacheDir, err)
		}
	}
	tr, err := root.GetTrustedRoot(client)
	if err != nil {
		return nil, fmt.Errorf("public-good trusted root: %w", err)
	}
	return tr, nil
}
