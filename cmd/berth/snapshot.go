package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/spf13/cobra"
)

// snapshotVersion is the version of the file `berth snapshot` writes. v2
// names allocation phases ("running"); v1 numbered them, and berth still
// reads it.
const (
	snapshotVersion   = "berth.dev/snapshot/v2"
	snapshotVersionV1 = "berth.dev/snapshot/v1"
)

// snapshotDoc is an exported observation of a cluster: what `berth plan
// --cluster snapshot:FILE` plans against where CI has no cluster
// credentials.
type snapshotDoc struct {
	Version string `json:"version"`
	// Cluster names where it was taken.
	Cluster  string           `json:"cluster"`
	Snapshot drivers.Snapshot `json:"snapshot"`
	// History is the reconciler's memory (decayed usage, queue places,
	// preemptions), which decisions read.
	History drivers.History `json:"history"`
	// NativePreemption lists the Nomad schedulers with native preemption
	// on ("batch", "service").
	NativePreemption []string `json:"nativePreemption,omitempty"`
	// Notes are what could not be observed (the scheduler configuration
	// without operator:read), as sentences.
	Notes []string `json:"notes,omitempty"`
}

func newSnapshotCmd() *cobra.Command {
	var (
		cluster, out string
	)
	cmd := &cobra.Command{
		Use:   "snapshot --cluster CLUSTER [--out FILE]",
		Short: "Export what berth observes of a cluster, for planning without credentials",
		Long: `snapshot observes the cluster once (read-only) and writes the snapshot
— nodes, GPUs and topology, running workspaces with their checkpoints —
with the reconciler's history as JSON, to stdout or --out. berth plan
--cluster snapshot:FILE plans against it where CI has no credentials for
the cluster:

  berth snapshot --cluster nomad > snap.json
  berth plan specs --cluster snapshot:snap.json --base origin/main

` + clusterHelp(),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(cmd.ErrOrStderr(), "text", "error")
			if err != nil {
				return err
			}
			c, err := openCluster(cmd.Context(), cluster, clusterOptions{SimSpeed: 1, Logger: log})
			if err != nil {
				return err
			}
			if c.Close != nil {
				defer c.Close()
			}
			doc, err := observeDoc(cmd.Context(), c)
			if err != nil {
				return &exitError{Code: exitFailure, Err: err}
			}
			b, err := json.MarshalIndent(doc, "", "  ")
			if err != nil {
				return &exitError{Code: exitFailure, Err: err}
			}
			b = append(b, '\n')
			if out != "" {
				if err := os.WriteFile(out, b, 0o644); err != nil {
					return &exitError{Code: exitFailure, Err: err}
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: %d nodes, %d allocations\n", out, len(doc.Snapshot.Nodes), len(doc.Snapshot.Allocs))
				return nil
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
	cmd.Flags().StringVar(&cluster, "cluster", "", "the cluster to observe (see below)")
	cmd.Flags().StringVar(&out, "out", "", "write to this file instead of stdout")
	return cmd
}

// observeDoc observes c once, read-only.
func observeDoc(ctx context.Context, c *openedCluster) (*snapshotDoc, error) {
	if sc, ok := c.Cluster.(*snapshotCluster); ok {
		d := *sc.doc
		d.Version = snapshotVersion // a v1 file is written back as v2
		return &d, nil
	}
	snap, err := c.Cluster.Observe(ctx)
	if err != nil {
		return nil, fmt.Errorf("observe %s: %w", c.Name, err)
	}
	hist, err := c.Store.LoadHistory(ctx)
	if err != nil {
		return nil, fmt.Errorf("load history from %s: %w", c.Name, err)
	}
	doc := &snapshotDoc{Version: snapshotVersion, Cluster: c.Name, Snapshot: snap, History: hist}
	if d, ok := c.Cluster.(*nomad.Driver); ok {
		rep, err := d.Scheduler(ctx)
		if err != nil {
			doc.Notes = append(doc.Notes, "could not read Nomad's scheduler configuration, so native preemption is not checked: "+err.Error())
			return doc, nil
		}
		if rep.Config.PreemptionConfig.BatchSchedulerEnabled {
			doc.NativePreemption = append(doc.NativePreemption, "batch")
		}
		if rep.Config.PreemptionConfig.ServiceSchedulerEnabled {
			doc.NativePreemption = append(doc.NativePreemption, "service")
		}
	}
	return doc, nil
}

// snapshotCluster serves a snapshot file: it observes what the file says
// and refuses every change.
type snapshotCluster struct {
	file string
	doc  *snapshotDoc
}

var errReadOnly = errors.New("a snapshot file is read-only; it can be planned against, not applied to")

func (s *snapshotCluster) Observe(ctx context.Context) (drivers.Snapshot, error) {
	return s.doc.Snapshot, nil
}

func (s *snapshotCluster) Apply(ctx context.Context, a drivers.Action) error {
	return fmt.Errorf("%s: %w", s.file, errReadOnly)
}

func (s *snapshotCluster) LoadHistory(ctx context.Context) (drivers.History, error) {
	return s.doc.History, nil
}

func (s *snapshotCluster) SaveHistory(ctx context.Context, h drivers.History) error {
	return fmt.Errorf("%s: %w", s.file, errReadOnly)
}

// snapshotScheme plans against a file written by berth snapshot; it
// cannot be driven.
var snapshotScheme = clusterScheme{
	Name:     "snapshot",
	Usage:    "snapshot:FILE       a snapshot written by berth snapshot (read-only: for berth plan)",
	ReadOnly: true,
	Open: func(ctx context.Context, opts clusterOptions) (*openedCluster, error) {
		if opts.Arg == "" {
			return nil, fmt.Errorf("--cluster snapshot:FILE needs a file written by berth snapshot")
		}
		b, err := os.ReadFile(opts.Arg)
		if err != nil {
			return nil, err
		}
		var doc snapshotDoc
		if err := json.Unmarshal(b, &doc); err != nil {
			return nil, fmt.Errorf("%s: not a berth snapshot: %w", opts.Arg, err)
		}
		if doc.Version != snapshotVersion && doc.Version != snapshotVersionV1 {
			return nil, fmt.Errorf("%s: version %q; this berth reads %q", opts.Arg, doc.Version, snapshotVersion)
		}
		c := &snapshotCluster{file: opts.Arg, doc: &doc}
		name := "snapshot " + opts.Arg
		if doc.Cluster != "" {
			name += " of " + doc.Cluster
		}
		return &openedCluster{Name: name, Cluster: c, Store: c}, nil
	},
}
