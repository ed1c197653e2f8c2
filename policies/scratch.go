package policies

import (
	"sync"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
)

// Scratch is memory lent to one Decide after another by a caller that
// decides at every step of a long run (the replay): each Decision is
// worked out and built in the arrays of the one before, and reuses the
// waiting messages it composed, where fresh ones were most of what a
// replay allocated. A Decision made on a Scratch is the caller's until
// the next Decide on the same Scratch, which overwrites it. The zero
// Scratch is ready.
type Scratch struct {
	outs []WorkspaceDecision
	pls  drivers.PlacementBuf
	// bufs: the arrays the decision works in.
	bufs deciderBufs
	// reasons: the waiting messages composed in the decision before
	// (last) and in this one (next), by workspace (reasonMemo).
	lastReasons, nextReasons map[schema.Ref]*reasonMemo
}

// begin readies s for the next decision: the reasons the decision
// before composed are kept for it to reuse, those of the one before
// that are dropped, so s holds no more than two decisions' waiting
// workspaces.
func (s *Scratch) begin() {
	if s == nil {
		return
	}
	s.lastReasons, s.nextReasons = s.nextReasons, s.lastReasons
	if s.nextReasons == nil {
		s.nextReasons = map[schema.Ref]*reasonMemo{}
	}
	clear(s.nextReasons)
}

// reasonMemo is the message wait last composed for one workspace and
// what it composed it of: its own reason's message, the overdue
// workspace the message names (zero: none), and whether it waits to
// resume, from which preemption.
type reasonMemo struct {
	base      string
	overdue   schema.Ref
	preempted bool
	by        schema.Ref
	at        time.Time
	msg       string
}

// reason returns the memo of ref's waiting message: the one this
// decision or the one before composed, else an empty one. With s nil,
// always an empty one, so every message is composed afresh.
func (s *Scratch) reason(ref schema.Ref) *reasonMemo {
	if s == nil {
		return new(reasonMemo)
	}
	if m, ok := s.nextReasons[ref]; ok {
		return m
	}
	m, ok := s.lastReasons[ref]
	if !ok {
		m = new(reasonMemo)
	}
	s.nextReasons[ref] = m
	return m
}

// Workspaces returns n zeroed verdicts with room for capacity in all:
// s's array (zeroed), which s then lends the next call too; a fresh one
// when s is nil.
func (s *Scratch) Workspaces(n, capacity int) []WorkspaceDecision {
	if s == nil {
		return make([]WorkspaceDecision, n, capacity)
	}
	return zeroed(&s.outs, n, capacity)
}

// Placements returns the buffer a decision's placements are cut from
// (emptied: earlier placements cut from it are overwritten); a fresh one
// when s is nil.
func (s *Scratch) Placements() *drivers.PlacementBuf {
	if s == nil {
		return new(drivers.PlacementBuf)
	}
	s.pls.Reset()
	return &s.pls
}

// deciderBufs are the arrays one decision works in, sized by its
// workspaces, allocations, nodes and projects: lent by the Scratch,
// or, without one, by bufsPool. A decision over thousands of
// workspaces needs large blocks of them, and clearing memory just used
// costs much less than allocating fresh memory (and collecting it).
type deciderBufs struct {
	pool      []wsState // decider.pool
	ws        []*wsState
	projPool  []projState // the records decider.projs points to
	projs     []*projState
	preempted []drivers.Preemption // the History.Preempted records read
	free      []amount
	heldSlots []int32
	heldBy    []int32
	allocs    []*drivers.Alloc
	byProj    [][]*wsState
	// the preemption search's caches (prepareSearch)
	rightStamp  []int32
	rightVal    []Right
	decidedWS   []bool
	initialMost [][numLevels]int
	// the queues (buildQueue)
	counts    []int
	queues    []int32
	done      []bool
	positions []int
	bucketOf  []int32
	// buildAvail's scratch
	thr  []uint8
	vals []int
}

// bufsPool recycles the arrays of decisions made without a Scratch (the
// loop's and plan's). What they still point to (the last input's specs
// and allocations) stays reachable until a decision takes them again
// or the pool's next sweep, a collection or two later.
var bufsPool sync.Pool // of *deciderBufs

// decider returns the arrays a decision works in: s's, or, when s is
// nil, a set from bufsPool (putBufs gives them back).
func (s *Scratch) decider() *deciderBufs {
	if s != nil {
		return &s.bufs
	}
	if b, _ := bufsPool.Get().(*deciderBufs); b != nil {
		return b
	}
	return new(deciderBufs)
}

// putBufs gives b, the arrays of a decision made without s, back to
// bufsPool once the decision is done: nothing it returns points into
// them.
func (s *Scratch) putBufs(b *deciderBufs) {
	if s == nil {
		bufsPool.Put(b)
	}
}

// zeroed returns *buf cut to n zeroed elements, with room for c; *buf
// keeps the array for the next decision. Where its array is too small,
// a fresh one with a quarter more room, so that a size that creeps up
// decision after decision does not take a fresh one each time. A
// caller that appends past n overwrites each element whole, so what
// lies past n need not be cleared.
func zeroed[T any](buf *[]T, n, c int) []T {
	if cap(*buf) < c {
		*buf = make([]T, n, c+c/4)
		return *buf
	}
	*buf = (*buf)[:n]
	clear(*buf)
	return *buf
}
