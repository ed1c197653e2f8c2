package reconcile

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/leader"
	"github.com/berth-dev/berth/schema"
)

// A follower's loop observes and decides but writes nothing, shows the
// leader's journal and names the leader; once it leads, it applies.
func TestFollowerWritesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sets := testSets{"r1": withWorkspaces(workspace("med", "a", schema.DesiredRunning))}
		h := newHarness(t, sets, "r1")
		ctx := t.Context()
		store := &leader.MemLease{}
		other := leader.NewElector(store, "other", 10*time.Second, nil)
		other.Step(ctx)
		me := leader.NewElector(store, "me", 10*time.Second, nil)
		me.Step(ctx)
		cfg := h.loop.cfg
		cfg.Leader = me
		follower, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		h.loop.Once(ctx) // a leader without election: starts a
		time.Sleep(time.Minute)
		h.loop.Once(ctx)
		writes := len(h.cluster.Applied())
		if _, err := follower.Once(ctx); err != nil {
			t.Fatal(err)
		}
		if n := len(h.cluster.Applied()); n != writes {
			t.Errorf("the follower applied %d actions", n-writes)
		}
		if v := gauge(t, follower, "berth_leader"); v != 0 {
			t.Errorf("a follower's berth_leader is %v, want 0", v)
		}
		st := follower.Status()
		if st.Leader == nil || st.Leader.Leader != "other" || st.Leader.Leading {
			t.Errorf("the follower's status names %+v, want other", st.Leader)
		}
		d, ok := follower.Workspace(schema.Ref{Project: "med", Name: "a"})
		if !ok || len(d.History) != 2 || d.Workspace.State != StateRunning {
			t.Errorf("the follower shows %+v, want the leader's two transitions", d)
		}
		// other is gone; me takes over and writes.
		h.source.set("r2")
		sets["r2"] = withWorkspaces(workspace("med", "a", schema.DesiredStopped))
		for range 20 {
			time.Sleep(time.Second)
			me.Step(ctx)
		}
		if !me.Leading() {
			t.Fatal("me did not take over")
		}
		follower.Once(ctx)
		if v := gauge(t, follower, "berth_leader"); v != 1 {
			t.Errorf("the new leader's berth_leader is %v, want 1", v)
		}
		if n := countKind(h.cluster.Applied(), drivers.ActionStop); n != 1 {
			t.Errorf("the new leader stopped %d workspaces, want 1", n)
		}
	})
}

// blockingCluster's Apply waits until its context ends.
type blockingCluster struct {
	drivers.Cluster
	started chan struct{}
}

func (b blockingCluster) Apply(ctx context.Context, a drivers.Action) error {
	close(b.started)
	<-ctx.Done()
	return ctx.Err()
}

// A write in flight when the lease lapses is cancelled: a deposed
// leader's driver makes no further write (a start waits for its
// placement for up to 30 s).
func TestLapsedLeaseCancelsWriteInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &leader.MemLease{}
		me := leader.NewElector(store, "me", 10*time.Second, nil)
		me.Step(t.Context())
		b := blockingCluster{started: make(chan struct{})}
		f := fencedCluster{Cluster: b, lead: me}
		done := make(chan error)
		start := time.Now()
		go func() { done <- f.Apply(t.Context(), drivers.Action{Kind: drivers.ActionStart}) }()
		<-b.started
		err := <-done // me never renews: its lease lapses after TTL/2
		if took := time.Since(start); took > 5*time.Second+leadingPoll {
			t.Errorf("the write ran on %s, past the lease", took)
		}
		if drivers.ClassOf(err) != drivers.ClassConflict || !strings.Contains(err.Error(), "does not hold the leader lease") {
			t.Errorf("error %v, want one saying this replica no longer leads", err)
		}
	})
}

// gauge reads the value of an unlabelled gauge from l's metrics.
func gauge(t *testing.T, l *Loop, name string) float64 {
	t.Helper()
	mfs, err := l.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}
