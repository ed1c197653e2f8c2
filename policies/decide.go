package policies

import (
	"cmp"
	"container/heap"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/berth-dev/berth/reconcile/state"
	"github.com/berth-dev/berth/schema"
)

// wsState is Decide's working record of one workspace: in the specs, or
// holding GPUs without being in them.
type wsState struct {
	idx  int32 // index in decider.ws
	ref  schema.Ref
	spec *schema.Workspace // nil: not in the specs
	proj int               // index into decider.projs; -1: unknown project

	tier        int
	tierName    string
	canPreempt  bool
	preemptible bool // tier and workspace both allow it

	gpus, replicas int
	// cpu (MHz shares), mem, disk and exclusive cores per replica; zero:
	// not asked for.
	cpu, mem, disk int64
	cores          int
	// feat is its index in decider.feats: the driver and host volumes it
	// needs of a node (-1: nothing a node could lack).
	feat   int32
	model  string
	levels []int // placement levels, preferred first
	// topo numbers the workspace's NVLink and NUMA constraints (defaults
	// filled in): equal constraints, equal numbers.
	topo int

	stopped bool // the specs want it stopped (DesiredStopped)

	allocs   []*state.Alloc
	held     int  // GPUs its allocations hold
	stopping bool // an allocation is stopping
	leaving  bool // holds GPUs it will give up: stopping, stopped or removed
	running  bool // has allocations (GPUs or not) and stays unless preempted

	startedAt time.Time // latest start over its allocations
	workLost  float64   // GPU-seconds since the last checkpoint
	overQuota bool      // admitted beyond its project's quota (markOverQuota)
	// admitted is its quota label as recorded in History.Borrowing.
	admitted admission

	queuedSince time.Time
	boost       int
	preempted   *state.Preemption // last preemption (history), if waiting to resume

	victim bool // preempted in this decision
	// candidate: may be preempted at all (running, preemptible, past the
	// minimum runtime); rank: how many tiers are below its own.
	candidate bool
	rank      int
	// out is its entry in decider.outs: what Decide returns for it.
	out *WorkspaceDecision
}

// projState is Decide's working record of one project.
type projState struct {
	spec *schema.Project
	name string
	tier int
	// canPreempt, preemptible: its tier's flags (false: no such tier).
	canPreempt, preemptible bool
	quota                   int
	borrow                  int // < 0: unlimited
	weight                  float64
	held                    int     // GPUs counted against its quota now (changes as the decision goes)
	usage                   float64 // decayed GPU-seconds at Now
	// candidates: some workspace of it was a preemption candidate as the
	// decision began; leastOver: the fewest GPUs such a candidate beyond
	// the quota held (MaxInt: none). Neither changes as the decision
	// goes: they bound who may be preempted (mayPreemptAny).
	candidates bool
	leastOver  int

	queue   []int32 // pending workspaces, in the project's queue order
	done    []bool  // by queue position: decided
	left    int     // positions not decided yet
	next    int     // first position that may not be decided
	needs   []needBucket
	heapIdx int
	// key is its head's place in the queue, as refreshKey last found it.
	key queueKey
}

// queueKey is what orders a project in the queue: its head workspace
// and that workspace's queue key (see before).
type queueKey struct {
	w       *wsState
	inQuota bool
	share   float64 // the project's fair share less the head's aging credit
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
	// stepCredit is what one aging step takes off a workspace's fair-share
	// key: one GPU used for one aging interval (GPU-seconds).
	stepCredit float64

	c *cluster
	// free is each node's allocatable CPU, memory, disk and cores not
	// held by an allocation (stopping ones included); only meaningful
	// in the dimensions the node tracks (see needOn).
	free []amount
	// relLeft: per (workspace, node), what its leaving allocations free
	// that no start has claimed yet (once touched).
	relLeft map[[2]int32]amount
	// big: the most any usable node has in all, per dimension (MaxInt64:
	// a node does not track it).
	big amount
	// feats are the feature sets workspaces need (featureOf), featIDs
	// them by driver and volumes.
	feats        []featureSet
	featIDs      map[string]int32
	featByDriver map[string]int32 // those needing no volume, by driver
	pool         []wsState        // backing store of ws; never grows past its capacity
	ws           []*wsState
	// outs holds every workspace's decision, in ws order (wsState.out
	// points into it); it never grows past its capacity either.
	outs  []WorkspaceDecision
	projs []*projState
	// specSorted: the specs listed their workspaces sorted by Ref, as
	// schema.Set promises, so ws[:len(specs)] is sorted too and find
	// searches it. byRef holds the workspaces find looks up by map: the
	// orphans, and every workspace when the specs were not sorted.
	specSorted bool
	nSpecs     int
	byRef      map[schema.Ref]int32

	// gen changes whenever the cluster or a project's holdings change, so
	// memoized failures are recomputed only when they could differ.
	gen int
	// shapes memoizes failures and wait reasons per shape (numbered by
	// shapeIDs in the order admit first met them).
	shapes   []*shapeMemo
	shapeIDs map[shapeKey]int32
	// lastKey and lastShape: the shape shapeOf returned last (nil: none).
	lastKey    shapeKey
	lastShape  *shapeMemo
	memoGen    int     // changes when a preemption or a freed reservation adds GPUs
	reserved   []int32 // slots held for the head of the queue
	reservedBy int32   // workspace holding the reservation; -1 none
	journal    []undo
	guardMsg   string // set when the starvation guard made the reservation
	decidedWS  []bool // queued workspaces already admitted or told to wait
	// initialMost[m][l]: the most free GPUs any group of model index m
	// at level l had as the decision found them (-1: no group); admitted
	// counts the workspaces started so far.
	initialMost [][numLevels]int
	admitted    int
	dirty       []int // projects whose holdings a preemption changed
	// couldPreempt: the last preemption search saw a workspace it may
	// preempt (for the wait reason).
	couldPreempt bool
	// nReleasing counts the slots whose owner is leaving (releasing).
	nReleasing int

	// avail[m][l][k] counts, per group, the GPUs a preemptor could get:
	// free, releasing, and held by candidates of the k lowest tiers
	// (k = numTiers: of any tier). It bounds the preemption search.
	// Nil until a search first needs level l of model index m (availAt).
	avail    [][numLevels][]*countIndex
	numTiers int
	// rights caches right() per workspace for one search.
	searchID   int32
	rightStamp []int32
	rightVal   []Right
	// Buffers the preemption search reuses.
	bufCands          []cand
	bufCounts, bufIdx []int
	bufSet, bufBest   []int32
}

