package policies

// Machinery: the decider's records, built once per decision from the
// specs, the snapshot and the history (workspaces, projects, orphans,
// held GPUs, queue times, quota labels, preemption candidates), and
// lookups by Ref. Serves every rule.

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
)

// newDecider builds a decision's records from its input, step by step:
// each step reads what the ones before it filled in.
func newDecider(in Input) *decider {
	d := &decider{in: in, now: in.Now, shapeIDs: map[shapeKey]int32{}, featIDs: map[string]int32{}, featByDriver: map[string]int32{}, reservedBy: -1, guardIdx: -1, overduePick: -1}
	in.Scratch.begin()
	d.bufs = in.Scratch.decider()
	specs := in.Specs
	if specs == nil {
		specs = &schema.Set{Policy: schema.DefaultPolicy()}
	}
	d.policy = specs.Policy.Spec
	snap := in.Snapshot
	if snap == nil {
		snap = &drivers.Snapshot{}
	}
	var hist drivers.History
	if in.History != nil {
		hist = *in.History
	}
	d.setRates()
	d.c = newCluster(snap, specs.Kinds)
	d.avail = make([][numLevels][]*countIndex, len(d.c.index)) // built by availAt

	projIdx := map[string]int{}
	var weigh func(*drivers.Alloc) float64 // GPU-equivalents, where a GPU is not one
	if !d.c.unitWeights {
		weigh = func(a *drivers.Alloc) float64 { return d.c.weightOf(snap.ModelOf(a), len(a.GPUs)) }
	}
	d.addProjects(specs, decayedUsage(hist, snap, in.Now, d.policy.FairShare.HalfLife, weigh), projIdx)
	d.addWorkspaces(specs, len(snap.Allocs), projIdx)
	d.attachAllocs(snap, projIdx)
	d.applyLimits(specs, &hist)
	d.heldKinds(specs, snap)
	d.measureNodes(snap)
	d.settleAllocated()
	d.avoidFaultyNodes(snap)
	queuedSince := func(w *wsState) { d.setQueuedSince(w, &hist) }
	d.ageQueued(queuedSince)
	d.readLabels(&hist)
	d.countQuotas(snap, queuedSince)
	d.markCandidates(specs, &hist)
	d.markService(&hist)
	d.prepareSearch()
	return d
}

// setRates sets the fair share's steady-state usage per held GPU (the
// half-life over ln 2; 1 without decay) and the credit one aging step
// gives.
func (d *decider) setRates() {
	d.steady = 1
	if hl := d.policy.FairShare.HalfLife; hl > 0 {
		d.steady = hl.Seconds() / math.Ln2
	}
	d.stepCredit = d.policy.Aging.Interval.Seconds()
}

// addProjects adds a record per project in the specs, with its quota,
// borrow limit, weight, tier and decayed usage, and indexes them by name
// in projIdx. A project whose quota names kinds gets a record per kind
// besides (its quota accounts, addAccounts).
func (d *decider) addProjects(specs *schema.Set, usage map[string]float64, projIdx map[string]int) {
	n := len(specs.Projects)
	for i := range specs.Projects {
		n += len(specs.Projects[i].Spec.Quota.Kinds)
	}
	d.projs = zeroed(&d.bufs.projs, 0, n)
	d.bufs.projPool = zeroed(&d.bufs.projPool, 0, n)
	for i := range specs.Projects {
		p := &specs.Projects[i]
		pi := len(d.projs)
		projIdx[p.Meta.Name] = pi
		ps := d.addProject(projState{spec: p, name: p.Meta.Name, quota: p.Spec.Quota.GPUs, borrow: p.Spec.BorrowLimit.GPUs, weight: Weight(*p), heapIdx: -1, leastOver: math.MaxInt, leastHeld: math.MaxInt, minTier: math.MaxInt})
		q, b := &p.Spec.Quota, &p.Spec.BorrowLimit
		ps.rquota = quotaRes{max(q.CPUMHz, 0), max(q.MemoryBytes, 0)}
		ps.rborrow = quotaRes{b.CPUMHz, b.MemoryBytes}
		if t := specs.Tier(p.Spec.Tier); t != nil {
			ps.tier = t.Spec.Value
			ps.canPreempt, ps.preemptible = t.Spec.CanPreempt, t.Spec.Preemptible
			ps.cohortBelow = cohortBelow(specs, t)
			ps.ordering = t.Spec.Ordering
		}
		ps.usage = usage[ps.name]
		ps.root = pi
		d.addAccounts(ps)
	}
}

