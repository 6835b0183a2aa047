package main

import (
	"strings"
	"testing"
)

// installedPlanlock says what the workflow installs and why it may not
// resolve, and refuses, naming the fix, what no workflow can install: a
// pseudo-version of this binary is never pinned silently.
func TestInstalledPlanlock(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	pseudo := "v0.0.0-20261201120000-0123456789ab"
	tests := []struct {
		name         string
		given        string
		fromSource   bool
		planlockRepo bool
		b            build
		version      string
		commit       string
		note, err    string // substrings
	}{
		{"a release build pins its own version", "", false, false, build{Version: "v0.4.0"}, "v0.4.0", "", "installs planlock v0.4.0, this binary's version", ""},
		{"a VCS build is refused, naming the flag", "", false, false, build{Version: pseudo, Revision: rev}, "", "", "", "built from Git commit 0123456789ab (" + pseudo + "), which go install finds only if that commit is public on github.com/planlock/planlock: give --planlock-version with a released vX.Y.Z (or with " + pseudo + " to pin it anyway)"},
		{"a pre-release pseudo-version too", "", false, false, build{Version: "v0.4.1-0.20261201120000-0123456789ab"}, "", "", "", "built from Git commit 0123456789ab"},
		{"a modified checkout is refused", "", false, false, build{Version: pseudo + "+dirty", Revision: rev, Modified: true}, "", "", "", "uncommitted changes (" + pseudo + "+dirty), which no workflow can install: give --planlock-version vX.Y.Z"},
		{"a development build is refused", "", false, false, build{Version: "(devel)"}, "", "", "", "development build, so the workflow cannot install the same version: give --planlock-version vX.Y.Z or --from-source"},
		{"no build info", "", false, false, build{}, "", "", "", "development build"},
		{"a given release", "v0.3.1", false, false, build{Version: pseudo}, "v0.3.1", "", "installs planlock v0.3.1 (--planlock-version).", ""},
		{"a given pseudo-version is pinned, with why it may not resolve", pseudo, false, false, build{}, pseudo, "", "a pseudo-version of commit 0123456789ab: go install finds it only if that commit is public", ""},
		{"from source in planlock's repository", "", true, true, build{}, "", "", "builds planlock from the repository's own checked-out commit", ""},
		{"from source in a plans repository: planlock's source at this commit", "", true, false, build{Version: pseudo, Revision: rev}, "", rev, "checks out github.com/planlock/planlock at commit " + rev, ""},
		{"from source in a plans repository, no commit known", "", true, false, build{Version: "(devel)"}, "", "", "", "this build records none: give --planlock-version vX.Y.Z"},
		{"from source in a plans repository, modified", "", true, false, build{Revision: rev, Modified: true}, "", "", "", "built from commit 0123456789ab with uncommitted changes"},
		{"both", "v0.4.0", true, false, build{Revision: rev}, "", "", "", "give --planlock-version or --from-source, not both"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, c, note, err := installedPlanlock(tt.given, tt.fromSource, tt.planlockRepo, tt.b)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || exitCode(err) != exitUsage {
					t.Fatalf("err = %v (exit %d), want a usage error containing %q", err, exitCode(err), tt.err)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error of more than one line: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if v != tt.version || c != tt.commit || !strings.Contains(note, tt.note) {
				t.Errorf("= %q, %q, %q; want %q, %q, a note containing %q", v, c, note, tt.version, tt.commit, tt.note)
			}
		})
	}
}
