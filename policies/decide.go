package policies

// Decide and the records it works on: the phases in order (doc.go maps
// them), each in a file of its own.
//
// Scenarios: testdata/walkthrough/ (the seed walk-through, end to end,
// in order); each rule's own in the folder named after its file.

import (
	"container/heap"
	"slices"
	"sort"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
)

// wsState is Decide's working record of one workspace: in the specs, or
// holding GPUs without being in them.
type wsState struct {
	idx  int32 // index in decider.ws
	ref  schema.Ref
	spec *schema.Workspace // nil: not in the specs
	// proj indexes decider.projs: its project's quota account for its
	// kind (decider.account); -1: unknown project.
	proj int

	tier        int
	tierName    string
	canPreempt  bool
	preemptible bool // tier and workspace both allow it
	// cohortBelow: its tier's borrowWithinCohort threshold, the value of
	// the tier it names (0: off): it may take other teams' in-quota work
	// of tiers below that and its own, and what it runs is reclaimed only
	// by strictly higher tiers.
	cohortBelow int
	// ordering: its tier's attained-service ordering (service.go).
	ordering schema.Ordering

	gpus, replicas int
	// cpu (MHz shares), mem, disk and exclusive cores per replica; zero:
	// not asked for.
	cpu, mem, disk int64
	cores          int
	// feat is its index in decider.feats: the driver and host volumes it
	// needs of a node (-1: nothing a node could lack).
	feat  int32
	model string
	// kind is the declared kind (GPUKind) its GPUs must be of; empty:
	// any whole GPU, or model's. kinds, for a workspace that asks for
	// several in order of preference, lists them: kind is then the one it
	// runs on, the one admission chose (chooseKind), or its first.
	kind   string
	kinds  []string
	levels []int // placement levels, preferred first
	// topo numbers the workspace's NVLink and NUMA constraints (defaults
	// filled in): equal constraints, equal numbers.
	topo int

	stopped bool // the specs want it stopped (DesiredStopped), or a limit stops it (end)
	// end, when not nil, is why a limit stops it (limits.go): its time
	// limit, or its GPUs idle; idleNote why its idle GPUs are reported.
	end      *Reason
	idleNote string

	allocs   []*drivers.Alloc
	held     int     // GPUs its allocations hold
	heldW    float64 // those GPUs in GPU-equivalents, for fair share
	stopping bool    // an allocation is stopping
	leaving  bool    // holds GPUs it will give up: stopping, stopped, removed or moved
	// moved: it runs on a node its placement no longer allows (the spec
	// changed): it stops, and queues again to start where it may.
	moved bool
	// fault, when not empty, says which node or GPU it holds failed
	// (faultOf): it moves, keeping its place in the queue.
	fault string
	// avoid is the index + 1 of the node that ended its last run by the
	// node's fault (0: none): it starts elsewhere where it fits.
	avoid   int32
	running bool // has allocations (GPUs or not) and stays unless preempted
	// rheld is what its allocations count against its project's CPU and
	// memory quota (quotaPerReplica each).
	rheld quotaRes

	startedAt time.Time // latest start over its allocations
	workLost  float64   // GPU-seconds since the last checkpoint
	overQuota bool      // admitted beyond its project's quota (markOverQuota)
	// admitted is its quota label as recorded in History.Borrowing.
	admitted admission

	queuedSince time.Time
	boost       int
	// overdue: it has waited the policy's wait bound (Aging.MaxWait).
	overdue bool
	// startedOverdue: it runs, and started Aging.MaxWait or longer after
	// it first queued: no workspace of its tier or lower preempts it.
	startedOverdue bool
	preempted      *drivers.Preemption // last preemption (history), if waiting to resume
	// served is its attained service in GPU-hours, band its queue by the
	// policy's Service steps (0: the least served, or promoted: it has
	// waited long enough); yields: it may be preempted for ordering
	// (service.go). Set for queued workspaces and candidates only.
	served float64
	band   int
	yields bool

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
	// kind names the kind of the quota account this record is (its
	// quota: the project's quota.kinds[kind]); empty: the project's own
	// record, counting quota.gpus, with the indexes of its kind accounts
	// in accounts (nil: its quota names no kind).
	kind     string
	accounts map[string]int
	// root indexes the project's own record (itself, for that record).
	root int
	tier int // the tier of its workspaces that name none
	// canPreempt, preemptible: its tier's flags (false: no such tier);
	// cohortBelow its tier's borrowWithinCohort threshold (0: off).
	canPreempt, preemptible bool
	cohortBelow             int
	ordering                schema.Ordering
	quota                   int
	borrow                  int // < 0: unlimited
	weight                  float64
	held                    int     // GPUs counted against its quota now (changes as the decision goes)
	heldW                   float64 // those GPUs in GPU-equivalents (cluster.weights), for fair share
	usage                   float64 // decayed GPU-seconds at Now
	// rquota: the CPU and memory its quota names (zero: not named, not
	// limited); rborrow: how far beyond them it may borrow (< 0:
	// unlimited); rheld: the CPU and memory counted against rquota now
	// (changes with held).
	rquota, rborrow, rheld quotaRes
	// candidates: some workspace of it was a preemption candidate as the
	// decision began; leastOver: the fewest GPUs such a candidate beyond
	// the quota held (MaxInt: none); minTier: the lowest tier among
	// its candidates (MaxInt: none). None changes as the decision goes:
	// they bound who may be preempted (mayPreemptAny).
	candidates bool
	leastOver  int
	minTier    int
	// leastHeld: the fewest GPUs (above zero) any of its candidates held
	// (MaxInt: none); reclaim may take any of them while the project
	// stays at or above its quota.
	leastHeld int
	// maxBand: the latest Service queue among its candidates that may
	// yield (0: none past the first step).
	maxBand int

	queue   []int32 // pending workspaces, in the project's queue order
	done    []bool  // by queue position: decided
	left    int     // positions not decided yet
	next    int     // first position that may not be decided
	needs   []needBucket
	heapIdx int
	// key is its head's place in the queue, as refreshKey last found it.
	key queueKey
}