// shapeKey identifies what a placement attempt depends on besides the
// cluster, the workspace's project and whether it fits in its quota:
// the shape of one replica and the preemptor's rights.
type shapeKey struct {
	gpus, replicas int
	cpu, mem, disk int64 // per replica; zero: not asked for
	cores          int
	feat           int32 // wsState.feat
	mi             int   // model index: one to one with the model asked for
	topo           int   // wsState.topo: one to one with the NVLink and NUMA constraints
	tier           int
	canPreempt     bool
}

// shapeMemo is what a decision remembers of one shape.
type shapeMemo struct {
	// failed[p+1] is the last failure inside project p's quota (p ≥ 0),
	// failed[0] beyond a quota; nil until the first failure.
	failed []failure
	// reason[c] is its wait reason with couldPreempt = (c == 1), valid
	// while d.gen+1 == reasonGen[c] (see waitForCapacity).
	reason    [2]Reason
	reasonGen [2]int
}

// failure records that a shape failed to place at memoGen gen-1 (0:
// never) and whether its search saw a workspace it may preempt.
type failure struct {
	gen   int
	could bool
}

// shapeOf returns the memo of w's shape; mi is w's model index.
func (d *decider) shapeOf(w *wsState, mi int) *shapeMemo {
	key := shapeKey{gpus: w.gpus, replicas: w.replicas, cpu: w.cpu, mem: w.mem, disk: w.disk, cores: w.cores, feat: w.feat, mi: mi, topo: w.topo, tier: w.tier, canPreempt: w.canPreempt}
	// Workspaces of one shape often come one after another in the queue.
	if d.lastShape != nil && key == d.lastKey {
		return d.lastShape
	}
	id, ok := d.shapeIDs[key]
	if !ok {
		id = int32(len(d.shapes))
		d.shapeIDs[key] = id
		d.shapes = append(d.shapes, &shapeMemo{})
	}
	d.lastKey, d.lastShape = key, d.shapes[id]
	return d.lastShape
}

type undo struct {
	slot      int32 // -1: a workspace change; -2: a node's free CPU, memory, disk and cores; -3: relLeft
	owner     int32
	node      int32
	amt       amount
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
// (highest first), then the project's fair share (decayed usage, plus its
// held GPUs at their steady-state usage, per unit of weight) less an aging
// credit (each aging step, at most MaxBoost, forgives one GPU used for one
// aging interval: bounded, and it never crosses a tier or grants a
// preemption), then time queued, then Ref. Within a project, workspaces go by aging boost, then
// time queued: first come, first served.
//
// Each one starts on free GPUs if it can (the placement that leaves the
// least stranded capacity, preferred topology first); else preempts
// (strictly lower tiers; or, inside its quota, other projects' borrowed
// work: see markOverQuota); else waits with a reason. The first gang
// (replicas > 1) that must wait for capacity reserves the best free GPUs
// for itself, so later, smaller ones cannot starve it. A single workspace
// does not: the starvation guard covers one that waits too long, and
// otherwise its reservation would hold free GPUs back from everyone
// behind it. Before the queue runs, the starvation guard gives the
// reservation instead to the longest-waiting workspace whose aging is at
// its maximum and that fits in no free GPUs (highest tier first), gang or
// not: GPUs freed one by one then gather for it instead of going to later
// arrivals, whatever fair share says.
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
	// 2. The queue: every workspace that wants to run and holds nothing;
	// the starvation guard reserves for the longest starved.
	h := d.buildQueue()
	guard := d.starved()
	var starved *schema.Ref
	if guard >= 0 {
		ref := d.ws[guard].ref
		starved = &ref
	}
	// 3. Admit in queue order. The starvation guard's reservation is made
	// just before the first workspace that does not outrank the starved one
	// (in-quota before borrowing, then tier): those ahead of it still see
	// the GPUs free.
	for n := 1; h.Len() > 0; n++ {
		p := d.projs[h.items[0]]
		pos := p.head()
		w := d.ws[p.queue[pos]]
		w.out.Queue = n
		if guard >= 0 && d.boundBy(w, d.ws[guard]) {
			if g := d.ws[guard]; !d.decided(guard) {
				d.guardMsg = d.reserve(guard, g, d.c.modelIndex(g.model), "the longest-starved workspace (aging at its maximum)")
			}
			guard = -1
		}
		d.admit(w)
		p.done[pos] = true
		p.left--
		// Its project and the victims' (they hold fewer GPUs now) have
		// new keys: refresh them all before the heap compares any.
		if p.left > 0 {
			d.refreshKey(h.items[0])
		}
		for _, pi := range d.dirty {
			if d.projs[pi].heapIdx >= 0 && d.projs[pi].left > 0 {
				d.refreshKey(pi)
			}
		}
		if p.left > 0 {
			heap.Fix(h, 0)
		} else {
			heap.Pop(h)
		}
		for _, pi := range d.dirty {
			if d.projs[pi].heapIdx >= 0 {
				heap.Fix(h, d.projs[pi].heapIdx)
			}
		}
		d.dirty = d.dirty[:0]
	}
	if verifyIndexes {
		d.verify()
	}
	// 4. Collect, sorted by Ref: d.outs already is, unless the specs
	// were not sorted or orphans (appended after them) exist.
	out := Decision{Now: in.Now, Workspaces: d.outs}
	if !d.specSorted || len(d.outs) > d.nSpecs {
		sort.Slice(out.Workspaces, func(i, j int) bool { return out.Workspaces[i].Ref.Less(out.Workspaces[j].Ref) })
	}
	out.Starved = starved
	// The records and the cluster are done with (nothing returned
	// points into them).
	d.c.release()
	clear(d.pool)
	buf := d.pool[:0]
	recordPool.Put(&buf)
	return out
}

