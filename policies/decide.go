package policies

import (
	"container/heap"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/berth-dev/berth/reconcile/state"
	"github.com/berth-dev/berth/schema"
)

// wsState is Decide's working record of one workspace: in the specs, or
// holding GPUs without being in them.
type wsState struct {
	ref  schema.Ref
	spec *schema.Workspace // nil: not in the specs
	proj int               // index into decider.projs; -1: unknown project

	tier        int
	tierName    string
	canPreempt  bool
	preemptible bool // tier and workspace both allow it

	gpus, replicas int
	model          string
	levels         []int // placement levels, preferred first

	allocs   []*state.Alloc
	held     int  // GPUs its allocations hold
	stopping bool // an allocation is stopping
	leaving  bool // holds GPUs it will give up: stopping, stopped or removed
	running  bool // holds GPUs and stays unless preempted

	startedAt time.Time // latest start over its allocations
	workLost  float64   // GPU-seconds since the last checkpoint
	overQuota bool      // beyond its project's quota in start order

	queuedSince time.Time
	boost       int
	preempted   *state.Preemption // last preemption (history), if waiting to resume

	victim bool // preempted in this decision
	// candidate: may be preempted at all (running, preemptible, past the
	// minimum runtime); rank: how many tiers are below its own.
	candidate bool
	rank      int
	out       WorkspaceDecision
}

// projState is Decide's working record of one project.
type projState struct {
	spec   *schema.Project
	name   string
	tier   int
	quota  int
	borrow int // < 0: unlimited
	weight float64
	held   int     // GPUs counted against its quota now (changes as the decision goes)
	usage  float64 // decayed GPU-seconds at Now

	queue   []int32 // pending workspaces, in the project's queue order
	done    []bool  // by queue position: decided
	left    int     // positions not decided yet
	next    int     // first position that may not be decided
	needs   []needBucket
	heapIdx int
}

// needBucket lists the queue positions of a project's workspaces that need
// the same number of GPUs, in queue order, so the first one that still
// fits inside the quota is found in a few steps.
type needBucket struct {
	need int
	pos  []int
	cur  int
}

// head returns the queue position the project offers next: the first
// workspace (in its queue order) that fits inside the project's remaining
// guaranteed quota, else its first workspace.
func (p *projState) head() int {
	room := p.quota - p.held
	best := -1
	for i := range p.needs {
		b := &p.needs[i]
		if b.need > room {
			break
		}
		for b.cur < len(b.pos) && p.done[b.pos[b.cur]] {
			b.cur++
		}
		if b.cur < len(b.pos) && (best < 0 || b.pos[b.cur] < best) {
			best = b.pos[b.cur]
		}
	}
	if best >= 0 {
		return best
	}
	for p.next < len(p.queue) && p.done[p.next] {
		p.next++
	}
	return p.next
}

// decider holds one Decide call's working state. Nothing in it is shared
// with the input: the input is only read.
type decider struct {
	in     Input
	policy schema.PolicySpec
	now    time.Time
	steady float64 // usage one held GPU amounts to in steady state

	c     *cluster
	ws    []*wsState
	projs []*projState
	byRef map[schema.Ref]int32

	// gen changes whenever the cluster or a project's holdings change, so
	// memoized failures are recomputed only when they could differ.
	gen        int
	failMemo   map[shapeKey]failure
	reserved   []int32 // slots held for the head of the queue
	reservedBy int32   // workspace holding the reservation; -1 none
	journal    []undo
	dirty      []int // projects whose holdings a preemption changed
	// couldPreempt: the last preemption search saw a workspace it may
	// preempt (for the wait reason).
	couldPreempt bool

	// avail[m][l][k] counts, per group, the GPUs a preemptor could get:
	// free, releasing, and held by candidates of the k lowest tiers
	// (k = numTiers: of any tier). It bounds the preemption search.
	avail    [][numLevels][]*countIndex
	numTiers int
	// rights caches right() per workspace for one search.
	searchID   int32
	rightStamp []int32
	rightVal   []Right
	buf        struct {
		counts, idx []int
		set         []int32
	}
}

