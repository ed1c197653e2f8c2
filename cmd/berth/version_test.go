package main

import (
	"runtime/debug"
	"testing"
)

func TestVersionOf(t *testing.T) {
	stamp := []debug.BuildSetting{
		{Key: "-buildmode", Value: "exe"},
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2026-11-30T12:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}
	clean := append(append([]debug.BuildSetting(nil), stamp[:4]...), debug.BuildSetting{Key: "vcs.modified", Value: "false"})
	info := func(version string, settings []debug.BuildSetting) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/berth-dev/berth", Version: version}, Settings: settings}
	}
	for _, tc := range []struct {
		name     string
		override string
		bi       *debug.BuildInfo
		short    string
		long     string
	}{
		{"go install @version", "", info("v1.2.3", nil),
			"v1.2.3", "v1.2.3 go1.26.0"},
		{"go build in a checkout (Go stamps a pseudo-version)", "", info("v1.2.4-0.20261130120000-0123456789ab+dirty", stamp),
			"v1.2.4-0.20261130120000-0123456789ab+dirty", "v1.2.4-0.20261130120000-0123456789ab+dirty (commit 0123456789ab, 2026-11-30T12:00:00Z, modified) go1.26.0"},
		{"devel with a VCS stamp", "", info("(devel)", clean),
			"dev-0123456789ab", "dev-0123456789ab (commit 0123456789ab, 2026-11-30T12:00:00Z) go1.26.0"},
		{"devel, modified", "", info("(devel)", stamp),
			"dev-0123456789ab+dirty", "dev-0123456789ab+dirty (commit 0123456789ab, 2026-11-30T12:00:00Z, modified) go1.26.0"},
		{"devel, -buildvcs=false", "", info("(devel)", nil),
			"dev", "dev go1.26.0"},
		{"no build info", "", nil,
			"dev", "dev"},
		{"-ldflags -X main.version wins", "v9.9.9", info("v1.2.3", clean),
			"v9.9.9", "v9.9.9 (commit 0123456789ab, 2026-11-30T12:00:00Z) go1.26.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := versionOf(tc.override, tc.bi)
			if v.Version != tc.short {
				t.Errorf("Version = %q, want %q", v.Version, tc.short)
			}
			if got := v.String(); got != tc.long {
				t.Errorf("String() = %q, want %q", got, tc.long)
			}
		})
	}
}