// recordPool recycles the workspace records (decider.pool) of finished
// decisions, cleared: a decision over thousands of workspaces needs a
// large block of them, and clearing memory just used costs much less
// than clearing fresh memory.
var recordPool sync.Pool // of *[]wsState, zero up to their capacity

func newDecider(in Input) *decider {
	d := &decider{in: in, now: in.Now, shapeIDs: map[shapeKey]int32{}, featIDs: map[string]int32{}, featByDriver: map[string]int32{}, reservedBy: -1}
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
	d.stepCredit = d.policy.Aging.Interval.Seconds()
	d.c = newCluster(snap)
	d.avail = make([][numLevels][]*countIndex, len(d.c.index)) // built by availAt

	// Projects.
	projIdx := map[string]int{}
	var hist state.History
	if in.History != nil {
		hist = *in.History
	}
	usage := decayedUsage(hist, snap, in.Now, hl)
	for i := range specs.Projects {
		p := &specs.Projects[i]
		ps := &projState{spec: p, name: p.Meta.Name, quota: p.Spec.Quota.GPUs, borrow: p.Spec.BorrowLimit.GPUs, weight: p.Spec.FairShare.Weight, heapIdx: -1, leastOver: math.MaxInt}
		if ps.weight <= 0 {
			ps.weight = 1
		}
		if t := specs.Tier(p.Spec.Tier); t != nil {
			ps.tier = t.Spec.Value
			ps.canPreempt, ps.preemptible = t.Spec.CanPreempt, t.Spec.Preemptible
		}
		ps.usage = usage[ps.name]
		projIdx[ps.name] = len(d.projs)
		d.projs = append(d.projs, ps)
	}

	// Workspaces in the specs. Their records and decisions live in two
	// slices, sized for every workspace and orphan, so pointers into them
	// stay valid; the records are filled in place.
	nw := len(specs.Workspaces)
	if buf, _ := recordPool.Get().(*[]wsState); buf != nil && cap(*buf) >= nw+len(snap.Allocs) {
		d.pool = (*buf)[:nw]
	} else {
		d.pool = make([]wsState, nw, nw+len(snap.Allocs))
	}
	d.outs = make([]WorkspaceDecision, nw, nw+len(snap.Allocs))
	d.ws = make([]*wsState, nw, nw+len(snap.Allocs))
	d.nSpecs, d.specSorted = nw, true
	// Placement levels and topology numbers, by the topology a spec
	// asks for; the levels are shared, read-only.
	type topoInfo struct {
		levels []int
		id     int
	}
	topos := map[schema.Topology]topoInfo{}
	topoIDs := map[schema.Topology]int{} // by the constraints with defaults filled in
	var lastTopo schema.Topology
	var lastInfo topoInfo
	lastProj, pi := "", -1
	for i := range specs.Workspaces {
		sw := &specs.Workspaces[i]
		w := &d.pool[i]
		d.ws[i] = w
		w.idx = int32(i)
		w.ref = sw.Ref()
		w.spec = sw
		w.stopped = sw.Spec.State == schema.DesiredStopped
		w.gpus, w.replicas = sw.Spec.Resources.GPUs, max(sw.Spec.Replicas, 1)
		w.model = sw.Spec.Resources.GPUModel
		res := &sw.Spec.Resources
		w.cpu, w.mem, w.disk, w.cores = res.CPUMilli, res.MemoryBytes, res.DiskBytes, res.ExclusiveCores
		w.feat = d.featureOf(specs, sw)
		w.out = &d.outs[i]
		w.out.Ref = w.ref
		if i > 0 && !d.ws[i-1].ref.Less(w.ref) {
			d.specSorted = false
		}
		// Sorted specs list a project's workspaces together: one lookup
		// per project.
		if i == 0 || w.ref.Project != lastProj {
			lastProj, pi = w.ref.Project, -1
			if p, ok := projIdx[lastProj]; ok {
				pi = p
			}
		}
		w.proj = pi
		if pi >= 0 {
			p := d.projs[pi]
			w.tier = p.tier
			w.tierName = p.spec.Spec.Tier
			w.canPreempt = p.canPreempt
			w.preemptible = p.preemptible && sw.Spec.Preemptible
		}
		if topo := sw.Spec.Topology; i == 0 || topo != lastTopo {
			ti, ok := topos[topo]
			if !ok {
				def := d.policy.Defaults.Topology
				eff := schema.Topology{NVLink: cmp.Or(topo.NVLink, def.NVLink), NUMA: cmp.Or(topo.NUMA, def.NUMA)}
				id, ok := topoIDs[eff]
				if !ok {
					id = len(topoIDs)
					topoIDs[eff] = id
				}
				ti = topoInfo{levels(topo, def), id}
				topos[topo] = ti
			}
			lastTopo, lastInfo = topo, ti
		}
		w.levels, w.topo = lastInfo.levels, lastInfo.id
	}
	if !d.specSorted {
		d.byRef = make(map[schema.Ref]int32, nw)
		for i, w := range d.ws {
			d.byRef[w.ref] = int32(i)
		}
	}

	// Allocations: attach to their workspace (or an orphan for refs the
	// specs no longer list), mark their GPUs held and take their CPU and
	// memory off their node's. A workspace's allocations usually come
	// together (Snapshot.Allocs is sorted by workspace): one lookup for
	// them all, walking the sorted specs alongside (findFrom).
	d.free = make([]amount, len(snap.Nodes))
	for ni := range snap.Nodes {
		d.free[ni] = nodeAmount(&snap.Nodes[ni])
	}
	heldSlots := make([]int32, 0, len(d.c.slots))
	heldBy := make([]int32, 0, len(d.c.slots))
	wi := int32(-1)
	walk := 0 // findFrom's place in the specs
	ni, lastNode := -1, ""
	// A workspace's allocations are cut from one array of them all, in
	// snapshot order, while they come together; a workspace whose
	// allocations come back later (unsorted Allocs) appends to a copy.
	allocs := make([]*state.Alloc, 0, len(snap.Allocs))
	runStart, fresh := 0, false
	for ai := range snap.Allocs {
		a := &snap.Allocs[ai]
		newRun := ai == 0 || a.Workspace != snap.Allocs[ai-1].Workspace
		if newRun {
			wi = d.findFrom(&walk, a.Workspace)
		}
		if wi < 0 {
			wi = d.addOrphan(a.Workspace, projIdx)
		}
		w := d.ws[wi]
		allocs = append(allocs, a)
		if newRun {
			runStart, fresh = len(allocs)-1, len(w.allocs) == 0
		}
		if fresh {
			w.allocs = allocs[runStart:len(allocs):len(allocs)]
		} else {
			w.allocs = append(w.allocs, a)
		}
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
		if ai == 0 || a.Node != lastNode {
			ni, lastNode = d.c.nodeIndex(a.Node), a.Node
		}
		if ni < 0 {
			continue
		}
		f := &d.free[ni]
		f.cpu, f.mem, f.disk, f.cores = f.cpu-a.CPUMilli, f.mem-a.MemoryBytes, f.disk-a.DiskBytes, f.cores-int64(a.Cores)
		// An allocation usually lists its GPUs in the node's order: try
		// the slot after the last one found before searching the node.
		next := int32(-1)
		for _, id := range a.GPUs {
			si := next
			if si < 0 || si >= d.c.first[ni+1] || d.c.slots[si].id != id {
				si = d.c.slot(ni, id)
			}
			if si >= 0 {
				heldSlots = append(heldSlots, si)
				heldBy = append(heldBy, wi)
				next = si + 1
			}
		}
	}
	d.c.hold(heldSlots, heldBy)
	d.relLeft = map[[2]int32]amount{}
	for _, n := range snap.Nodes {
		if !n.Ready || !n.Eligible {
			continue
		}
		a := nodeAmount(&n)
		for _, v := range []*int64{&a.cpu, &a.mem, &a.disk} {
			if *v == 0 {
				*v = math.MaxInt64
			}
		}
		if n.CPUPerCore == 0 {
			a.cores = math.MaxInt64
		}
		d.big = amount{max(d.big.cpu, a.cpu), max(d.big.mem, a.mem), max(d.big.disk, a.disk), max(d.big.cores, a.cores)}
	}
	// A workspace with allocations holds its place, GPUs or not: it runs
	// or leaves, and never queues for a second start.
	for wi, w := range d.ws {
		if len(w.allocs) == 0 {
			continue
		}
		w.leaving = w.stopping || w.spec == nil || w.stopped
		w.running = !w.leaving
		if w.leaving {
			d.markReleasing(int32(wi))
		}
	}

	// Waiting and aging, for the workspaces that will queue (buildQueue's
	// test): nothing else reads either, but for the quota accounting
	// below, which looks up the QueuedSince a running workspace was
	// admitted with (RecordDecision) only where it breaks a tie.
	ag := d.policy.Aging
	queuedSince := func(w *wsState) {
		w.queuedSince = in.Now
		if t, ok := hist.QueuedSince[w.ref]; ok && t.Before(in.Now) {
			w.queuedSince = t
		}
	}
	for _, w := range d.ws {
		if w.spec == nil || w.stopped || len(w.allocs) > 0 {
			continue
		}
		queuedSince(w)
		if ag.Interval > 0 && ag.Step > 0 {
			steps := int64(in.Now.Sub(w.queuedSince) / ag.Interval)
			w.boost = int(min(steps*int64(ag.Step), int64(max(ag.MaxBoost, 0))))
		}
	}
	// Preemption records and quota labels, walking whichever side is
	// smaller: the record's workspace, or each workspace's record.
	if len(hist.Preempted) < len(d.ws) {
		for ref, p := range hist.Preempted {
			if wi := d.find(ref); wi >= 0 {
				d.ws[wi].preempted = &state.Preemption{}
				*d.ws[wi].preempted = p
			}
		}
	} else {
		for _, w := range d.ws {
			if p, ok := hist.Preempted[w.ref]; ok {
				w.preempted = &state.Preemption{}
				*w.preempted = p
			}
		}
	}
	setAdmitted := func(w *wsState, borrowing bool) {
		if !w.running {
			return
		}
		w.admitted = admittedInQuota
		if borrowing {
			w.admitted = admittedBorrowing
		}
	}
	if len(hist.Borrowing) < len(d.ws) {
		for ref, b := range hist.Borrowing {
			if wi := d.find(ref); wi >= 0 {
				setAdmitted(d.ws[wi], b)
			}
		}
	} else {
		for _, w := range d.ws {
			if b, ok := hist.Borrowing[w.ref]; ok {
				setAdmitted(w, b)
			}
		}
	}

	// Quota accounting: what stays counts against its project.
	byProj := make([][]*wsState, len(d.projs))
	for _, w := range d.ws {
		if w.running && w.proj >= 0 {
			byProj[w.proj] = append(byProj[w.proj], w)
		}
	}
	for pi, ws := range byProj {
		d.projs[pi].held = markOverQuota(ws, d.projs[pi].quota, queuedSince)
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
		if w.candidate {
			p := d.projs[w.proj]
			p.candidates = true
			if w.overQuota {
				p.leastOver = min(p.leastOver, w.held)
			}
		}
	}
	d.rightStamp = make([]int32, len(d.ws))
	d.decidedWS = make([]bool, len(d.ws))
	d.rightVal = make([]Right, len(d.ws))
	// What was free before anyone was admitted, for "queue" reasons.
	d.initialMost = make([][numLevels]int, len(d.c.index))
	for m := range d.c.index {
		for l := range numLevels {
			li := d.c.index[m][l]
			d.initialMost[m][l] = -1
			if gi := li.most(); gi >= 0 {
				d.initialMost[m][l] = li.groups[gi].free
			}
		}
	}
	return d
}