// shapeKey identifies what a placement attempt depends on besides the
// cluster: the shape of one replica and the preemptor's rights.
type shapeKey struct {
	gen            int
	gpus, replicas int
	model          string
	nvlink, numa   schema.Constraint
	tier           int
	canPreempt     bool
	inQuota        bool
	project        int
	preemptible    bool
}

type failure struct {
	reason Reason
}

type undo struct {
	slot      int32 // -1: a workspace change
	owner     int32
	releasing bool
	ws        int32
	victim    bool
	projHeld  int
}

// Decide computes who runs where, who is preempted by whom and why
// everyone else waits. It is a pure function of its input: it reads no
// clock, does no I/O and never mutates in. Its Workspaces are sorted by
// Ref: one per workspace in the specs and one per workspace holding GPUs
// that the specs no longer list.
//
// Workspaces are considered in queue order: first those that fit inside
// their project's guaranteed quota (so a borrower, whatever its tier, never
// takes capacity an in-quota workspace would reclaim right back), then tier
// (highest first), then aging boost (bounded), then the project's fair share (decayed usage, plus its
// held GPUs at their steady-state usage, per unit of weight), then time
// queued, then Ref. Each one starts on free GPUs if it can (the placement
// that leaves the least stranded capacity, preferred topology first); else
// preempts (strictly lower tiers; or, inside its quota, other projects'
// borrowed GPUs); else waits with a reason. The first workspace that must
// wait for capacity reserves the best free GPUs for itself, so later, smaller
// ones cannot starve it.
//
// A preemptor whose victims are still stopping gets VerdictStart with those
// victims in Preempts (and they keep VerdictPreempt): the plan is
// preempt → wait → start, and deciding again while they stop gives the same
// decision. Preempts also lists any workspace being stopped (VerdictStop)
// whose GPUs the start takes over.
func Decide(in Input) Decision {
	d := newDecider(in)
	// 1. Verdicts that need no capacity: stop, keep running, keep stopping.
	d.settleHolders()
	// 2. The queue: every workspace that wants to run and holds nothing.
	h := d.buildQueue()
	// 3. Admit in queue order.
	for h.Len() > 0 {
		p := d.projs[h.items[0]]
		pos := p.head()
		d.admit(d.ws[p.queue[pos]])
		p.done[pos] = true
		p.left--
		if p.left > 0 {
			heap.Fix(h, 0)
		} else {
			heap.Pop(h)
		}
		// Victims' projects hold fewer GPUs now: their keys moved.
		for _, pi := range d.dirty {
			if d.projs[pi].heapIdx >= 0 {
				heap.Fix(h, d.projs[pi].heapIdx)
			}
		}
		d.dirty = d.dirty[:0]
	}
	// 4. Collect, sorted by Ref.
	out := Decision{Now: in.Now, Workspaces: make([]WorkspaceDecision, 0, len(d.ws))}
	for _, w := range d.ws {
		out.Workspaces = append(out.Workspaces, w.out)
	}
	sort.Slice(out.Workspaces, func(i, j int) bool { return out.Workspaces[i].Ref.Less(out.Workspaces[j].Ref) })
	return out
}

