package baseline

import (
	"github.com/berth-dev/berth/policies"
)

// FIFO decides as a strict first-in, first-out queue: workspaces start in
// the order they were queued (then by Ref), each on the first node (by
// name) with enough free GPUs, replicas one by one, all or none. The
// first that does not fit blocks everyone behind it. Nothing is ever
// preempted; priorities, quotas and topology are ignored.
func FIFO(in policies.Input) policies.Decision {
	wd := newWorld(in)
	queue := wd.settle()
	less := func(a, b *work) bool {
		if c := a.queued.Compare(b.queued); c != 0 {
			return c < 0
		}
		return a.idx < b.idx // Ref order: the queue is of the specs
	}
	blocked := false
	inOrder(queue, less, nil, func(w *work) bool {
		if wd.place(w, firstFit, nil, nil, nil) {
			return true
		}
		wd.wait(w, reasonCapacity)
		// A workspace that can never fit does not block.
		blocked = wd.usable(w)
		return !blocked
	})
	if blocked {
		for _, w := range queue {
			if !w.decided {
				wd.wait(w, reasonFIFO) // not reached: behind the head
			}
		}
	}
	d := wd.decision()
	wd.release()
	return d
}

// nomadDelta is how many priority points lower an allocation must be for
// Nomad to preempt it.
const nomadDelta = 10

// Nomad decides as Nomad's own scheduler would with preemption enabled:
// workspaces in priority order (the tier's value; then queued time, then
// Ref), each on the node that packs it tightest (bin-packing, NVLink
// domains ignored). A workspace that fits nowhere preempts whole
// workspaces whose priority is at least 10 points lower, on the node that
// needs the fewest victims (lowest priority first, then the ones whose GPU
// count is closest to what is missing): no quotas, no fair share, no care
// for work lost since a checkpoint. A workspace that does not fit does not
// block the ones behind it.
func Nomad(in policies.Input) policies.Decision {
	wd := newWorld(in)
	queue := wd.settle()
	less := byPriority
	may := func(w, v *work) bool { return v.prio <= w.prio-nomadDelta }
	order := func(a, b *work) bool {
		if a.prio != b.prio {
			return a.prio < b.prio
		}
		if a.held != b.held {
			return a.held > b.held // frees the most with the fewest victims
		}
		return a.idx < b.idx // Ref order: victims run, so are of the specs
	}
	top := func(vs []*work) int {
		t := 0
		for _, v := range vs {
			t = max(t, v.prio)
		}
		return t
	}
	// Fewest victims, then the lowest priority.
	cheaper := func(a, b []*work) bool {
		if len(a) != len(b) {
			return len(a) < len(b)
		}
		return top(a) < top(b)
	}
	rights := func(w *work) right {
		if wd.lowest > w.prio-nomadDelta {
			return nil // nothing running is low enough to be a victim
		}
		return may
	}
	wd.admitAll(wd.sorted(queue, less), bestFit, rights, order, cheaper, nil)
	d := wd.decision()
	wd.release()
	return d
}

// Quota decides as a Kueue-like quota scheduler: each project has a
// guaranteed quota (Kueue's nominal quota) and may borrow idle capacity up
// to its borrow limit. Workspaces that fit inside their project's quota go
// first, then by priority, then queued time (Kueue's BestEffortFIFO: one
// that does not fit does not block). A workspace inside its quota may
// reclaim GPUs that other projects borrow beyond theirs (only borrowed
// ones: a victim's project stays at or above its quota); any workspace may
// preempt lower-priority workspaces of its own project. Victims in Kueue's
// order: other projects' borrowers first, then lower priority, then the
// most recently started. Placement packs (bin-packing) without NVLink
// awareness. No decayed fair share, no aging, no care for checkpoints.
func Quota(in policies.Input) policies.Decision {
	wd := newWorld(in)
	queue := wd.settle()
	inQuota := func(w *work) bool { return w.proj.held+w.gpus*w.replicas <= w.proj.quota }
	// The order is computed once, at the start: Kueue orders its heads when
	// a cycle starts.
	for _, w := range queue {
		w.fits = inQuota(w)
	}
	less := byPriority
	own := func(w, v *work) bool { return v.proj == w.proj && v.prio < w.prio }
	reclaim := func(w, v *work) bool {
		if v.proj == w.proj {
			return v.prio < w.prio
		}
		// Only borrowed GPUs: taking v leaves its project at or above its
		// quota (else the two would reclaim from each other back and
		// forth).
		return v.proj.held-v.held >= v.proj.quota
	}
	rightsFor := func(w *work) right {
		switch {
		case inQuota(w):
			return reclaim
		case w.proj.lowest >= w.prio:
			return nil // nothing of its own project runs lower: no victim
		}
		return own
	}
	order := func(a, b *work) bool {
		ab, bb := a.proj.held > a.proj.quota, b.proj.held > b.proj.quota
		if ab != bb {
			return ab
		}
		if a.prio != b.prio {
			return a.prio < b.prio
		}
		if as, bs := a.started(), b.started(); !as.Equal(bs) {
			return as.After(bs)
		}
		return a.idx < b.idx // Ref order: victims run, so are of the specs
	}
	// Fewest victims, then the set whose last victim comes first in
	// Kueue's order.
	cheaper := func(a, b []*work) bool {
		if len(a) != len(b) {
			return len(a) < len(b)
		}
		return len(a) > 0 && order(a[len(a)-1], b[len(b)-1])
	}
	limit := func(w *work) bool {
		p := w.proj
		return p.borrow < 0 || p.held+w.gpus*w.replicas <= p.quota+p.borrow
	}
	// Those inside their quota first, then the rest, each in the order
	// computed once.
	ordered := wd.sorted(queue, less)
	rest := wd.partition(ordered, func(w *work) bool { return w.fits })
	wd.admitAll(ordered[:len(ordered)-len(rest)], bestFit, rightsFor, order, cheaper, limit)
	wd.admitAll(rest, bestFit, rightsFor, order, cheaper, limit)
	d := wd.decision()
	wd.release()
	return d
}