// admission is how a running workspace was admitted against its
// project's quota, as History.Borrowing recorded it.
type admission int8

const (
	admittedUnknown   admission = iota // no record: derived from start order
	admittedInQuota                    // inside the quota
	admittedBorrowing                  // beyond it
)

// markOverQuota sets overQuota on a project's running workspaces and
// returns the GPUs they hold. queued, if not nil, sets a workspace's
// queuedSince; it is called only for workspaces that started at the same
// time as another (nil: every queuedSince is set already).
//
// The label was decided when each was admitted, and History.Borrowing
// remembers it: a workspace admitted inside the quota stays inside it
// while it runs, whatever its project starts after it and whatever older
// work leaves. Recorded in-quota work is counted first (in start order;
// only a quota lowered below it leaves some beyond). A recorded borrower
// moves inside the quota (and RecordDecision keeps that) when it fits in
// what both the in-quota work and the rule below leave: promotion only
// takes a right to preempt it away, never gives one.
//
// Workspaces with no record (an older history, an allocation berth did
// not start) are labelled as their admission would have been, from start
// order: those started after the project's holdings passed its quota are
// beyond it. Workspaces started together (one decision's starts) are told
// apart as that decision admitted them: in queue order (time queued, then
// Ref), the first that fit in what the quota had left went in as in-quota
// work, the rest borrowed. Re-deriving alone is not enough: once older
// work leaves, two started together may swap labels (the reclaimer
// becoming borrowed work that its victim takes back, scenario 58).
func markOverQuota(ws []*wsState, quota int, queued func(*wsState)) int {
	total := 0
	for _, w := range ws {
		total += w.held
	}
	if total <= quota {
		// Whatever the order, each workspace fits in what those before
		// it left of the quota (both loops below): none is beyond it.
		for _, w := range ws {
			w.overQuota = false
		}
		return total
	}
	// Start order (time queued, then Ref, among those started together):
	// by start time, then each run of equal start times by the rest.
	slices.SortFunc(ws, func(a, b *wsState) int { return a.startedAt.Compare(b.startedAt) })
	for i := 0; i < len(ws); {
		j := i + 1
		for j < len(ws) && ws[j].startedAt.Equal(ws[i].startedAt) {
			j++
		}
		if j-i > 1 {
			if queued != nil {
				for _, w := range ws[i:j] {
					queued(w)
				}
			}
			slices.SortFunc(ws[i:j], func(a, b *wsState) int {
				if c := a.queuedSince.Compare(b.queuedSince); c != 0 {
					return c
				}
				return compareRefs(a.ref, b.ref)
			})
		}
		i = j
	}
	// inRoom: what the quota has left beside the work counted inside it.
	inRoom := quota
	for _, w := range ws {
		if w.admitted == admittedInQuota {
			w.overQuota = w.held > inRoom
			if !w.overQuota {
				inRoom -= w.held
			}
		}
	}
	held := 0
	for i := 0; i < len(ws); {
		j := i
		room := quota - held
		for ; j < len(ws) && ws[j].startedAt.Equal(ws[i].startedAt); j++ {
			w := ws[j]
			if w.admitted != admittedInQuota {
				w.overQuota = w.held > room || w.held > inRoom
				if !w.overQuota {
					inRoom -= w.held
				}
			}
			if !w.overQuota {
				room -= w.held
			}
			held += w.held
		}
		i = j
	}
	return held
}