func newDecider(in Input) *decider {
	d := &decider{in: in, now: in.Now, byRef: map[schema.Ref]int32{}, failMemo: map[shapeKey]failure{}, reservedBy: -1}
	specs := in.Specs
	if specs == nil {
		specs = &schema.Set{Policy: schema.DefaultPolicy()}
	}
	d.policy = specs.Policy.Spec
	snap := in.Snapshot
	if snap == nil {
		snap = &state.Snapshot{}
	}
	hl := d.policy.FairShare.HalfLife
	d.steady = 1
	if hl > 0 {
		d.steady = hl.Seconds() / math.Ln2
	}
	d.c = newCluster(snap)

	// Projects.
	projIdx := map[string]int{}
	var hist state.History
	if in.History != nil {
		hist = *in.History
	}
	usage := decayedUsage(hist, snap, in.Now, hl)
	for i := range specs.Projects {
		p := &specs.Projects[i]
		ps := &projState{spec: p, name: p.Meta.Name, quota: p.Spec.Quota.GPUs, borrow: p.Spec.BorrowLimit.GPUs, weight: p.Spec.FairShare.Weight, heapIdx: -1}
		if ps.weight <= 0 {
			ps.weight = 1
		}
		if t := specs.Tier(p.Spec.Tier); t != nil {
			ps.tier = t.Spec.Value
		}
		ps.usage = usage[ps.name]
		projIdx[ps.name] = len(d.projs)
		d.projs = append(d.projs, ps)
	}

	// Workspaces in the specs. Their records are allocated in one block,
	// and workspaces of the same topology share one (read-only) levels
	// slice: a long queue costs few allocations.
	block := make([]wsState, len(specs.Workspaces))
	levelsOf := map[schema.Topology][]int{}
	d.byRef = make(map[schema.Ref]int32, len(specs.Workspaces))
	for i := range specs.Workspaces {
		sw := &specs.Workspaces[i]
		w := &block[i]
		*w = wsState{ref: sw.Ref(), spec: sw, proj: -1, gpus: sw.Spec.Resources.GPUs, replicas: max(sw.Spec.Replicas, 1), model: sw.Spec.Resources.GPUModel}
		if pi, ok := projIdx[w.ref.Project]; ok {
			w.proj = pi
			p := d.projs[pi]
			w.tier = p.tier
			w.tierName = p.spec.Spec.Tier
			if t := specs.Tier(p.spec.Spec.Tier); t != nil {
				w.canPreempt = t.Spec.CanPreempt
				w.preemptible = t.Spec.Preemptible && sw.Spec.Preemptible
			}
		}
		lv, ok := levelsOf[sw.Spec.Topology]
		if !ok {
			lv = levels(sw.Spec.Topology, d.policy.Defaults.Topology)
			levelsOf[sw.Spec.Topology] = lv
		}
		w.levels = lv
		w.out = WorkspaceDecision{Ref: w.ref}
		d.add(w)
	}

	// Allocations: attach to their workspace (or an orphan for refs the
	// specs no longer list) and mark their GPUs held.
	for ai := range snap.Allocs {
		a := &snap.Allocs[ai]
		wi, ok := d.byRef[a.Workspace]
		if !ok {
			w := &wsState{ref: a.Workspace, proj: -1}
			w.out = WorkspaceDecision{Ref: w.ref}
			if pi, ok := projIdx[a.Workspace.Project]; ok {
				w.proj = pi
			}
			wi = d.add(w)
		}
		w := d.ws[wi]
		w.allocs = append(w.allocs, a)
		w.held += len(a.GPUs)
		if a.Phase == state.AllocStopping {
			w.stopping = true
		}
		if a.StartedAt.After(w.startedAt) {
			w.startedAt = a.StartedAt
		}
		since := a.StartedAt
		if a.LastCheckpoint.After(since) {
			since = a.LastCheckpoint
		}
		if lost := in.Now.Sub(since).Seconds(); lost > 0 {
			w.workLost += lost * float64(len(a.GPUs))
		}
		ni := sort.Search(len(snap.Nodes), func(i int) bool { return snap.Nodes[i].Name >= a.Node })
		if ni == len(snap.Nodes) || snap.Nodes[ni].Name != a.Node {
			continue
		}
		for _, id := range a.GPUs {
			if si := d.c.slot(ni, id); si >= 0 {
				d.c.setOwner(si, wi)
			}
		}
	}
	for wi, w := range d.ws {
		if w.held == 0 {
			continue
		}
		w.leaving = w.stopping || w.spec == nil || w.spec.Spec.State == schema.DesiredStopped
		w.running = !w.leaving
		if w.leaving {
			d.markReleasing(int32(wi))
		}
	}

	// Quota accounting: what stays counts against its project; the
	// workspaces started last are the ones beyond quota.
	byProj := make([][]*wsState, len(d.projs))
	for _, w := range d.ws {
		if w.running && w.proj >= 0 {
			byProj[w.proj] = append(byProj[w.proj], w)
		}
	}
	for pi, ws := range byProj {
		sort.Slice(ws, func(i, j int) bool {
			if !ws[i].startedAt.Equal(ws[j].startedAt) {
				return ws[i].startedAt.Before(ws[j].startedAt)
			}
			return ws[i].ref.Less(ws[j].ref)
		})
		p := d.projs[pi]
		for _, w := range ws {
			p.held += w.held
			w.overQuota = p.held > p.quota
		}
	}

	// Preemption candidates and tier ranks.
	values := map[int]bool{}
	for _, t := range specs.Tiers {
		values[t.Spec.Value] = true
	}
	var sorted []int
	for v := range values {
		sorted = append(sorted, v)
	}
	sort.Ints(sorted)
	d.numTiers = len(sorted)
	for _, w := range d.ws {
		w.rank = sort.SearchInts(sorted, w.tier)
		w.candidate = w.running && w.preemptible && w.proj >= 0 && in.Now.Sub(w.startedAt) >= d.policy.Preemption.MinRuntime
	}
	d.rightStamp = make([]int32, len(d.ws))
	d.rightVal = make([]Right, len(d.ws))
	d.initAvail()

	// Waiting and aging.
	ag := d.policy.Aging
	for _, w := range d.ws {
		w.queuedSince = in.Now
		if t, ok := hist.QueuedSince[w.ref]; ok && t.Before(in.Now) {
			w.queuedSince = t
		}
		if ag.Interval > 0 && ag.Step > 0 {
			steps := int64(in.Now.Sub(w.queuedSince) / ag.Interval)
			w.boost = int(min(steps*int64(ag.Step), int64(max(ag.MaxBoost, 0))))
		}
		if p, ok := hist.Preempted[w.ref]; ok {
			w.preempted = &p
		}
	}
	return d
}