// addProject adds a record p to d.projs, kept in d.bufs.projPool, which
// addProjects sized for every record: the pointers into it stay.
func (d *decider) addProject(p projState) *projState {
	b := d.bufs
	b.projPool = append(b.projPool, p)
	ps := &b.projPool[len(b.projPool)-1]
	d.projs = append(d.projs, ps)
	return ps
}

// addAccounts adds a record for each kind project p's quota names: a
// quota account of its own, with the kind's quota and borrow limit,
// counting the project's workspaces that ask for that kind; p itself
// then counts the rest (quota.gpus). Each account is a team of its own
// in the decision: its in-quota work is the promise, reclaimed by no
// one, and what it runs beyond its quota may be reclaimed by any other
// account's in-quota work that needs those GPUs. CPU and memory quotas
// stay p's.
func (d *decider) addAccounts(p *projState) {
	q := &p.spec.Spec.Quota
	if len(q.Kinds) == 0 {
		return
	}
	names := make([]string, 0, len(q.Kinds))
	for k := range q.Kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	p.accounts = make(map[string]int, len(names))
	for _, k := range names {
		p.accounts[k] = len(d.projs)
		a := d.addProject(projState{spec: p.spec, name: p.name, kind: k, weight: p.weight,
			tier: p.tier, canPreempt: p.canPreempt, preemptible: p.preemptible, cohortBelow: p.cohortBelow, ordering: p.ordering, usage: p.usage,
			heapIdx: -1, leastOver: math.MaxInt, leastHeld: math.MaxInt, minTier: math.MaxInt, root: p.root})
		a.quota, a.borrow = p.spec.Spec.AccountLimits(k)
	}
}

// account returns the index of the quota account a workspace of the
// project at index pi counts against, asking for kind (empty: none):
// the kind's account where the project's quota names the kind, else
// the project's own.
func (d *decider) account(pi int, kind string) int {
	if a, ok := d.projs[pi].accounts[kind]; ok && kind != "" {
		return a
	}
	return pi
}

// topoInfo is what addWorkspaces works out once per topology a spec asks
// for: its placement levels (shared, read-only) and its topology number.
type topoInfo struct {
	levels []int
	id     int
}

