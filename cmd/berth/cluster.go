package main

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/leader"
)

// The --cluster flag names a cluster as SCHEME[:ARG]. Each scheme lives
// in its own file and registers itself in init, so drivers are added
// without touching each other: sim:FILE here; nomad and
// nomad://host:port with the Nomad driver.

// clusterOptions are the flags a cluster scheme may read.
type clusterOptions struct {
	// Arg is what follows "SCHEME:" ("" for a bare scheme).
	Arg string
	// SimSpeed is --sim-speed: how fast a simulated clock runs.
	SimSpeed float64
	Logger   *slog.Logger
	// RequestTimeout is --nomad-timeout: the deadline of each request to
	// a real cluster (0: the driver's default).
	RequestTimeout time.Duration
}

// openedCluster is a cluster ready for the loop.
type openedCluster struct {
	// Name is what status reports ("sim walkthrough", "nomad http://…").
	Name    string
	Cluster drivers.Cluster
	Store   drivers.Store
	// Lease, when not nil, keeps the leader lease of replicas that drive
	// the same cluster; nil: the cluster has one driver at most (the
	// simulator lives in one process).
	Lease leader.LeaseStore
	// Close releases what Open took; nil when nothing.
	Close func() error
	// Watch, when not nil, signals changes in the cluster (nodes, jobs,
	// allocations) so the loop reacts at once instead of at its interval.
	Watch func(ctx context.Context) <-chan struct{}
	// Unreachable, when not empty, tells a person what to check when the
	// cluster cannot be observed at all.
	Unreachable string
}

// clusterScheme opens clusters of one kind.
type clusterScheme struct {
	Name  string
	Usage string // e.g. "sim:FILE  a simulated cluster from a cluster file"
	// ReadOnly schemes can be planned against but not driven: apply and
	// reconcile refuse them at flag parsing.
	ReadOnly bool
	Open     func(ctx context.Context, opts clusterOptions) (*openedCluster, error)
}

var clusterSchemes = map[string]clusterScheme{}

// registerCluster adds a scheme; each scheme's file calls it in init.
func registerCluster(s clusterScheme) {
	if _, dup := clusterSchemes[s.Name]; dup {
		panic("cluster scheme registered twice: " + s.Name)
	}
	clusterSchemes[s.Name] = s
}

// clusterUsage lists the schemes for --help, one a line, sorted.
func clusterUsage() string {
	var lines []string
	for _, s := range clusterSchemes {
		lines = append(lines, "  "+s.Usage)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// writableClusterUsage is clusterUsage without the read-only schemes.
func writableClusterUsage() string {
	var lines []string
	for _, s := range clusterSchemes {
		if !s.ReadOnly {
			lines = append(lines, "  "+s.Usage)
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// openCluster opens the cluster --cluster names. A wrong name is a usage
// error.
func openCluster(ctx context.Context, spec string, opts clusterOptions) (*openedCluster, error) {
	if spec == "" {
		return nil, usageError("--cluster is required; one of:\n%s", clusterUsage())
	}
	name, arg, _ := strings.Cut(spec, ":")
	s, ok := clusterSchemes[name]
	if !ok {
		return nil, usageError("--cluster %q: unknown scheme %q; one of:\n%s", spec, name, clusterUsage())
	}
	opts.Arg = arg
	c, err := s.Open(ctx, opts)
	if err != nil {
		return nil, &exitError{Code: exitFailure, Err: err}
	}
	return c, nil
}

func init() {
	registerCluster(clusterScheme{
		Name:  "sim",
		Usage: "sim:FILE            a simulated cluster from a cluster file (kind: Cluster)",
		Open: func(ctx context.Context, opts clusterOptions) (*openedCluster, error) {
			if opts.Arg == "" {
				return nil, fmt.Errorf("--cluster sim:FILE needs a cluster file")
			}
			spec, err := sim.ReadFile(opts.Arg)
			if err != nil {
				return nil, err
			}
			c := sim.New(*spec, sim.NewScaledClock(opts.SimSpeed))
			c.KeepApplied(false) // a reconcile of days would keep every action; only tests read them
			return &openedCluster{Name: "sim " + spec.Name, Cluster: c, Store: c}, nil
		},
	})
}
