package drivers

import "context"

// Cluster is what the loop drives: a Nomad cluster or the simulator.
type Cluster interface {
	// Observe returns one complete, consistent snapshot, or an error;
	// never a partial one. It changes nothing.
	Observe(ctx context.Context) (Snapshot, error)
	// Apply applies one action; applying it twice has the effect of
	// applying it once. It never receives ActionWait.
	Apply(ctx context.Context, a Action) error
}

// Store is the reconciler's memory between cycles and restarts: the
// History, whole (the revision applied, decayed usage, queue places,
// preemption records, who is borrowing, recent run times and the
// reconciler's journal). SaveHistory keeps what it is given as it is,
// and LoadHistory returns it.
type Store interface {
	LoadHistory(ctx context.Context) (History, error)
	SaveHistory(ctx context.Context, h History) error
}