// addWorkspaces adds a record per workspace in the specs: its resources,
// features, project, tier and flags, placement levels and topology
// number. Their records and decisions live in two slices, sized for every
// workspace and for nAllocs orphans, so pointers into them stay valid;
// the records are filled in place. Unless the specs are sorted by Ref,
// byRef indexes them.
func (d *decider) addWorkspaces(specs *schema.Set, nAllocs int, projIdx map[string]int) {
	nw := len(specs.Workspaces)
	d.pool = zeroed(&d.bufs.pool, nw, nw+nAllocs)
	d.outs = d.in.Scratch.Workspaces(nw, nw+nAllocs)
	d.ws = zeroed(&d.bufs.ws, nw, nw+nAllocs)
	d.nSpecs, d.specSorted = nw, true
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
		w.cpu, w.mem, w.disk, w.cores = res.CPUMHz, res.MemoryBytes, res.DiskBytes, res.ExclusiveCores
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
		if ks := sw.Spec.Resources.Kinds(); len(ks) > 0 {
			w.kind = ks[0]
			if len(ks) > 1 {
				w.kinds = ks
			}
		}
		w.proj = pi
		if pi >= 0 {
			w.proj = d.account(pi, w.kind)
			d.setTier(specs, w, d.projs[pi])
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
}

// heldKinds gives each workspace that asks for several kinds and holds
// GPUs the kind of the GPUs it holds, where it is one of them, and the
// quota account of that kind: it was admitted under it (as
// schema.Set.QuotaAccount counts it for the status).
func (d *decider) heldKinds(specs *schema.Set, snap *drivers.Snapshot) {
	for _, w := range d.ws {
		if len(w.kinds) == 0 || w.proj < 0 {
			continue
		}
		for _, a := range w.allocs {
			if m := snap.ModelOf(a); m != "" {
				if k := specs.KindOf(m); k != nil && slices.Contains(w.kinds, k.Meta.Name) {
					w.kind = k.Meta.Name
					w.proj = d.account(d.projs[w.proj].root, w.kind)
				}
				break
			}
		}
	}
}

// setTier gives w, a workspace of project p, its tier and preemption
// flags: its project's, or those of the tier it names itself (validate
// checks it exists and the project's maxTier allows it). A workspace is
// preemptible only if its tier and its spec both allow it.
func (d *decider) setTier(specs *schema.Set, w *wsState, p *projState) {
	sw := w.spec
	w.tier = p.tier
	w.tierName = p.spec.Spec.Tier
	w.canPreempt = p.canPreempt
	w.preemptible = p.preemptible && sw.Spec.Preemptible
	w.cohortBelow = p.cohortBelow
	w.ordering = p.ordering
	if tn := sw.Spec.Tier; tn != "" && tn != w.tierName {
		if t := specs.Tier(tn); t != nil {
			w.tier, w.tierName = t.Spec.Value, tn
			w.canPreempt = t.Spec.CanPreempt
			w.preemptible = t.Spec.Preemptible && sw.Spec.Preemptible
			w.cohortBelow = cohortBelow(specs, t)
			w.ordering = t.Spec.Ordering
		}
	}
}

// cohortBelow is tier t's borrowWithinCohort threshold: the value of
// the tier it names, or 0 (off, or naming no tier).
func cohortBelow(specs *schema.Set, t *schema.PriorityTier) int {
	if b := t.Spec.BorrowWithinCohort; b != nil {
		if bt := specs.Tier(b.Below); bt != nil {
			return bt.Spec.Value
		}
	}
	return 0
}

// attachAllocs attaches the snapshot's allocations to their workspace
// (or an orphan for refs the specs no longer list), marks their GPUs
// held and takes their CPU, memory, disk and cores off their node's
// (d.free). A workspace's allocations usually come together
// (Snapshot.Allocs is sorted by workspace): one lookup for them all,
// walking the sorted specs alongside (findFrom).
func (d *decider) attachAllocs(snap *drivers.Snapshot, projIdx map[string]int) {
	d.free = zeroed(&d.bufs.free, len(snap.Nodes), len(snap.Nodes))
	for ni := range snap.Nodes {
		d.free[ni] = nodeAmount(&snap.Nodes[ni])
	}
	heldSlots := zeroed(&d.bufs.heldSlots, 0, len(d.c.slots))
	heldBy := zeroed(&d.bufs.heldBy, 0, len(d.c.slots))
	wi := int32(-1)
	walk := 0 // findFrom's place in the specs
	ni, lastNode := -1, ""
	// A workspace's allocations are cut from one array of them all, in
	// snapshot order, while they come together; a workspace whose
	// allocations come back later (unsorted Allocs) appends to a copy.
	allocs := zeroed(&d.bufs.allocs, 0, len(snap.Allocs))
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
		if d.c.unitWeights {
			w.heldW += float64(len(a.GPUs))
		} else if len(a.GPUs) > 0 {
			w.heldW += d.c.weightOf(snap.ModelOf(a), len(a.GPUs))
		}
		w.rheld = w.rheld.add(quotaPerReplica(w))
		if a.Phase == drivers.AllocStopping {
			w.stopping = true
		}
		if a.StartedAt.After(w.startedAt) {
			w.startedAt = a.StartedAt
		}
		since := a.StartedAt
		if a.LastCheckpoint.After(since) {
			since = a.LastCheckpoint
		}
		if lost := d.now.Sub(since).Seconds(); lost > 0 {
			w.workLost += lost * float64(len(a.GPUs))
		}
		if ai == 0 || a.Node != lastNode {
			ni, lastNode = d.c.nodeIndex(a.Node), a.Node
		}
		if ni < 0 {
			continue
		}
		f := &d.free[ni]
		f.cpu, f.mem, f.disk, f.cores = f.cpu-a.CPUMHz, f.mem-a.MemoryBytes, f.disk-a.DiskBytes, f.cores-int64(a.Cores)
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
}

// measureNodes sets d.big, the most any usable (ready, eligible) node
// has in all, per dimension (MaxInt64 where a node does not track it),
// and starts d.relLeft empty.
func (d *decider) measureNodes(snap *drivers.Snapshot) {
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
}

// settleAllocated marks each workspace with allocations running or
// leaving (stopping, stopped, removed, or moved off a node its placement
// no longer allows), and the GPUs of leaving ones releasing. A workspace
// with allocations holds its place, GPUs or not: it runs or leaves, and
// never queues for a second start.
func (d *decider) settleAllocated() {
	for wi, w := range d.ws {
		if len(w.allocs) == 0 {
			continue
		}
		if !w.stopping && w.spec != nil && !w.stopped {
			w.fault = d.faultOf(w)
			w.moved = w.fault == "" && d.misplaced(w)
		}
		w.leaving = w.stopping || w.spec == nil || w.stopped || w.moved || w.fault != ""
		w.running = !w.leaving
		if w.leaving {
			d.markReleasing(int32(wi))
		}
	}
}

// setQueuedSince sets w.queuedSince: when hist says it first queued,
// if before now; else now.
func (d *decider) setQueuedSince(w *wsState, hist *drivers.History) {
	w.queuedSince = d.now
	if t, ok := hist.QueuedSince[w.ref]; ok && t.Before(d.now) {
		w.queuedSince = t
	}
}

// ageQueued sets the time queued, aging boost and overdue flag of the
// workspaces that will queue (buildQueue's test), queuedSince setting
// the time. Nothing else reads them, but for the quota accounting
// (countQuotas), which looks up the QueuedSince a running workspace was
// admitted with (RecordDecision) only where it breaks a tie.
func (d *decider) ageQueued(queuedSince func(*wsState)) {
	ag := d.policy.Aging
	for _, w := range d.ws {
		if w.spec == nil || w.stopped || len(w.allocs) > 0 {
			continue
		}
		queuedSince(w)
		if ag.Interval > 0 && ag.Step > 0 {
			steps := int64(d.now.Sub(w.queuedSince) / ag.Interval)
			w.boost = int(min(steps*int64(ag.Step), int64(max(ag.MaxBoost, 0))))
		}
		w.overdue = ag.MaxWait > 0 && d.now.Sub(w.queuedSince) >= ag.MaxWait
	}
}

// readLabels attaches hist's preemption records to their workspaces and
// gives running workspaces their recorded quota label (History.Borrowing),
// walking whichever side is smaller: the record's workspace, or each
// workspace's record.
func (d *decider) readLabels(hist *drivers.History) {
	// One array holds the records, which never outgrows its first
	// capacity: the pointers into it stay.
	n := min(len(hist.Preempted), len(d.ws))
	recs := zeroed(&d.bufs.preempted, 0, n)
	if len(hist.Preempted) < len(d.ws) {
		for ref, p := range hist.Preempted {
			if wi := d.find(ref); wi >= 0 {
				recs = append(recs, p)
				d.ws[wi].preempted = &recs[len(recs)-1]
			}
		}
	} else {
		for _, w := range d.ws {
			if p, ok := hist.Preempted[w.ref]; ok {
				recs = append(recs, p)
				w.preempted = &recs[len(recs)-1]
			}
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
}

// setAdmitted labels a running w as admitted borrowing or inside its
// quota, as recorded; one not running keeps no label.
func setAdmitted(w *wsState, borrowing bool) {
	if !w.running {
		return
	}
	w.admitted = admittedInQuota
	if borrowing {
		w.admitted = admittedBorrowing
	}
}

// countQuotas counts what stays against its project (markOverQuota,
// queuedSince breaking its ties), and sets d.quotasFit: whether the
// quotas add up to no more than the cluster has, GPUs and, where every
// node tracks the dimension, CPU and memory.
func (d *decider) countQuotas(snap *drivers.Snapshot, queuedSince func(*wsState)) {
	// Each project's list keeps its array from the decision before.
	byProj := d.bufs.byProj
	if cap(byProj) < len(d.projs) {
		byProj = make([][]*wsState, len(d.projs))
	}
	byProj = byProj[:len(d.projs)]
	for i := range byProj {
		byProj[i] = byProj[i][:0]
	}
	d.bufs.byProj = byProj
	for _, w := range d.ws {
		if w.running && w.proj >= 0 {
			byProj[w.proj] = append(byProj[w.proj], w)
		}
	}
	for pi, ws := range byProj {
		p := d.projs[pi]
		p.held, p.rheld = markOverQuota(ws, p.quota, p.rquota, queuedSince)
		for _, w := range ws {
			p.heldW += w.heldW
		}
	}

	sumQuota := 0
	var sumR, cluster quotaRes
	var byKind map[string]int // the quotas in each kind
	for _, p := range d.projs {
		sumQuota += max(p.quota, 0)
		sumR = sumR.add(p.rquota)
		if p.kind != "" {
			if byKind == nil {
				byKind = map[string]int{}
			}
			byKind[p.kind] += max(p.quota, 0)
		}
	}
	d.quotasFit = sumQuota <= len(d.c.slots)
	for k, n := range byKind {
		if mi := d.c.kindIndex(k); mi < 0 || n > d.c.tmpl.totalFree[mi] {
			d.quotasFit = false
		}
	}
	// CPU and memory quotas are weighed against the nodes where every
	// node tracks the dimension.
	if sumR.named() && d.quotasFit {
		cpuKnown, memKnown := len(snap.Nodes) > 0, len(snap.Nodes) > 0
		for _, n := range snap.Nodes {
			cluster = cluster.add(quotaRes{n.CPUMHz, n.MemoryBytes})
			cpuKnown = cpuKnown && n.CPUMHz > 0
			memKnown = memKnown && n.MemoryBytes > 0
		}
		d.quotasFit = (!cpuKnown || sumR.cpu <= cluster.cpu) && (!memKnown || sumR.mem <= cluster.mem)
	}
}

// markCandidates ranks every workspace's tier among the specs' tiers,
// marks the preemption candidates (running, preemptible, in a known
// project, past the minimum runtime) and those that started past the
// wait bound, and sums up each project's candidates (candidates,
// minTier, leastOver).
func (d *decider) markCandidates(specs *schema.Set, hist *drivers.History) {
	ag := d.policy.Aging
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
		w.candidate = w.running && w.preemptible && w.proj >= 0 && d.now.Sub(w.startedAt) >= d.policy.Preemption.MinRuntime
		if w.running && ag.MaxWait > 0 {
			if q, ok := hist.QueuedSince[w.ref]; ok && w.startedAt.Sub(q) >= ag.MaxWait {
				w.startedOverdue = true
			}
		}
		if w.candidate {
			p := d.projs[w.proj]
			p.candidates = true
			p.minTier = min(p.minTier, w.tier)
			if w.overQuota {
				p.leastOver = min(p.leastOver, w.held)
			}
			if w.held > 0 {
				p.leastHeld = min(p.leastHeld, w.held)
			}
		}
	}
}

// prepareSearch sizes the preemption search's per-workspace caches and
// records what was free before anyone was admitted, for "queue" reasons
// (initialMost).
func (d *decider) prepareSearch() {
	n := len(d.ws)
	d.rightStamp = zeroed(&d.bufs.rightStamp, n, n)
	d.decidedWS = zeroed(&d.bufs.decidedWS, n, n)
	d.rightVal = zeroed(&d.bufs.rightVal, n, n)
	d.initialMost = zeroed(&d.bufs.initialMost, len(d.c.index), len(d.c.index))
	for m := range d.c.index {
		for l := range numLevels {
			li := d.c.index[m][l]
			d.initialMost[m][l] = -1
			if gi := li.most(); gi >= 0 {
				d.initialMost[m][l] = li.groups[gi].free
			}
		}
	}
}

// misplaced reports whether an allocation of w runs on a node that w's
// placement does not allow (its node is gone: no).
func (d *decider) misplaced(w *wsState) bool {
	if w.feat < 0 || d.feats[w.feat].placement.IsZero() {
		return false
	}
	for _, a := range w.allocs {
		if ni := d.c.nodeIndex(a.Node); ni >= 0 && !d.feats[w.feat].placement.Allows(d.c.nodes[ni].Datacenter, d.c.nodes[ni].Pool, d.c.nodes[ni].Class, d.c.nodes[ni].Meta) {
			return true
		}
	}
	return false
}

// avoidFaultyNodes marks each workspace whose last run its node ended
// (a node-fault exit) to start elsewhere when another node fits
// (wsState.avoid).
func (d *decider) avoidFaultyNodes(snap *drivers.Snapshot) {
	for _, e := range snap.Exits {
		if e.Class != drivers.EndNodeFault || e.Node == "" {
			continue
		}
		if wi, ni := d.find(e.Workspace), d.c.nodeIndex(e.Node); wi >= 0 && ni >= 0 {
			d.ws[wi].avoid = int32(ni) + 1
		}
	}
}

// faultOf says why w must move off where it runs, or "": a node it runs
// on is gone from the cluster, down or disconnected, or draining (with
// what the drain's deadline leaves of its checkpoint grace), or a GPU it
// holds is gone from its node or unhealthy (unless its spec says to stay
// on an unhealthy GPU). A node that is merely ineligible keeps what runs
// there (that is what ineligible means), and one that is initializing
// (its client restarting) is given time.
func (d *decider) faultOf(w *wsState) string {
	for _, a := range w.allocs {
		ni := d.c.nodeIndex(a.Node)
		if ni < 0 {
			return "moving: node " + a.Node + " is gone from the cluster"
		}
		n := &d.c.nodes[ni]
		switch {
		case !n.Ready && (n.Status == "down" || n.Status == "disconnected"):
			return "moving: node " + n.Name + " is " + n.Status
		case n.Draining:
			return "moving: node " + n.Name + " is draining" + d.deadlineNote(w, n)
		}
		for _, id := range a.GPUs {
			gi := gpuIndex(n.GPUs, id)
			switch {
			case gi < 0:
				return "moving: GPU " + id + " is gone from node " + n.Name
			case !n.GPUs[gi].Healthy && w.spec.Spec.UnhealthyGPU != schema.GPUStay:
				if by := n.GPUs[gi].HeldBy; by != "" {
					return "moving: GPU " + id + " on node " + n.Name + " is held by another job (" + by + ")"
				}
				return "moving: GPU " + id + " on node " + n.Name + " is unhealthy"
			}
		}
	}
	return ""
}

// gpuIndex is the index of the GPU with id in gpus, or -1.
func gpuIndex(gpus []drivers.GPU, id string) int {
	for i := range gpus {
		if gpus[i].ID == id {
			return i
		}
	}
	return -1
}

// deadlineNote says what a drain's deadline leaves w: nothing to say when
// it has none or it leaves the whole checkpoint grace; else that the work
// since its last checkpoint is at risk.
func (d *decider) deadlineNote(w *wsState, n *drivers.Node) string {
	if n.DrainDeadline.IsZero() {
		return ""
	}
	left, grace := n.DrainDeadline.Sub(d.now), w.spec.Spec.Checkpoint.GracePeriod
	if left >= grace {
		return ""
	}
	return fmt.Sprintf(" (its deadline, %s away, is shorter than its %s checkpoint grace: the work since its last checkpoint is at risk)",
		max(left, 0).Round(time.Second), grace)
}

// nodeIndex finds a node by name in nodes (sorted by name), or -1.
func nodeIndex(nodes []drivers.Node, name string) int {
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

// find returns the index of the workspace with ref, or -1.
func (d *decider) find(ref schema.Ref) int32 {
	if d.specSorted {
		specs := d.ws[:d.nSpecs]
		i, ok := slices.BinarySearchFunc(specs, ref, func(w *wsState, ref schema.Ref) int {
			return w.ref.Compare(ref)
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
	if !d.specSorted || (i > 0 && d.ws[i-1].ref.Compare(ref) >= 0) {
		return d.find(ref)
	}
	// Every spec before i is before ref: it is at i or later, or nowhere.
	for ; i < d.nSpecs; i++ {
		if c := d.ws[i].ref.Compare(ref); c >= 0 {
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