func (d *decider) add(w *wsState) int32 {
	wi := int32(len(d.ws))
	d.ws = append(d.ws, w)
	d.byRef[w.ref] = wi
	return wi
}

// markReleasing marks every GPU workspace wi holds as releasing.
func (d *decider) markReleasing(wi int32) {
	for _, si := range d.slotsOf(wi) {
		d.changeSlot(si, wi, true, false)
	}
}

// contrib is the set of avail indexes (bit k) slot si counts in.
func (d *decider) contrib(si int32) uint64 {
	all := uint64(1)<<(d.numTiers+1) - 1
	s := &d.c.slots[si]
	switch {
	case s.owner == ownerFree || (s.owner >= 0 && s.releasing):
		return all
	case s.owner == ownerReserved:
		return 0
	}
	w := d.ws[s.owner]
	if !w.candidate || w.victim {
		return 0
	}
	// Held by a candidate of rank r: counts for k > r.
	return all &^ (uint64(1)<<(w.rank+1) - 1)
}

// changeSlot sets slot si's owner and releasing flag, keeping the free
// and avail indexes current; record journals it for rollback.
func (d *decider) changeSlot(si, owner int32, releasing, record bool) {
	s := &d.c.slots[si]
	if record {
		d.journal = append(d.journal, undo{slot: si, owner: s.owner, releasing: s.releasing})
	}
	var before uint64
	if d.avail != nil {
		before = d.contrib(si)
	}
	d.c.setOwner(si, owner)
	s.releasing = releasing
	if d.avail == nil {
		return
	}
	after := d.contrib(si)
	if before == after {
		return
	}
	for k := 0; k <= d.numTiers; k++ {
		var delta int
		switch {
		case before&(1<<k) != 0 && after&(1<<k) == 0:
			delta = -1
		case before&(1<<k) == 0 && after&(1<<k) != 0:
			delta = 1
		default:
			continue
		}
		for gk, m := range [2]int32{0, s.mi} {
			for l := range numLevels {
				d.avail[m][l][k].add(int(s.groups[gk][l]), delta)
			}
		}
	}
}