// byPriority orders a queue by priority (highest first), then queued
// time, then Ref.
func byPriority(a, b *work) bool {
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	if c := a.queued.Compare(b.queued); c != 0 {
		return c < 0
	}
	return a.idx < b.idx // Ref order: the queue is of the specs
}

// shape is what a placement attempt depends on besides the cluster.
type shape struct {
	gpus, replicas, prio int
	proj                 *project
	inQuota              bool
	cls                  int32 // the GPUs it may use (groups.go)
}

// pack packs s into one integer, for a fast map; ok false when a field
// does not fit its bits (a shape not memoized only costs a placement
// attempt).
func (s shape) pack() (key uint64, ok bool) {
	const bits = 15
	p := 0 // no project
	if s.proj != nil {
		p = s.proj.idx + 1
	}
	prio := s.prio + 1<<(bits-1)
	if uint(s.gpus|s.replicas|prio|p) >= 1<<bits || uint32(s.cls) >= 1<<(64-4*bits-1) { // one is negative or too large
		return 0, false
	}
	key = uint64(s.cls)<<(4*bits+1) | uint64(s.gpus)<<(3*bits+1) | uint64(s.replicas)<<(2*bits+1) | uint64(prio)<<(bits+1) | uint64(p)<<1
	if s.inQuota {
		key |= 1
	}
	return key, true
}

// admitAll admits the workspaces of ordered, in order, without blocking;
// a failure is remembered for the same shape until the cluster changes.
// allowed, when set, is the quota check.
func (wd *world) admitAll(ordered []*work, how fit, rights func(*work) right, order victimOrder, cheaper func(a, b []*work) bool, allowed func(*work) bool) {
	// The shapes that failed since gen last changed.
	if wd.failed == nil {
		wd.failed = map[uint64]bool{}
	}
	failed, failedGen := wd.failed, wd.gen
	clear(failed)
	// The lowest priority running, in each project and in all. It stays
	// a lower bound for the victims this admission may choose (they
	// run, and only become victims), so rights use it to give up early:
	// a workspace without rights only tries the GPUs free or being
	// released, which is all preemption could find with rights that allow
	// no victim (preemptNode's only success without victims, room
	// already there, is a node pickNode would have found).
	wd.lowest = int(^uint(0) >> 1)
	for i := range wd.projs {
		wd.projs[i].lowest = wd.lowest
	}
	for i := range wd.ws {
		if v := &wd.ws[i]; v.running && v.proj != nil {
			v.proj.lowest = min(v.proj.lowest, v.prio)
			wd.lowest = min(wd.lowest, v.prio)
		}
	}
	for _, w := range ordered {
		wd.turns++
		w.out.Queue = wd.turns
		if allowed != nil && !allowed(w) {
			wd.wait(w, reasonQuota)
			continue
		}
		key := shape{gpus: w.gpus, replicas: w.replicas, prio: w.prio, cls: w.cls}
		if allowed != nil {
			// Quota rights depend on the project (never its own borrowers;
			// its own lower priorities) and on whether it is in quota; a
			// workspace beyond its quota, in a project with nothing of lower
			// priority running, can only take free GPUs, like any other.
			key.inQuota = w.proj.held+w.gpus*w.replicas <= w.proj.quota
			if key.inQuota || w.proj.lowest < w.prio {
				key.proj = w.proj
			}
		}
		var may right
		if w.canPre {
			may = rights(w)
		}
		if may == nil && wd.room() < w.gpus {
			// No node has the GPUs free or being released, and it may
			// not preempt: place would fail at once.
			wd.wait(w, reasonCapacity)
			continue
		}
		if failedGen != wd.gen {
			clear(failed)
			failedGen = wd.gen
		}
		packed, memo := key.pack()
		if memo && failed[packed] {
			wd.wait(w, reasonCapacity)
			continue
		}
		if !wd.place(w, how, may, order, cheaper) {
			if memo {
				failed[packed] = true
			}
			wd.wait(w, reasonCapacity)
		}
	}
}

// partition moves the workspaces of ws that keep in front, those that do
// not behind, each in their order, and returns the latter.
func (wd *world) partition(ws []*work, keep func(*work) bool) []*work {
	rest := resize(wd.rest, len(ws))[:0]
	n := 0
	for _, w := range ws {
		if keep(w) {
			ws[n] = w
			n++
		} else {
			rest = append(rest, w)
		}
	}
	copy(ws[n:], rest)
	wd.rest = rest
	return ws[n:]
}

// sorted returns the queue in the order less gives.
func (wd *world) sorted(queue []*work, less func(a, b *work) bool) []*work {
	out := resize(wd.ordered, len(queue))[:0]
	inOrder(queue, less, nil, func(w *work) bool {
		out = append(out, w)
		return true
	})
	wd.ordered = out
	return out
}
