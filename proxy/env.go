package proxy

import (
	"fmt"
	"sort"
	"strings"

	"github.com/planlock/planlock/hclplan"
)

// UpstreamEnv builds the complete environment of a stdio upstream from
// lookup (os.LookupEnv): PATH, HOME and the named variables that are set,
// nothing else. Naming one of planlock's own variables is an error.
func UpstreamEnv(names []string, lookup func(string) (string, bool)) ([]string, error) {
	want := map[string]bool{"PATH": true, "HOME": true}
	for _, n := range names {
		if n == "" || strings.ContainsAny(n, "=\x00") {
			return nil, fmt.Errorf("invalid environment variable name %q", n)
		}
		if hclplan.IsOwnSecret(n) { // the one list, also checked by plan validation
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
