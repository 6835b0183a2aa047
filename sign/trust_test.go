package sign

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/tuf"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/theupdateframework/go-tuf/v2/metadata"
)

// tufRepo is a real TUF repository (go-tuf metadata, signed with ed25519
// keys) served in process, standing in for the public-good TUF CDN, which
// tests must not reach. It publishes one target, trusted_root.json.
// Adapted from sigstore-go's own TUF client tests.
type tufRepo struct {
	t         *testing.T
	keys      map[string]ed25519.PrivateKey
	root      *metadata.Metadata[metadata.RootType]
	targets   *metadata.Metadata[metadata.TargetsType]
	snapshot  *metadata.Metadata[metadata.SnapshotType]
	timestamp *metadata.Metadata[metadata.TimestampType]
	dir       string
	offline   atomic.Bool
	fetches   atomic.Int32
}

func newTUFRepo(t *testing.T, trustedRoot []byte) *tufRepo {
	r := &tufRepo{t: t, keys: map[string]ed25519.PrivateKey{}, dir: t.TempDir()}
	expires := time.Now().AddDate(0, 0, 7).UTC()
	r.targets, r.snapshot = metadata.Targets(expires), metadata.Snapshot(expires)
	r.timestamp, r.root = metadata.Timestamp(expires), metadata.Root(expires)
	for _, name := range metadata.TOP_LEVEL_ROLE_NAMES {
		_, priv, err := ed25519.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		r.keys[name] = priv
		key, err := metadata.KeyFromPublicKey(priv.Public())
		if err != nil {
			t.Fatal(err)
		}
		if err := r.root.Signed.AddKey(key, name); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(r.dir, metadata.TARGETS), 0o700); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(trustedRoot)
	local := filepath.Join(r.dir, metadata.TARGETS, fmt.Sprintf("%x.trusted_root.json", sum))
	if err := os.WriteFile(local, trustedRoot, 0o600); err != nil {
		t.Fatal(err)
	}
	tf, err := metadata.TargetFile().FromFile(local, "sha256")
	if err != nil {
		t.Fatal(err)
	}
	r.targets.Signed.Targets["trusted_root.json"] = tf
	r.snapshot.Signed.Meta["targets.json"] = metadata.MetaFile(r.targets.Signed.Version)
	r.timestamp.Signed.Meta["snapshot.json"] = metadata.MetaFile(r.snapshot.Signed.Version)
	for _, name := range metadata.TOP_LEVEL_ROLE_NAMES {
		signer, err := signature.LoadSigner(r.keys[name], crypto.Hash(0))
		if err != nil {
			t.Fatal(err)
		}
		switch name {
		case metadata.TARGETS:
			_, err = r.targets.Sign(signer)
		case metadata.SNAPSHOT:
			_, err = r.snapshot.Sign(signer)
		case metadata.TIMESTAMP:
			_, err = r.timestamp.Sign(signer)
		case metadata.ROOT:
			_, err = r.root.Sign(signer)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func (r *tufRepo) rootJSON() []byte {
	b, err := r.root.ToBytes(false)
	if err != nil {
		r.t.Fatal(err)
	}
	return b
}

// DownloadFile implements the go-tuf fetcher; offline, every fetch fails
// like an unreachable network.
func (r *tufRepo) DownloadFile(urlPath string, _ int64, _ time.Duration) ([]byte, error) {
	r.fetches.Add(1)
	if r.offline.Load() {
		return nil, errors.New("dial tcp: network is unreachable")
	}
	u, err := url.Parse(urlPath)
	if err != nil {
		return nil, err
	}
	notFound := &metadata.ErrDownloadHTTP{StatusCode: 404}
	if strings.HasPrefix(u.Path, "/targets/") {
		m := regexp.MustCompile(`/targets/[0-9a-f]{64}\.(.*)$`).FindStringSubmatch(u.Path)
		if m == nil {
			return nil, notFound
		}
		tf, ok := r.targets.Signed.Targets[m[1]]
		if !ok {
			return nil, notFound
		}
		return os.ReadFile(tf.Path)
	}
	if u.Path == "/timestamp.json" {
		return r.timestamp.ToBytes(false)
	}
	m := regexp.MustCompile(`/(\d+)\.(root|snapshot|targets)\.json$`).FindStringSubmatch(u.Path)
	if m == nil {
		return nil, notFound
	}
	version, _ := strconv.Atoi(m[1])
	var v int64
	var out func(bool) ([]byte, error)
	switch m[2] {
	case metadata.ROOT:
		v, out = r.root.Signed.Version, r.root.ToBytes
	case metadata.SNAPSHOT:
		v, out = r.snapshot.Signed.Version, r.snapshot.ToBytes
	case metadata.TARGETS:
		v, out = r.targets.Signed.Version, r.targets.ToBytes
	}
	if v != int64(version) {
		return nil, notFound
	}
	return out(false)
}

// TestTUFCacheWorksOffline: the trusted root comes through TUF once; after a
// restart with the network gone it still loads from the on-disk cache, both
// within the cache validity and (falling back) after it.
func TestTUFCacheWorksOffline(t *testing.T) {
	fs := newFake(t)
	trJSON, err := fs.TrustedRootJSON()
	if err != nil {
		t.Fatal(err)
	}
	repo := newTUFRepo(t, trJSON)
	base := &tuf.Options{Root: repo.rootJSON(), RepositoryBaseURL: "https://tuf.example.test", Fetcher: repo}
	cache := t.TempDir()
	ctx := context.Background()

	offlineFirst := t.TempDir()
	repo.offline.Store(true)
	if _, err := loadTUFRoot(ctx, base, offlineFirst, 1); err == nil {
		t.Fatal("loaded a trusted root with no network and no cache")
	}
	repo.offline.Store(false)

	check := func(step string, validity int) {
		t.Helper()
		tm, err := loadTUFRoot(ctx, base, cache, validity)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		p, err := NewPolicy(PolicyOptions{CertificateIdentity: "x", CertificateOIDCIssuer: "y", TrustedMaterial: tm})
		if err != nil || len(tm.RekorLogs()) != 1 || len(tm.FulcioCertificateAuthorities()) != 1 || p == nil {
			t.Fatalf("%s: trusted root not the published one: %v", step, err)
		}
	}
	check("first start, online", 1)
	if repo.fetches.Load() == 0 {
		t.Fatal("first start did not use the TUF repository")
	}
	repo.offline.Store(true)
	n := repo.fetches.Load()
	check("restart offline within the cache validity", 1)
	if repo.fetches.Load() != n {
		t.Error("a fresh cache still asked the network")
	}
	check("restart offline after the cache validity (fallback to valid cached metadata)", 0)
	if repo.fetches.Load() == n {
		t.Error("a stale cache did not try the network first")
	}
}

func TestRekorURL(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	log := func(url string, start, end time.Time) *root.TransparencyLog {
		return &root.TransparencyLog{BaseURL: url, ValidityPeriodStart: start, ValidityPeriodEnd: end}
	}
	old, cur, later := now.AddDate(-2, 0, 0), now.AddDate(-1, 0, 0), now.AddDate(1, 0, 0)
	cases := []struct {
		name string
		logs map[string]*root.TransparencyLog
		want string
	}{
		{"none", nil, ""},
		{"one open log", map[string]*root.TransparencyLog{"a": log("https://rekor.example", cur, time.Time{})}, "https://rekor.example"},
		{"the newest of two open logs", map[string]*root.TransparencyLog{
			"a": log("https://old.example", old, time.Time{}), "b": log("https://new.example", cur, time.Time{})}, "https://new.example"},
		{"an ended log is skipped", map[string]*root.TransparencyLog{
			"a": log("https://ended.example", cur, now), "b": log("https://open.example", old, time.Time{})}, "https://open.example"},
		{"a future log is skipped", map[string]*root.TransparencyLog{"a": log("https://future.example", later, time.Time{})}, ""},
		{"a log without URL is skipped", map[string]*root.TransparencyLog{"a": log("", cur, time.Time{})}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := RekorURL(logsOnly(tc.logs), now); got != tc.want {
				t.Errorf("RekorURL = %q, want %q", got, tc.want)
			}
		})
	}
}

type logsOnly map[string]*root.TransparencyLog

func (l logsOnly) RekorLogs() map[string]*root.TransparencyLog             { return l }
func (logsOnly) TimestampingAuthorities() []root.TimestampingAuthority     { return nil }
func (logsOnly) FulcioCertificateAuthorities() []root.CertificateAuthority { return nil }
func (logsOnly) CTLogs() map[string]*root.TransparencyLog                  { return nil }
func (logsOnly) PublicKeyVerifier(string) (root.TimeConstrainedVerifier, error) {
	return nil, errors.New("no keys")
}
