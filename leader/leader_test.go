package leader

import (
	"context"
	mrand "math/rand/v2"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

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
	store := &MemLease{}
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
	store := &MemLease{}
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
	store := &MemLease{}
	c := &clock{t: time.Unix(0, 0)}
	a := newTestElector(store, "a", 10*time.Second, c)
	a.Step(ctx)
	c.t = c.t.Add(3 * time.Second)
	store.LoseAnswer = true
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
		store := &MemLease{}
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
				store.LoseAnswer = true
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

// The leader does not read the lease while it leads: an idle leader
// costs its store one write every third look (the first at least TTL/4
// after the last) and nothing else; a follower reads at every look.
func TestElectorLeaderDoesNotRead(t *testing.T) {
	ctx := context.Background()
	store := &MemLease{}
	c := &clock{t: time.Unix(0, 0)}
	const ttl = 10 * time.Second
	a := newTestElector(store, "a", ttl, c)
	a.Step(ctx)
	follower := &MemLease{}
	b := newTestElector(follower, "b", ttl, c)
	follower.lease, follower.ver = store.lease, store.ver
	reads, writes := store.reads, store.writes
	for range 100 { // 100 looks, every TTL/10: ten TTLs
		c.t = c.t.Add(ttl / 10)
		if err := a.Step(ctx); err != nil {
			t.Fatal(err)
		}
		b.Step(ctx)
		follower.lease, follower.ver = store.lease, store.ver
		if !a.Leading() {
			t.Fatalf("a stopped leading at %s", c.t.Format(time.TimeOnly))
		}
	}
	if n := store.reads - reads; n != 0 {
		t.Errorf("the leader read the lease %d times in 100 looks, want 0", n)
	}
	if n := store.writes - writes; n != 33 {
		t.Errorf("the leader wrote the lease %d times in 100 looks, want 33 (every third)", n)
	}
	if follower.reads != 100 {
		t.Errorf("the follower read the lease %d times in 100 looks, want 100", follower.reads)
	}
}
