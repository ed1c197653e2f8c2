package reconcile

import (
	"context"
	"errors"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/leader"
)

// The loop writes only while this replica leads (Config.Leader; the
// election itself is package leader): every write goes through a fence.

// Leadership tells the loop whether this replica may write.
type Leadership interface {
	// Leading reports whether this replica holds the lease now.
	Leading() bool
	// LeaderStatus describes the election for the status.
	LeaderStatus() leader.Status
}

// notLeader is the error a follower's write gets; of class conflict, so
// the loop observes again soon rather than backing off.
type notLeader struct{ holder string }

func (e notLeader) Error() string {
	if e.holder == "" {
		return "this replica does not hold the leader lease; it does not write"
	}
	return "this replica does not hold the leader lease (" + e.holder + " does); it does not write"
}

// ErrorClass makes it a conflict (drivers.Classified).
func (notLeader) ErrorClass() drivers.Class { return drivers.ClassConflict }

// fencedCluster and fencedStore refuse writes while the replica does not
// lead: the lease can lapse in the middle of a cycle.
type fencedCluster struct {
	drivers.Cluster
	lead  Leadership
	clock Clock // times the checks of the lease
}

// Apply applies a while this replica leads: an action that outlasts the
// lease (a start waits for its placement) is cancelled when the lease
// lapses, so a deposed leader's driver makes no further write.
func (f fencedCluster) Apply(ctx context.Context, a drivers.Action) error {
	return fenced(ctx, f.lead, f.clock, func(ctx context.Context) error { return f.Cluster.Apply(ctx, a) })
}

// fenced runs write while this replica leads, with a context cancelled
// when the lease lapses; a write refused or failed because the lease
// lapsed says this replica no longer leads.
func fenced(ctx context.Context, lead Leadership, clock Clock, write func(context.Context) error) error {
	if !lead.Leading() {
		return notLeader{lead.LeaderStatus().Leader}
	}
	ctx, stop := whileLeading(ctx, lead, clock)
	defer stop()
	err := write(ctx)
	if err != nil && !lead.Leading() {
		return errors.Join(notLeader{lead.LeaderStatus().Leader}, err)
	}
	return err
}

// leadingPoll is how often a write in flight checks the lease.
const leadingPoll = 100 * time.Millisecond

// whileLeading returns a context that ends with ctx or when lead no
// longer leads (checked every leadingPoll by clock), whichever comes
// first; stop releases it.
func whileLeading(ctx context.Context, lead Leadership, clock Clock) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-clock.After(leadingPoll):
				if !lead.Leading() {
					cancel()
					return
				}
			}
		}
	}()
	return ctx, cancel
}

type fencedStore struct {
	drivers.Store
	lead  Leadership
	clock Clock
}

func (f fencedStore) SaveHistory(ctx context.Context, h drivers.History) error {
	return fenced(ctx, f.lead, f.clock, func(ctx context.Context) error { return f.Store.SaveHistory(ctx, h) })
}
