package reconcile

import (
	"context"
	"errors"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
	"pgregory.net/rapid"
)

// memLease is a LeaseStore in memory: check-and-set on a version, and
// write answers that can be lost after the write was made.
type memLease struct {
	mu     sync.Mutex
	lease  drivers.Lease
	ver    uint64
	writes int
	// loseAnswer makes the next write commit, then fail as if the
	// answer was lost.
	loseAnswer bool
}

func (m *memLease) ReadLease(ctx context.Context) (drivers.Lease, uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lease, m.ver, nil
}

func (m *memLease) WriteLease(ctx context.Context, l drivers.Lease, ver uint64) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ver != m.ver {
		return 0, classed{conflict: true}
	}
	m.ver++
	m.lease = l
	m.writes++
	if m.loseAnswer {
		m.loseAnswer = false
		return 0, errors.New("connection reset")
	}
	return m.ver, nil
}

// clock is a fake clock the electors of a test share.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTestElector(store LeaseStore, id string, ttl time.Duration, c *clock) *Elector {
	e := NewElector(store, id, ttl, nil)
	e.now = c.now
	return e
}

// A killed leader is replaced within one TTL of its last renewal, not
// before 4/5 of it, and never while it could still write.
func TestElectorHandOver(t *testing.T) {
	ctx := context.Background()
	store := &memLease{}
	c := &clock{t: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	const ttl = 10 * time.Second
	a, b := newTestElector(store, "a", ttl, c), newTestElector(store, "b", ttl, c)
	a.Step(ctx)
	b.Step(ctx)
	if !a.Leading() || b.Leading() {
		t.Fatalf("first to step: a leading %v, b leading %v", a.Leading(), b.Leading())
	}
	if got := b.LeaderStatus(); got.Leader != "a" || got.Self != "b" || got.Leading {
		t.Errorf("b's status %+v, want it to name a", got)
	}
	// a renews while it runs: b never takes over.
	for range 100 {
		c.t = c.t.Add(ttl / 10)
		a.Step(ctx)
		b.Step(ctx)
		if !a.Leading() || b.Leading() {
			t.Fatalf("at %s: a leading %v, b leading %v", c.t.Format(time.TimeOnly), a.Leading(), b.Leading())
		}
	}
	// a is killed right after a renewal.
	c.t = c.t.Add(ttl / 10)
	store.mu.Lock()
	store.lease.Renewed = time.Time{} // force a renewal now
	store.mu.Unlock()
	a.renewed = time.Time{}
	a.Step(ctx)
	last := c.t
	var took time.Duration
	for took == 0 {
		c.t = c.t.Add(ttl / 10)
		b.Step(ctx)
		if a.Leading() && b.Leading() {
			t.Fatalf("%s after a's last renewal both lead", c.t.Sub(last))
		}
		if b.Leading() {
			took = c.t.Sub(last)
		}
	}
	if took > ttl || took < ttl/2 {
		t.Errorf("b took over %s after a's last renewal, want within (TTL/2, TTL] = (%s, %s]", took, ttl/2, ttl)
	}
	if got := b.LeaderStatus(); got.Term != 2 || got.Leader != "b" {
		t.Errorf("b's status after the hand-over %+v, want term 2", got)
	}
}

// A released lease is taken at the next look.
func TestElectorRelease(t *testing.T) {
	ctx := context.Background()
	store := &memLease{}
	c := &clock{t: time.Unix(0, 0)}
	a, b := newTestElector(store, "a", time.Minute, c), newTestElector(store, "b", time.Minute, c)
	a.Step(ctx)
	b.Step(ctx)
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if a.Leading() {
		t.Fatal("a leads after releasing")
	}
	c.t = c.t.Add(6 * time.Second)
	b.Step(ctx)
	if !b.Leading() {
		t.Fatal("b did not take the released lease at once")
	}
}

// A renewal whose answer was lost is renewed again, not given up.
func TestElectorLostAnswer(t *testing.T) {
	ctx := context.Background()
	store := &memLease{}
	c := &clock{t: time.Unix(0, 0)}
	a := newTestElector(store, "a", 10*time.Second, c)
	a.Step(ctx)
	c.t = c.t.Add(3 * time.Second)
	store.loseAnswer = true
	if err := a.Step(ctx); err == nil {
		t.Fatal("the lost answer was not reported")
	}
	c.t = c.t.Add(time.Second)
	a.Step(ctx)
	if !a.Leading() {
		t.Error("a lost its lease to its own renewal")
	}
}

// Property: whatever the order of looks, kills (a killed replica stops
// looking but, like a paused process, would still write until its own
// limit), joins and lost answers, no two replicas lead at once, and a
// live replica leads soon after the last one stopped (within one TTL
// when it looks at every tick: TestElectorHandOver).
func TestElectorNeverTwoLeaders(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ctx := context.Background()
		store := &memLease{}
		c := &clock{t: time.Unix(1e9, 0)}
		const ttl = 10 * time.Second
		var all []*Elector
		alive := map[*Elector]bool{}
		join := func() {
			e := newTestElector(store, string(rune('a'+len(all))), ttl, c)
			all = append(all, e)
			alive[e] = true
		}
		join()
		join()
		lastHeld := c.t // the last time some replica led
		// Which looks are late is random, not drawn: a replica that looks
		// at no tick is a dead one, which kills already cover.
		rng := mrand.New(mrand.NewPCG(rapid.Uint64().Draw(t, "seed"), 14))
		for step := range 400 {
			switch rapid.IntRange(0, 20).Draw(t, "event") {
			case 0: // kill the leader
				for _, e := range all {
					if alive[e] && e.Leading() && len(alive) > 1 {
						delete(alive, e)
						break
					}
				}
			case 1:
				if len(all) < 8 {
					join()
				}
			case 2:
				store.mu.Lock()
				store.loseAnswer = true
				store.mu.Unlock()
			}
			for _, e := range all {
				if alive[e] && rng.IntN(10) > 0 { // a look in ten is late
					e.Step(ctx)
				}
			}
			var leaders []string
			for _, e := range all {
				if e.Leading() {
					leaders = append(leaders, e.id)
				}
			}
			if len(leaders) > 1 {
				t.Fatalf("step %d: %s lead at once", step, strings.Join(leaders, ", "))
			}
			if len(leaders) == 1 {
				lastHeld = c.t
			} else if gap := c.t.Sub(lastHeld); gap > 2*ttl {
				t.Fatalf("step %d: no leader for %s", step, gap)
			}
			c.t = c.t.Add(ttl / 10)
		}
	})
}

// A follower's loop observes and decides but writes nothing, shows the
// leader's journal and names the leader; once it leads, it applies.
func TestFollowerWritesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sets := testSets{"r1": withWorkspaces(workspace("med", "a", schema.DesiredRunning))}
		h := newHarness(t, sets, "r1")
		ctx := t.Context()
		store := &memLease{}
		other := NewElector(store, "other", 10*time.Second, nil)
		other.Step(ctx)
		me := NewElector(store, "me", 10*time.Second, nil)
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
		store := &memLease{}
		me := NewElector(store, "me", 10*time.Second, nil)
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
		if !hasClass(err, "conflict") || !strings.Contains(err.Error(), "does not hold the leader lease") {
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
