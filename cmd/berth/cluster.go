package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/leader"
)

// The --cluster flag names a cluster as SCHEME[:ARG]. clusterSchemes
// lists the schemes; each lives in its own file: sim:FILE here, nomad
// and nomad://host:port with the Nomad driver (cluster_nomad.go),
// snapshot:FILE with berth snapshot (snapshot.go).

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
	// GPUUse is how a real cluster's GPU utilization is sampled
	// (--gpu-use, --gpu-use-interval, --gpu-use-rate); the sampler runs
	// only where the command starts it (openedCluster.Sample).
	GPUUse nomad.UseConfig
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
	// Sample, when not nil, starts sampling the GPUs' utilization in the
	// background until ctx ends or Close (the loop's; one-shot commands
	// do without: their allocations' Use is nil).
	Sample func(ctx context.Context)
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

// clusterSchemes lists the schemes --cluster knows, sorted by name: the
// order --help shows them in. A new driver's scheme is added here.
var clusterSchemes = []clusterScheme{nomadScheme, simScheme, snapshotScheme}

// findScheme returns the scheme called name; false when none is.
func findScheme(name string) (clusterScheme, bool) {
	for _, s := range clusterSchemes {
		if s.Name == name {
			return s, true
		}
	}
	return clusterScheme{}, false
}

// clusterUsage lists the schemes for --help, one a line.
func clusterUsage() string {
	var lines []string
	for _, s := range clusterSchemes {
		lines = append(lines, "  "+s.Usage)
	}
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
	return strings.Join(lines, "\n")
}

// openCluster opens the cluster --cluster names. A wrong name is a usage
// error.
func openCluster(ctx context.Context, spec string, opts clusterOptions) (*openedCluster, error) {
	if spec == "" {
		return nil, usagef("--cluster is required; one of:\n%s", clusterUsage())
	}
	name, arg, _ := strings.Cut(spec, ":")
	s, ok := findScheme(name)
	if !ok {
		return nil, usagef("--cluster %q: unknown scheme %q; one of:\n%s", spec, name, clusterUsage())
	}
	opts.Arg = arg
	c, err := s.Open(ctx, opts)
	if err != nil {
		return nil, &exitError{Code: exitFailure, Err: err}
	}
	return c, nil
}

// simScheme opens a simulated cluster from a cluster file.
var simScheme = clusterScheme{
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
}
