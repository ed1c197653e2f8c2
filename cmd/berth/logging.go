package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// newLogger makes berth's logger: text (one readable line per event, the
// time as hh:mm:ss) or json.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		opts.ReplaceAttr = func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.String(slog.TimeKey, a.Value.Time().Format(time.TimeOnly))
			}
			return a
		}
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usagef("--log-format %q: want text or json", format)
}

// loopFlags are the flags reconcile and apply share.
type loopFlags struct {
	source    string
	cluster   string
	simSpeed  float64
	logFormat string
	logLevel  string
	prune     massPruneFlags
	limits    limitFlags
}

// check reports a wrong command line of `berth command` as a usage error:
// a missing --source, a bad --sim-speed, a read-only --cluster (a
// snapshot, which every write of the loop would fail on).
func (f *loopFlags) check(command string) error {
	if f.source == "" {
		return usagef("--source DIR is required")
	}
	if f.simSpeed <= 0 {
		return usagef("--sim-speed %v: want a factor above 0", f.simSpeed)
	}
	name, _, _ := strings.Cut(f.cluster, ":")
	if s, ok := findScheme(name); ok && s.ReadOnly {
		return usagef("--cluster %s is read-only and berth %s writes to the cluster; plan against it with berth plan SPECS --cluster %s, or give a cluster berth can drive:\n%s",
			f.cluster, command, f.cluster, writableClusterUsage())
	}
	return nil
}

// massPruneFlags are the deletion guard's flags (plan.PruneGuard),
// the same for apply and reconcile.
type massPruneFlags struct {
	allow          bool
	percent, atMin int
}

func (f *massPruneFlags) add(fl *pflag.FlagSet) {
	fl.BoolVar(&f.allow, "allow-mass-prune", false, "apply revisions that stop or remove more than --mass-prune-percent (and more than --mass-prune-min) of the managed workspaces, or that hold no specs at all")
	fl.IntVar(&f.percent, "mass-prune-percent", 25, "a revision that stops or removes more than this percentage of the managed workspaces is a mass prune (refused)…")
	fl.IntVar(&f.atMin, "mass-prune-min", 3, "…when that is also more than this many workspaces")
}

func clusterHelp() string {
	return fmt.Sprintf("Clusters (--cluster):\n%s", clusterUsage())
}
