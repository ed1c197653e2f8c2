// Package leader elects one leader among replicas of berth that drive one
// cluster, through a lease in the cluster's store (Elector). The loop
// (package reconcile) asks only whether this replica leads; it fences its
// writes with that answer. The election is its own package, beside the
// loop rather than in it, because it is its own state machine over a
// lease store, tested on its own, and the loop needs only the question.
package leader

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"crypto/rand"
	"encoding/hex"

	"github.com/berth-dev/berth/drivers"
)

// One leader among replicas. Replicas of berth that drive one cluster
// elect a leader through a lease kept in the cluster's store with
// check-and-set (Nomad 1.6 has no Variable locks; its API ignores the
// lock operations of later versions, so berth does not use them). Only
// the leader writes: it applies plans and saves the history. The others
// follow: they observe and decide, serve the status read-only and name
// the leader.
//
// The rules, with TTL the lease's time to live (the holder's) and every
// time read from the replica's own monotonic clock, never compared
// across replicas:
//
//  1. The holder renews the lease at its first look at least TTL/4
//     after its last renewal (every third look: 0.3 TTL), with
//     check-and-set. It leads until TTL/2 after it sent its last
//     successful renewal; past that, with no renewal through, it stops
//     writing. A renewal that fails is tried again at the next look, so
//     it has two tries before its limit.
//  2. Another replica takes the lease only once it has seen the same
//     version of it, unchanged, for 4/5 TTL: after the holder's own limit
//     (TTL/2 from a send that came before the version was seen), so two
//     replicas never both lead. Its take-over is a check-and-set against
//     that version, so of several contenders one wins.
//  3. A released lease (no holder: the leader shut down cleanly) is taken
//     at once.
//
// Replicas look every TTL/10, so a killed leader is replaced within one
// TTL of its last renewal.

// LeaseStore keeps the leader lease with check-and-set.
type LeaseStore interface {
	// ReadLease returns the lease and its version; version 0: there is
	// none yet.
	ReadLease(ctx context.Context) (drivers.Lease, uint64, error)
	// WriteLease writes l if the lease is still at version (0: only if
	// there is none) and returns the new version. A lease written by
	// someone else since is an error of class conflict.
	WriteLease(ctx context.Context, l drivers.Lease, version uint64) (uint64, error)
}

// Status is the election as one replica sees it.
type Status struct {
	// Self names this replica; Leader the replica holding the lease (empty
	// while none is known: no lease yet, or it was released).
	Self   string `json:"self"`
	Leader string `json:"leader,omitempty"`
	// Leading: this replica is the leader and writes; false: it follows,
	// serving the status read-only.
	Leading bool `json:"leading"`
	// Term counts the leaders the lease has had.
	Term uint64 `json:"term,omitempty"`
}

// DefaultLeaseTTL is the lease's default time to live: a dead leader is
// replaced within 30 s, and an idle leader renews the lease 6.7 times a
// minute (every 9 s), the most of what an idle berth asks of Nomad.
const DefaultLeaseTTL = 30 * time.Second

// Elector takes part in the election for one replica. Run it (Run) and
// give it to the loop as Config.Leader. It is safe for concurrent use.
type Elector struct {
	store LeaseStore
	id    string
	ttl   time.Duration
	log   *slog.Logger
	now   func() time.Time

	changes chan struct{}

	mu        sync.Mutex
	seen      drivers.Lease // the lease as last read or written
	seenVer   uint64        // its version
	seenAt    time.Time     // when this version was first seen
	leadUntil time.Time     // this replica leads until then (zero: it follows)
	renewed   time.Time     // when its last successful renewal was sent
	followed  string        // the leader last logged as followed
	reread    bool          // a write failed: read before the next
}

// NewElector returns an elector for the replica id (ReplicaID when
// empty) over store, with the lease's time to live ttl (DefaultLeaseTTL
// when zero).
func NewElector(store LeaseStore, id string, ttl time.Duration, log *slog.Logger) *Elector {
	if id == "" {
		id = ReplicaID()
	}
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Elector{store: store, id: id, ttl: ttl, log: log, now: time.Now, changes: make(chan struct{}, 1)}
}

// ReplicaID names this process: host name, process ID and a random
// suffix (a restarted process is another replica).
func ReplicaID() string {
	host, _ := os.Hostname()
	b := make([]byte, 3)
	rand.Read(b)
	return host + "/" + strconv.Itoa(os.Getpid()) + "/" + hex.EncodeToString(b)
}

// Changes signals each time this replica becomes the leader, so that
// the loop runs a cycle at once.
func (e *Elector) Changes() <-chan struct{} { return e.changes }

// Leading reports whether this replica holds the lease now.
func (e *Elector) Leading() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leadingLocked(e.now())
}

func (e *Elector) leadingLocked(now time.Time) bool {
	return now.Before(e.leadUntil)
}

// LeaderStatus describes the election as this replica sees it.
func (e *Elector) LeaderStatus() Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	return Status{Self: e.id, Leader: e.seen.Holder, Leading: e.leadingLocked(e.now()), Term: e.seen.Term}
}

