package main

import (
	"runtime/debug"
	"testing"
)

func TestFormatVersion(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-11-30T08:15:00Z"}}
	tests := []struct {
		name, ldflags string
		info          *debug.BuildInfo
		ok            bool
		want          string
	}{
		{"go build in a checkout", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs}, true,
			"(devel) (commit 0123456789ab, 2026-11-30T08:15:00Z, go1.26.8)"},
		{"modified work tree", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
			Settings: append(vcs, debug.BuildSetting{Key: "vcs.modified", Value: "true"})}, true,
			"(devel) (commit 0123456789ab, 2026-11-30T08:15:00Z, modified, go1.26.8)"},
		{"-buildvcs=false", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, true,
			"(devel) (no VCS revision: built with -buildvcs=false or outside a Git checkout, go1.26.8)"},
		{"go install @version", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}}, true,
			"v1.2.3 (go1.26.8)"},
		{"-ldflags -X main.version", "v9.9.9", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs}, true,
			"v9.9.9 (commit 0123456789ab, 2026-11-30T08:15:00Z, go1.26.8)"},
		{"no build info", "", nil, false, "(devel) (no build information)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := formatVersion(tt.ldflags, tt.info, tt.ok); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