// initAvail builds the avail indexes from the cluster as it is now.
func (d *decider) initAvail() {
	d.avail = make([][numLevels][]*countIndex, len(d.c.index))
	for m := range d.c.index {
		for l := range numLevels {
			li := d.c.index[m][l]
			d.avail[m][l] = make([]*countIndex, d.numTiers+1)
			for k := 0; k <= d.numTiers; k++ {
				d.avail[m][l][k] = newCountIndex(li.groups, func(gi int) int {
					n := 0
					for _, si := range li.groups[gi].gpus {
						if d.contrib(si)&(1<<k) != 0 {
							n++
						}
					}
					return n
				})
			}
		}
	}
}

// slotsOf returns the usable slots workspace wi holds, by slot order.
func (d *decider) slotsOf(wi int32) []int32 {
	var out []int32
	for _, a := range d.ws[wi].allocs {
		ni := sort.Search(len(d.c.nodes), func(i int) bool { return d.c.nodes[i].Name >= a.Node })
		if ni == len(d.c.nodes) || d.c.nodes[ni].Name != a.Node {
			continue
		}
		for _, id := range a.GPUs {
			if si := d.c.slot(ni, id); si >= 0 && d.c.slots[si].owner == wi {
				out = append(out, si)
			}
		}
	}
	return out
}

// levels lists the placement levels a topology allows, preferred first.
func levels(t, def schema.Topology) []int {
	nv, nu := t.NVLink, t.NUMA
	if nv == "" {
		nv = def.NVLink
	}
	if nu == "" {
		nu = def.NUMA
	}
	req := func(c schema.Constraint) bool { return c == schema.ConstraintRequired }
	pref := func(c schema.Constraint) bool { return c == schema.ConstraintPreferred }
	var out []int
	wantDom := req(nv) || pref(nv)
	wantNUMA := req(nu) || pref(nu)
	if wantDom && wantNUMA {
		out = append(out, levelCell)
	}
	if wantDom && !req(nu) {
		out = append(out, levelDomain)
	}
	if wantNUMA && !req(nv) {
		out = append(out, levelNUMA)
	}
	if !req(nv) && !req(nu) {
		out = append(out, levelNode)
	}
	return out
}

// settleHolders gives every workspace that holds GPUs, or is not wanted,
// its verdict.
func (d *decider) settleHolders() {
	for _, w := range d.ws {
		switch {
		case w.spec == nil:
			w.out.Verdict = VerdictStop
			w.out.Placements = placements(w.allocs)
			w.out.Reason = Reason{ReasonStopped, "removed: the specs no longer list it"}
		case w.spec.Spec.State == schema.DesiredStopped:
			w.out.Verdict = VerdictStop
			w.out.Placements = placements(w.allocs)
			w.out.Reason = Reason{ReasonStopped, "stopped: its desired state is Stopped"}
		case w.stopping:
			w.out.Verdict = VerdictPreempt
			w.out.Placements = placements(w.allocs)
			if w.preempted != nil {
				by := w.preempted.By
				w.out.PreemptedBy = &by
				w.out.Reason = Reason{ReasonPreempted, fmt.Sprintf("preempted by %s at %s; stopping", by, stamp(w.preempted.At))}
			} else {
				w.out.Reason = Reason{ReasonPreempted, "stopping; it queues again once its GPUs are free"}
			}
		case w.running:
			w.out.Verdict = VerdictRun
			w.out.Placements = placements(w.allocs)
		}
	}
}

