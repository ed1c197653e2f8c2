package reconcile

import (
	"context"
	"fmt"
	"io/fs"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/internal/clock"
	"github.com/berth-dev/berth/policies"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/source"
)

// DryRunInput is what DryRun runs a cycle on: a revision, the cluster as
// observed and the history as the Store holds it.
type DryRunInput struct {
	// Set is the revision to plan; its Revision names it.
	Set      *schema.Set
	Snapshot drivers.Snapshot
	// History is the Store's: its journal carries what the loop remembers
	// of each workspace (the node's faults in a row, when it left the
	// specs), as a restarted berth reads it.
	History drivers.History
}

// DryRunOutcome is what the cycle would do.
type DryRunOutcome struct {
	// Result is the cycle's: its Plan, the actions it would send
	// (Applied: the cluster accepts them all) and the starts it would
	// hold back (Deferred).
	Result Result
	// Decision is the decision the plan was made from.
	Decision policies.Decision
	// History is the history the decision read: the store's, advanced
	// to the snapshot's time (how long each limited workspace ran).
	History drivers.History
}

// DryRun runs one cycle (Once) on in as `berth reconcile` would run it,
// the leader of a berth that has just started: the same steps, the same
// code, but the last (saving the history). The cluster it applies to
// accepts every action and does nothing (Result.Applied lists them), and
// the clock stands at the snapshot's time. It is `berth plan`'s cycle: what
// the plan says is what the loop does, by construction.
//
// The mass-prune guard does not refuse the revision here: the plan
// reports what the guard would say (plan.CheckMassPrune) beside what the
// revision would do.
func DryRun(ctx context.Context, in DryRunInput) (DryRunOutcome, error) {
	if in.Set == nil {
		return DryRunOutcome{}, fmt.Errorf("dry run: no specs")
	}
	set := in.Set
	l, err := New(Config{
		Source:         fixedSource{id: set.Revision},
		Clock:          clock.NewManual(in.Snapshot.ObservedAt), // the snapshot's time stands still
		Load:           func(fs.FS, string) (*schema.Set, []string, error) { return set, nil, nil },
		Cluster:        dryCluster{snap: in.Snapshot},
		Store:          discardStore{hist: in.History},
		AllowMassPrune: true,
	})
	if err != nil {
		return DryRunOutcome{}, err
	}
	l.dry = true
	c, err := l.once(ctx, ctx)
	if err != nil {
		return DryRunOutcome{}, err
	}
	return DryRunOutcome{Result: c.res, Decision: c.d, History: c.hist}, nil
}

// fixedSource is a source whose one revision never changes.
type fixedSource struct{ id string }

func (s fixedSource) Read(context.Context) (source.Revision, error) {
	return source.Revision{ID: s.id}, nil
}

// dryCluster is observed as snap and accepts every action, doing
// nothing.
type dryCluster struct{ snap drivers.Snapshot }

func (c dryCluster) Observe(context.Context) (drivers.Snapshot, error) { return c.snap, nil }
func (dryCluster) Apply(context.Context, drivers.Action) error         { return nil }

// discardStore holds hist and saves nothing (a dry cycle does not ask).
type discardStore struct{ hist drivers.History }

func (s discardStore) LoadHistory(context.Context) (drivers.History, error) { return s.hist, nil }
func (discardStore) SaveHistory(context.Context, drivers.History) error     { return nil }