// boundBy reports whether w comes no earlier in the queue's classes than
// g: w borrows while g fits in its quota, or both are alike and w's tier
// is not higher.
func (d *decider) boundBy(w, g *wsState) bool {
	wq, gq := d.inQuota(d.projs[w.proj], w), d.inQuota(d.projs[g.proj], g)
	if wq != gq {
		return gq
	}
	return w.tier <= g.tier
}

// nodeIndex finds a node by name in nodes (sorted by name), or -1.
func nodeIndex(nodes []state.Node, name string) int {
	i := sort.Search(len(nodes), func(i int) bool { return nodes[i].Name >= name })
	if i < len(nodes) && nodes[i].Name == name {
		return i
	}
	return -1
}

// addOrphan adds a record for a workspace that holds GPUs but is not in
// the specs, and returns its index.
func (d *decider) addOrphan(ref schema.Ref, projIdx map[string]int) int32 {
	wi := int32(len(d.ws))
	d.pool = append(d.pool, wsState{idx: wi, ref: ref, proj: -1})
	d.outs = append(d.outs, WorkspaceDecision{Ref: ref})
	w := &d.pool[wi]
	w.out = &d.outs[wi]
	if pi, ok := projIdx[ref.Project]; ok {
		w.proj = pi
	}
	d.ws = append(d.ws, w)
	if d.byRef == nil {
		d.byRef = map[schema.Ref]int32{}
	}
	d.byRef[ref] = wi
	return wi
}

