package main

import (
	"fmt"
	"io"
	"log/slog"
	"time"
)

// newLogger makes berth's logger: text (one readable line per event, the
// time as hh:mm:ss) or json.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usageError("--log-level %q: want debug, info, warn or error", level)
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
	return nil, usageError("--log-format %q: want text or json", format)
}

// loopFlags are the flags reconcile and apply share.
type loopFlags struct {
	source    string
	cluster   string
	simSpeed  float64
	logFormat string
	logLevel  string
}

func (f *loopFlags) check() error {
	if f.source == "" {
		return usageError("--source DIR is required")
	}
	if f.simSpeed <= 0 {
		return usageError("--sim-speed %v: want a factor above 0", f.simSpeed)
	}
	return nil
}

func clusterHelp() string {
	return fmt.Sprintf("Clusters (--cluster):\n%s", clusterUsage())
}
