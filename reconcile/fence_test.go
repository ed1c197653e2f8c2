package reconcile

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/internal/clock"
	"github.com/berth-dev/berth/leader"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
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
		h.sleep(time.Minute)
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
		if !ok || len(d.History) != 2 || d.Workspace.State != view.StateRunning {
			t.Errorf("the follower shows %+v, want the leader's two transitions", d)
		}
		// other is gone; me takes over and writes.
		h.source.set("r2")
		sets["r2"] = withWorkspaces(workspace("med", "a", schema.DesiredStopped))
		for range 20 {
			time.Sleep(time.Second) // the elector's clock
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
		f := fencedCluster{Cluster: b, lead: me, clock: clock.Real{}} // the bubble's, like the elector's
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

// stubLead is a Leadership a test sets by hand.
type stubLead struct {
	leading bool
	term    uint64
}

func (s *stubLead) Leading() bool { return s.leading }
func (s *stubLead) LeaderStatus() leader.Status {
	return leader.Status{Self: "me", Leading: s.leading, Term: s.term}
}

// countingStore counts the history reads and can fail the next save.
type countingStore struct {
	drivers.Store
	loads    int
	failSave bool
}

func (s *countingStore) LoadHistory(ctx context.Context) (drivers.History, error) {
	s.loads++
	return s.Store.LoadHistory(ctx)
}

func (s *countingStore) SaveHistory(ctx context.Context, h drivers.History) error {
	if s.failSave {
		s.failSave = false
		return &drivers.Error{Class: drivers.ClassConflict, Op: "save history", Err: errors.New("the head changed (check-and-set)")}
	}
	return s.Store.SaveHistory(ctx, h)
}

// TestLeaderReadsHistoryOnlyAfterABreak: a leader that has led since its
// own last save knows the history without reading it; it reads again
// after a cycle it did not lead, under a new term, and after a save that
// failed (another writer's check-and-set conflict).
func TestLeaderReadsHistoryOnlyAfterABreak(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sets := testSets{"r1": withWorkspaces(workspace("med", "a", schema.DesiredRunning))}
		h := newHarness(t, sets, "r1")
		ctx := t.Context()
		store := &countingStore{Store: h.cluster}
		lead := &stubLead{leading: true, term: 1}
		cfg := h.loop.cfg
		cfg.Store, cfg.Leader = store, lead
		l, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		cycles := func(n int) int {
			t.Helper()
			before := store.loads
			for range n {
				l.Once(ctx)
				h.sleep(10 * time.Second)
			}
			return store.loads - before
		}
		if n := cycles(5); n != 1 {
			t.Errorf("5 cycles of one leader read the history %d times, want 1 (the first)", n)
		}
		lead.leading = false
		if n := cycles(1); n != 1 {
			t.Errorf("a follower's cycle read the history %d times, want 1", n)
		}
		lead.leading = true
		if n := cycles(3); n != 1 {
			t.Errorf("3 cycles leading again read the history %d times, want 1 (the first)", n)
		}
		lead.term = 2
		if n := cycles(3); n != 1 {
			t.Errorf("3 cycles under a new term read the history %d times, want 1 (the first)", n)
		}
		store.failSave = true
		h.sleep(l.cfg.UsageInterval) // the next cycle saves the usage
		if n := cycles(3); n != 1 {
			t.Errorf("3 cycles from a failed save read the history %d times, want 1 (after the failure)", n)
		}
	})
}