// compareRefs orders refs as Ref.Less does.
func compareRefs(a, b schema.Ref) int {
	if c := strings.Compare(a.Project, b.Project); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// find returns the index of the workspace with ref, or -1.
func (d *decider) find(ref schema.Ref) int32 {
	if d.specSorted {
		specs := d.ws[:d.nSpecs]
		i, ok := slices.BinarySearchFunc(specs, ref, func(w *wsState, ref schema.Ref) int {
			return compareRefs(w.ref, ref)
		})
		if ok {
			return int32(i)
		}
	}
	if wi, ok := d.byRef[ref]; ok {
		return wi
	}
	return -1
}

// findFrom is find for refs looked up in ascending order: the walk goes
// on through the sorted specs from *walk, where the last lookup left it,
// so looking up refs in order costs one pass over the specs in all. A ref
// not after the last one passed (out of order) falls back to find, as do
// unsorted specs.
func (d *decider) findFrom(walk *int, ref schema.Ref) int32 {
	i := *walk
	if !d.specSorted || (i > 0 && compareRefs(d.ws[i-1].ref, ref) >= 0) {
		return d.find(ref)
	}
	// Every spec before i is before ref: it is at i or later, or nowhere.
	for ; i < d.nSpecs; i++ {
		if c := compareRefs(d.ws[i].ref, ref); c >= 0 {
			if c == 0 {
				*walk = i + 1
				return int32(i)
			}
			break
		}
	}
	*walk = i
	if wi, ok := d.byRef[ref]; ok {
		return wi
	}
	return -1
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
	// The slot's models of which a search built some avail index.
	var built [2]bool
	for gk, m := range [2]int32{0, s.mi} {
		for l := range numLevels {
			built[gk] = built[gk] || d.avail[m][l] != nil
		}
	}
	var before uint64
	if built[0] || built[1] {
		before = d.contrib(si)
	}
	if s.owner >= 0 && s.releasing {
		d.nReleasing--
	}
	d.c.setOwner(si, owner)
	s.releasing = releasing
	if owner >= 0 && releasing {
		d.nReleasing++
	}
	if !built[0] && !built[1] {
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
			if !built[gk] {
				continue
			}
			for l := range numLevels {
				if d.avail[m][l] != nil {
					d.avail[m][l][k].add(int(s.groups[gk][l]), delta)
				}
			}
		}
	}
}