// Run takes part in the election until ctx ends: every TTL/10 it reads
// the lease and renews or takes it as the rules say. It does not release
// the lease (Release does).
func (e *Elector) Run(ctx context.Context) {
	tick := time.NewTicker(e.ttl / 10)
	defer tick.Stop()
	for {
		if err := e.Step(ctx); err != nil && ctx.Err() == nil {
			e.log.Debug("leader lease: "+err.Error(), "self", e.id)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Step reads the lease once and renews it (the holder, when due) or
// takes it (when released, missing, or unchanged for 4/5 of its TTL).
// The leader does not read: no other replica may take the lease before
// it has seen it unchanged for 4/5 of its TTL, so until its renewal is due
// there is nothing to learn, and then a check-and-set against the version
// it wrote renews it or says it was lost. After a write of its own that
// failed (its answer may have been lost, leaving a version it did not
// see), it reads again.
func (e *Elector) Step(ctx context.Context) error {
	e.mu.Lock()
	now := e.now()
	if e.leadingLocked(now) && !e.reread && e.seen.Holder == e.id && e.seenVer != 0 {
		if now.Sub(e.renewed) < e.ttl/4 {
			e.mu.Unlock()
			return nil
		}
		next, ver := drivers.Lease{Holder: e.id, TTL: e.ttl, Term: e.seen.Term, Renewed: now}, e.seenVer
		e.mu.Unlock()
		return e.write(ctx, next, ver, e.id, now)
	}
	e.mu.Unlock()
	l, ver, err := e.store.ReadLease(ctx)
	if err != nil {
		return fmt.Errorf("read: %w", err) // a leader leads on until its limit
	}
	e.mu.Lock()
	now = e.now()
	e.reread = false
	if ver != e.seenVer || e.seenAt.IsZero() {
		e.seenVer, e.seenAt = ver, now
	}
	e.seen = l
	wait := l.TTL * 4 / 5
	if l.TTL <= 0 {
		wait = e.ttl * 4 / 5
	}
	var next drivers.Lease
	switch {
	case ver != 0 && l.Holder == e.id:
		// Ours: renew when due (and after an answer to our own write
		// was lost, which left a version this replica did not see).
		if e.leadingLocked(now) && now.Sub(e.renewed) < e.ttl/4 {
			e.mu.Unlock()
			return nil
		}
		next = drivers.Lease{Holder: e.id, TTL: e.ttl, Term: l.Term, Renewed: now}
	case ver == 0 || l.Holder == "" || now.Sub(e.seenAt) >= wait:
		next = drivers.Lease{Holder: e.id, TTL: e.ttl, Term: l.Term + 1, Renewed: now}
	default:
		// Another replica leads.
		was := e.leadingLocked(now)
		e.leadUntil = time.Time{}
		logIt := e.followed != l.Holder
		e.followed = l.Holder
		e.mu.Unlock()
		switch {
		case was:
			e.log.Warn("leader lease lost; following "+l.Holder, "self", e.id, "term", l.Term)
		case logIt:
			e.log.Info("following "+l.Holder+": it holds the leader lease; this replica serves the status read-only", "self", e.id, "term", l.Term)
		}
		return nil
	}
	e.mu.Unlock()
	return e.write(ctx, next, ver, l.Holder, now)
}

// write writes the lease next over version ver (held by prev), sent at
// sent, and leads on success.
func (e *Elector) write(ctx context.Context, next drivers.Lease, ver uint64, prev string, sent time.Time) error {
	nv, err := e.store.WriteLease(ctx, next, ver)
	e.mu.Lock()
	defer e.mu.Unlock()
	was := e.leadingLocked(e.now())
	if err != nil {
		e.reread = true
		if drivers.ClassOf(err) == drivers.ClassConflict {
			// Another replica wrote first: follow it.
			e.leadUntil = time.Time{}
			if was {
				e.log.Warn("leader lease lost to another replica; following", "self", e.id)
			}
		}
		return fmt.Errorf("write: %w", err)
	}
	e.seen, e.seenVer, e.seenAt = next, nv, e.now()
	e.leadUntil, e.renewed, e.followed = sent.Add(e.ttl/2), sent, ""
	if !was {
		switch prev {
		case e.id:
			e.log.Info("leading again: this replica renewed its lease after it had lapsed, before another took it", "self", e.id, "term", next.Term)
		case "":
			e.log.Info("leading: this replica holds the leader lease and writes", "self", e.id, "term", next.Term)
		default:
			e.log.Info("leading: this replica took the leader lease over and writes", "self", e.id, "term", next.Term, "from", prev)
		}
		select {
		case e.changes <- struct{}{}:
		default:
		}
	}
	return nil
}

// Release gives the lease up when this replica holds it, so another
// replica takes over at once; this replica stops writing first.
func (e *Elector) Release(ctx context.Context) error {
	e.mu.Lock()
	if e.seen.Holder != e.id || e.seenVer == 0 {
		e.mu.Unlock()
		return nil
	}
	e.leadUntil = time.Time{}
	rel, ver := drivers.Lease{TTL: e.ttl, Term: e.seen.Term, Renewed: e.now()}, e.seenVer
	e.mu.Unlock()
	if _, err := e.store.WriteLease(ctx, rel, ver); err != nil {
		return fmt.Errorf("release the leader lease: %w", err)
	}
	e.log.Info("released the leader lease", "self", e.id)
	return nil
}
