package proxy

import (
	"fmt"
	"sort"
	"strings"
)

// ownSecrets are variables planlock itself reads; the upstream never gets
// them, even when a plan or the command line names them.
var ownSecrets = []string{
	"GITHUB_TOKEN", "GH_TOKEN", "SIGSTORE_ID_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
	"ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_RUNTIME_TOKEN", "COSIGN_PASSWORD", "COSIGN_PRIVATE_KEY",
}

// isOwnSecret reports whether name is one of planlock's own variables.
func isOwnSecret(name string) bool {
	if strings.HasPrefix(name, "PLANLOCK_") {
		return true
	}
	for _, s := range ownSecrets {
		if name == s {
			return true
		}
	}
	return false
}

// UpstreamEnv builds the complete environment of a stdio upstream from
// lookup (os.LookupEnv): PATH, HOME and the named variables that are set,
// nothing else. Naming one of planlock's own variables is an error.
func UpstreamEnv(names []string, lookup func(string) (string, bool)) ([]string, error) {
	want := map[string]bool{"PATH": true, "HOME": true}
	for _, n := range names {
		if n == "" || strings.ContainsAny(n, "=\x00") {
			return nil, fmt.Errorf("invalid environment variable name %q", n)
		}
		if isOwnSecret(n) {
			return nil, fmt.Errorf("refusing to pass %s to the upstream: it is planlock's own secret", n)
		}
		want[n] = true
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var env []string
	for _, k := range keys {
		if v, ok := lookup(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env, nil
}