// decider holds one Decide call's working state. Nothing in it is shared
// with the input: the input is only read.
type decider struct {
	in Input
	// bufs: the arrays it works in, lent (Scratch.decider).
	bufs   *deciderBufs
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
	// guardOverdue: the guard's pick is overdue (past Aging.MaxWait), so
	// its reservation binds what overdueBinds says: borrowers and its own
	// team's work, of its tier and lower.
	guardOverdue bool
	guardIdx     int32 // the guard's pick once it reserved; -1 none
	// overduePick: the guard's pick when it is overdue, whether or not
	// its reservation holds anything; -1 none (overdueHolds).
	overduePick int32
	decidedWS   []bool // queued workspaces already admitted or told to wait
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
	// quotasFit: the projects' quotas add up to no more GPUs than the
	// cluster has, so every one can hold at once (see right).
	quotasFit bool
	// rights caches right() per workspace for one search.
	searchID   int32
	rightStamp []int32
	rightVal   []Right
	// Buffers the preemption search reuses.
	bufCands          []cand
	bufCounts, bufIdx []int
	bufSet, bufBest   []int32
}

// Decide computes who runs where, who is preempted by whom and why
// everyone else waits. It is a pure function of its input: it reads no
// clock, does no I/O and never mutates in, so deciding again on the same
// input gives the same decision. Its Workspaces are sorted by Ref: one
// per workspace in the specs and one per workspace holding allocations
// that the specs no longer list; every one that waits has a reason. A
// preemptor whose victims are still stopping gets VerdictStart with
// those victims in Preempts (they keep VerdictPreempt), so deciding again
// while they stop gives the same decision.
//
// The rules it applies (the queue order, quotas and borrowing, the
// starvation guard and wait bound, admission, preemption, placement) are
// in DESIGN.md, "The decision's rules"; the steps below are its phases.
func Decide(in Input) Decision {
	d := newDecider(in)
	// 1. Verdicts that need no capacity: stop, keep running, keep stopping.
	d.settleHolders()
	// 2. The queue: every workspace that wants to run and holds nothing;
	// the starvation guard reserves for the longest starved.
	h := d.buildQueue()
	guard := d.starved()
	if d.guardOverdue {
		d.overduePick = guard
	}
	var starved *schema.Ref
	released := false // GuardReleased
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
		pos := d.head(p)
		w := d.ws[p.queue[pos]]
		w.out.Queue = n
		if guard >= 0 && d.boundBy(w, d.ws[guard]) {
			if g := d.ws[guard]; !d.decided(guard) {
				d.guardMsg = d.reserve(guard, g, d.modelIndexOf(g), d.guardAs())
				if d.guardMsg != "" {
					d.guardIdx = guard
				}
			}
			guard = -1
		}
		switch {
		case d.passes(w):
			held := d.liftGuard()
			d.admit(w)
			d.restoreGuard(held)
		case w.idx == d.guardIdx && d.reservedBy == w.idx:
			held := slices.Clone(d.reserved)
			d.admit(w)
			released = released || slices.ContainsFunc(held, func(si int32) bool { return d.c.slots[si].owner == ownerFree })
		default:
			d.admit(w)
		}
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
	out.GuardReleased = released
	// The arrays and the cluster are done with (nothing returned
	// points into them).
	d.c.release()
	in.Scratch.putBufs(d.bufs)
	return out
}