// placements turns allocations into placements, by replica.
func placements(allocs []*state.Alloc) []state.Placement {
	if len(allocs) == 0 {
		return nil
	}
	out := make([]state.Placement, 0, len(allocs))
	for _, a := range allocs {
		gpus := append([]string(nil), a.GPUs...)
		sort.Strings(gpus)
		out = append(out, state.Placement{Replica: a.Replica, Node: a.Node, GPUs: gpus})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Replica < out[j].Replica })
	return out
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// --- the queue ---

// projHeap orders projects by the queue key of their head workspace.
type projHeap struct {
	d     *decider
	items []int
}

func (h *projHeap) Len() int { return len(h.items) }
func (h *projHeap) Less(i, j int) bool {
	return h.d.before(h.items[i], h.items[j])
}
func (h *projHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.d.projs[h.items[i]].heapIdx = i
	h.d.projs[h.items[j]].heapIdx = j
}
func (h *projHeap) Push(x any) {
	pi := x.(int)
	h.d.projs[pi].heapIdx = len(h.items)
	h.items = append(h.items, pi)
}
func (h *projHeap) Pop() any {
	pi := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	h.d.projs[pi].heapIdx = -1
	return pi
}

// share is a project's fair-share load: decayed usage plus its held GPUs
// at the usage they reach when held for good, per unit of weight.
func (d *decider) share(p *projState) float64 {
	return (p.usage + float64(p.held)*d.steady) / p.weight
}

func (d *decider) inQuota(p *projState, w *wsState) bool {
	return p.held+w.gpus*w.replicas <= p.quota
}

// before reports whether project a's head comes before project b's.
func (d *decider) before(a, b int) bool {
	pa, pb := d.projs[a], d.projs[b]
	wa, wb := d.ws[pa.queue[pa.head()]], d.ws[pb.queue[pb.head()]]
	if qa, qb := d.inQuota(pa, wa), d.inQuota(pb, wb); qa != qb {
		return qa
	}
	if wa.tier != wb.tier {
		return wa.tier > wb.tier
	}
	if wa.boost != wb.boost {
		return wa.boost > wb.boost
	}
	if sa, sb := d.share(pa), d.share(pb); sa != sb {
		return sa < sb
	}
	if !wa.queuedSince.Equal(wb.queuedSince) {
		return wa.queuedSince.Before(wb.queuedSince)
	}
	return wa.ref.Less(wb.ref)
}

func (d *decider) buildQueue() *projHeap {
	h := &projHeap{d: d}
	for wi, w := range d.ws {
		if w.spec == nil || w.spec.Spec.State == schema.DesiredStopped || w.held > 0 {
			continue
		}
		if w.proj < 0 {
			w.out.Verdict = VerdictWait
			w.out.Reason = Reason{ReasonQuota, fmt.Sprintf("quota: project %s does not exist", w.ref.Project)}
			continue
		}
		p := d.projs[w.proj]
		p.queue = append(p.queue, int32(wi))
	}
	for pi, p := range d.projs {
		if len(p.queue) == 0 {
			continue
		}
		sort.Slice(p.queue, func(i, j int) bool {
			a, b := d.ws[p.queue[i]], d.ws[p.queue[j]]
			if a.boost != b.boost {
				return a.boost > b.boost
			}
			if !a.queuedSince.Equal(b.queuedSince) {
				return a.queuedSince.Before(b.queuedSince)
			}
			return a.ref.Less(b.ref)
		})
		p.done = make([]bool, len(p.queue))
		p.left = len(p.queue)
		byNeed := map[int]int{}
		for pos, wi := range p.queue {
			w := d.ws[wi]
			need := w.gpus * w.replicas
			bi, ok := byNeed[need]
			if !ok {
				bi = len(p.needs)
				byNeed[need] = bi
				p.needs = append(p.needs, needBucket{need: need})
			}
			p.needs[bi].pos = append(p.needs[bi].pos, pos)
		}
		sort.Slice(p.needs, func(i, j int) bool { return p.needs[i].need < p.needs[j].need })
		h.items = append(h.items, pi)
		p.heapIdx = len(h.items) - 1
	}
	heap.Init(h)
	return h
}