// availAt returns the avail indexes of model index m at level l,
// building them from the cluster as it is now the first time a search
// asks: until then nothing reads them, and from then on changeSlot keeps
// them current, so they are what building them all up front and keeping
// them current would have made (verify checks it against a recount).
func (d *decider) availAt(m, l int) []*countIndex {
	if d.avail[m][l] == nil {
		d.buildAvail(m, []int{l})
	}
	return d.avail[m][l]
}

// buildAvail builds the avail indexes of model index m at those of
// levels not built yet, reading each slot's contrib once for them all.
// Built earlier than availAt would have, they are the same: see there.
func (d *decider) buildAvail(m int, levels []int) {
	missing := false
	for _, l := range levels {
		missing = missing || d.avail[m][l] == nil
	}
	if !missing {
		return
	}
	// A slot's contrib is a suffix of the tiers: it counts for every k
	// from its threshold on (numTiers+1 and beyond: none). Each group's
	// count for k is the number of its slots with a threshold ≤ k.
	n := d.numTiers + 1
	thr := make([]uint8, len(d.c.slots))
	for si := range d.c.slots {
		thr[si] = uint8(bits.TrailingZeros64(d.contrib(int32(si)))) // ≤ 64
	}
	for _, l := range levels {
		if d.avail[m][l] != nil {
			continue
		}
		li := d.c.index[m][l]
		vals := make([]int, len(li.groups)*n)
		for gi := range li.groups {
			row := vals[gi*n : (gi+1)*n]
			for _, si := range li.groups[gi].gpus {
				if t := int(thr[si]); t < n {
					row[t]++
				}
			}
			for k := 1; k < n; k++ {
				row[k] += row[k-1]
			}
		}
		d.avail[m][l] = make([]*countIndex, n)
		for k := range n {
			d.avail[m][l][k] = newCountIndex(li.groups, func(gi int) int { return vals[gi*n+k] })
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
	// Every holder's placements, cut from arrays sized for them all.
	var buf placementBuf
	allocs, gpus := 0, 0
	for _, w := range d.ws {
		allocs += len(w.allocs)
		gpus += w.held // every GPU its allocations list
	}
	buf.pls = make([]state.Placement, 0, allocs)
	buf.gpus = make([]string, 0, gpus)
	for _, w := range d.ws {
		switch {
		case w.spec == nil:
			w.out.Verdict = VerdictStop
			w.out.Placements = buf.placementsOf(w.allocs)
			w.out.Reason = Reason{ReasonStopped, "removed: the specs no longer list it"}
		case w.stopped:
			w.out.Verdict = VerdictStop
			w.out.Placements = buf.placementsOf(w.allocs)
			w.out.Reason = Reason{ReasonStopped, "stopped: its desired state is Stopped"}
		case w.stopping:
			w.out.Verdict = VerdictPreempt
			w.out.Placements = buf.placementsOf(w.allocs)
			if w.preempted != nil {
				by := w.preempted.By
				w.out.PreemptedBy = &by
				w.out.Reason = Reason{ReasonPreempted, fmt.Sprintf("preempted by %s at %s; stopping", by, stamp(w.preempted.At))}
			} else {
				w.out.Reason = Reason{ReasonPreempted, "stopping; it queues again once its GPUs are free"}
			}
		case w.running:
			w.out.Verdict = VerdictRun
			w.out.Placements = buf.placementsOf(w.allocs)
			w.out.Borrowed = w.overQuota
		}
	}
}

// PlacementsOf turns allocations into placements, sorted by replica, with
// each placement's GPUs sorted; it copies and never mutates allocs. Nil
// for no allocations.
func PlacementsOf(allocs []*state.Alloc) []state.Placement {
	var b placementBuf
	return b.placementsOf(allocs)
}

// placementBuf carves the placements of many workspaces, and their GPU
// lists, out of two shared arrays: one allocation each instead of one
// per workspace and one per placement. Each slice cut from them is
// capped at its length, so appending to one never reaches another.
type placementBuf struct {
	pls  []state.Placement
	gpus []string
}

func (b *placementBuf) placementsOf(allocs []*state.Alloc) []state.Placement {
	if len(allocs) == 0 {
		return nil
	}
	if cap(b.pls)-len(b.pls) < len(allocs) {
		b.pls = make([]state.Placement, 0, max(len(allocs), 64))
	}
	start := len(b.pls)
	for _, a := range allocs {
		var gpus []string // nil for none, as append([]string(nil)) gives
		if len(a.GPUs) > 0 {
			if cap(b.gpus)-len(b.gpus) < len(a.GPUs) {
				b.gpus = make([]string, 0, max(len(a.GPUs), 256))
			}
			n := len(b.gpus)
			b.gpus = append(b.gpus, a.GPUs...)
			gpus = b.gpus[n:len(b.gpus):len(b.gpus)]
			if !slices.IsSorted(gpus) {
				slices.Sort(gpus)
			}
		}
		b.pls = append(b.pls, state.Placement{Replica: a.Replica, Node: a.Node, GPUs: gpus})
	}
	out := b.pls[start:len(b.pls):len(b.pls)]
	if len(out) > 1 {
		sort.Slice(out, func(i, j int) bool { return out[i].Replica < out[j].Replica })
	}
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

// refreshKey recomputes project pi's queue key. The key reads only the
// project's own state (holdings, usage, decided positions), so Decide
// refreshes the projects whose state changed before the heap compares
// anything: the key then is what computing it at each comparison gave.
func (d *decider) refreshKey(pi int) {
	p := d.projs[pi]
	w := d.ws[p.queue[p.head()]]
	p.key = queueKey{w: w, inQuota: d.inQuota(p, w), share: d.share(p) - float64(w.boost)*d.stepCredit}
}

// before reports whether project a's head comes before project b's, by
// their keys.
func (d *decider) before(a, b int) bool {
	ka, kb := &d.projs[a].key, &d.projs[b].key
	wa, wb := ka.w, kb.w
	if ka.inQuota != kb.inQuota {
		return ka.inQuota
	}
	if wa.tier != wb.tier {
		return wa.tier > wb.tier
	}
	if ka.share != kb.share {
		return ka.share < kb.share
	}
	if !wa.queuedSince.Equal(wb.queuedSince) {
		return wa.queuedSince.Before(wb.queuedSince)
	}
	return wa.ref.Less(wb.ref)
}

func (d *decider) buildQueue() *projHeap {
	h := &projHeap{d: d}
	queued := func(w *wsState) bool { return w.spec != nil && !w.stopped && len(w.allocs) == 0 && w.proj >= 0 }
	// Each project's queue, done flags and need buckets are cut from
	// arrays sized for every queued workspace.
	counts := make([]int, len(d.projs))
	total := 0
	for _, w := range d.ws {
		if w.spec != nil && !w.stopped && len(w.allocs) == 0 && w.proj < 0 {
			w.out.Verdict = VerdictWait
			w.out.Reason = Reason{ReasonQuota, fmt.Sprintf("quota: project %s does not exist", w.ref.Project)}
		}
		if queued(w) {
			counts[w.proj]++
			total++
		}
	}
	queues, done, positions := make([]int32, total), make([]bool, total), make([]int, total)
	bucketOf := make([]int32, total) // by queue position, its need bucket
	off := 0
	for pi, p := range d.projs {
		p.queue = queues[off : off : off+counts[pi]]
		off += counts[pi]
	}
	for wi, w := range d.ws {
		if queued(w) {
			p := d.projs[w.proj]
			p.queue = append(p.queue, int32(wi))
		}
	}
	off = 0
	for pi, p := range d.projs {
		if len(p.queue) == 0 {
			continue
		}
		// Refs are unique: no ties, so any sort gives this order.
		slices.SortFunc(p.queue, func(i, j int32) int {
			a, b := d.ws[i], d.ws[j]
			if a.boost != b.boost {
				return cmp.Compare(b.boost, a.boost)
			}
			if c := a.queuedSince.Compare(b.queuedSince); c != 0 {
				return c
			}
			return compareRefs(a.ref, b.ref)
		})
		n := len(p.queue)
		p.done = done[off : off+n : off+n]
		p.left = n
		// A project's queue asks for a few distinct needs: its buckets
		// are found by a scan, counted, then filled in queue order.
		bof := bucketOf[off : off+n]
		for pos, wi := range p.queue {
			w := d.ws[wi]
			need := w.gpus * w.replicas
			bi := 0
			for bi < len(p.needs) && p.needs[bi].need != need {
				bi++
			}
			if bi == len(p.needs) {
				p.needs = append(p.needs, needBucket{need: need})
			}
			p.needs[bi].cur++ // counts for now
			bof[pos] = int32(bi)
		}
		at := off
		for bi := range p.needs {
			b := &p.needs[bi]
			b.pos = positions[at : at : at+b.cur]
			at += b.cur
			b.cur = 0
		}
		for pos := range p.queue {
			b := &p.needs[bof[pos]]
			b.pos = append(b.pos, pos)
		}
		off += n
		slices.SortFunc(p.needs, func(a, b needBucket) int { return cmp.Compare(a.need, b.need) })
		h.items = append(h.items, pi)
		p.heapIdx = len(h.items) - 1
		d.refreshKey(pi)
	}
	heap.Init(h)
	return h
}

// verifyIndexes makes Decide check, at its end, that its incremental
// indexes match a recount; the property tests turn it on.
var verifyIndexes = false

func (d *decider) verify() {
	for m := range d.c.index {
		for l := range numLevels {
			li := d.c.index[m][l]
			for gi, g := range li.groups {
				free := 0
				for _, si := range g.gpus {
					if d.c.slots[si].owner == ownerFree {
						free++
					}
				}
				if free != g.free || li.first(free) < 0 {
					panic(fmt.Sprintf("free index of group %d (model %d, level %d): %d, recount %d", gi, m, l, g.free, free))
				}
				for k := 0; k <= d.numTiers && d.avail[m][l] != nil; k++ {
					n := 0
					for _, si := range g.gpus {
						if d.contrib(si)&(1<<k) != 0 {
							n++
						}
					}
					if got := int(d.avail[m][l][k].count[gi]); got != n {
						panic(fmt.Sprintf("avail[%d][%d][%d] of group %d: %d, recount %d", m, l, k, gi, got, n))
					}
				}
			}
		}
	}
}
