package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// version, when set by the linker (-ldflags "-X main.version=v1.2.3"),
// overrides the version read from the build info.
var version = ""

// buildVersion is what a binary knows of its own version.
type buildVersion struct {
	// Version is the -X main.version override; else the main module's
	// version (a tag for `go install …@v1.2.3`, a pseudo-version for a
	// commit or a `go build` in a tagged checkout); else "dev", with the
	// short VCS revision ("dev-0123456789ab") when the build has one, and
	// "+dirty" when the tree had uncommitted changes.
	Version string
	// Revision, Time and Modified are the VCS stamp (vcs.revision,
	// vcs.time, vcs.modified) of a build from a checkout; empty for
	// `go install …@version`, which builds from the module cache, and
	// for -buildvcs=false.
	Revision, Time string
	Modified       bool
	// Go is the toolchain that built it ("go1.26.0"); empty when unknown.
	Go string
}

// readBuildVersion reads this binary's version (debug.ReadBuildInfo).
func readBuildVersion() buildVersion {
	bi, _ := debug.ReadBuildInfo()
	return versionOf(version, bi)
}

// versionOf is buildVersion from an -X override (may be "") and build
// info (may be nil).
func versionOf(override string, bi *debug.BuildInfo) buildVersion {
	var v buildVersion
	if bi != nil {
		v.Go = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Revision = s.Value
			case "vcs.time":
				v.Time = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	switch {
	case override != "":
		v.Version = override
	case bi != nil && bi.Main.Version != "" && bi.Main.Version != "(devel)":
		v.Version = bi.Main.Version
	default:
		v.Version = "dev"
		if v.Revision != "" {
			v.Version += "-" + shortHash(v.Revision)
		}
		if v.Modified {
			v.Version += "+dirty"
		}
	}
	return v
}

// String is "v1.2.3 (commit 0123456789ab, 2026-11-30T12:00:00Z, modified)
// go1.26.0", leaving out what the build does not know.
func (v buildVersion) String() string {
	var stamp []string
	if v.Revision != "" {
		stamp = append(stamp, "commit "+shortHash(v.Revision))
	}
	if v.Time != "" {
		stamp = append(stamp, v.Time)
	}
	if v.Modified {
		stamp = append(stamp, "modified")
	}
	s := v.Version
	if len(stamp) > 0 {
		s += " (" + strings.Join(stamp, ", ") + ")"
	}
	if v.Go != "" {
		s += " " + v.Go
	}
	return s
}

// berthVersion is the short version status and job metadata carry.
func berthVersion() string { return readBuildVersion().Version }

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print berth's version",
		Long: `version prints berth's version, then the commit it was built from, the
commit's time and "modified" when the checkout had uncommitted changes (as
far as the build recorded them), and the Go toolchain:

  berth v1.2.3 (commit 0123456789ab, 2026-11-30T12:00:00Z) go1.26.0

The version is the module's: the tag for go install …@v1.2.3, a
pseudo-version for a commit; "dev-REVISION" for a build whose module
version is unknown; a release build may set it with
-ldflags "-X main.version=…".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), "berth", readBuildVersion())
			return nil
		},
	}
}
