package policies

// Rule: admission (phase 3). In queue order, each workspace starts on free
// GPUs (best fit, preferred topology first), else preempts (preempt.go),
// else waits with a reason; the first gang that waits reserves.
//
// Scenarios: testdata/admit/.

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/schema"
)

// admit decides one queued workspace: start on free GPUs, start after
// preempting, or wait with a reason.
func (d *decider) admit(w *wsState) {
	wi := w.idx
	d.decidedWS[wi] = true
	need := w.gpus * w.replicas
	d.couldPreempt = false
	guarded := false
	if d.reservedBy == wi {
		guarded = d.guardMsg != ""
		// Its own reservation is its to use: free it, and reserve again
		// below if it still cannot start for want of capacity.
		for _, si := range d.reserved {
			d.changeSlot(si, ownerFree, false, false)
		}
		d.reserved, d.reservedBy = nil, -1
		w.out.Holding = nil
		d.gen++
		d.memoGen++
	}
	if len(w.kinds) > 1 {
		d.chooseKind(w)
	}
	p := d.projs[w.proj]

	// 1. Quota: the project's guaranteed quota plus what it may borrow,
	// in every dimension the quota counts; a workspace that may not be
	// preempted runs only inside the quota.
	if r, over := d.overLimit(p, w); over {
		d.wait(w, r)
		return
	}
	if by := d.preemptorWaits(w); by >= 0 {
		d.wait(w, Reason{ReasonQueue, "queue: it resumes once " + d.ws[by].ref.String() + ", which preempted it, has started (resuming first, it would be preempted again)"})
		return
	}
	if w.feat >= 0 && !d.feats[w.feat].ready {
		d.wait(w, d.featureReason(w))
		return
	}
	if w.gpus <= 0 {
		if d.startWithoutGPUs(w) {
			// It holds no GPU: only the CPU and memory quota can leave
			// it beyond.
			w.out.Borrowed = p.rquota.exceeds(p.rheld.add(quotaNeed(w)), p.rquota)
			p.held += need
			p.rheld = p.rheld.add(quotaNeed(w))
			d.gen++
		}
		return
	}
	mi := d.modelIndexOf(w)
	switch {
	case mi < 0 && w.kind != "":
		d.wait(w, Reason{ReasonCapacity, fmt.Sprintf("capacity: no GPU kind %s is declared", w.kind)})
		return
	case mi < 0:
		d.wait(w, Reason{ReasonCapacity, fmt.Sprintf("capacity: no usable GPU of model %s in the cluster", w.model)})
		return
	case w.kind != "" && d.c.tmpl.totalFree[mi] == 0:
		d.wait(w, Reason{ReasonCapacity, fmt.Sprintf("capacity: no usable GPU of kind %s in the cluster%s", w.kind, d.kindsText(mi, d.c.tmpl.totalFree, "has"))})
		return
	}
	inQuota := d.inQuota(p, w)
	sm := d.shapeOf(w, mi)
	// sm.failed index: 1 + the project inside its quota; beyond it,
	// 1 + len(projs) + the project for a preemptor that may take its own
	// project's lower tiers, else 0 (what it may take is the same for
	// every project).
	fi := 0
	if inQuota {
		fi = 1 + w.proj
	} else if w.canPreempt && w.rank > 0 && d.projs[w.proj].minTier < w.tier {
		fi = 1 + len(d.projs) + w.proj
	}
	// A shape that failed since the last preemption fails again (in the
	// same project, if inside its quota): free GPUs only get fewer, and
	// only a preemption releases more. (A project that starts borrowing
	// later in the pass makes what it starts beyond its quota
	// reclaimable; the next decision sees that.)
	if sm.failed != nil && sm.failed[fi].gen == d.memoGen+1 {
		d.couldPreempt = sm.failed[fi].could
		d.waitForCapacity(wi, w, sm, mi, guarded)
		return
	}

	// 2. Place every replica: free GPUs first, else by preemption.
	d.journal = d.journal[:0]
	ok := true
	var pls []drivers.Placement
	type taken struct {
		victim int32
		right  Right
	}
	var victims []taken
	var waitFor map[int32]bool // made by the first preemption
	budget := d.policy.Preemption.MaxVictims
	if inQuota {
		// A quota is a promise: reclaiming it is bounded by the GPUs it
		// needs (each victim frees one at least), not by the cap on
		// victims, which would let borrowed work spread over 1-GPU jobs
		// keep an in-quota gang out.
		budget = max(budget, need)
	}
	if !d.policy.Preemption.Enabled {
		budget = 0
	}
	for r := 0; r < w.replicas && ok; r++ {
		if pl, found := d.placeFree(wi, w, mi, r); found {
			pls = append(pls, pl)
			continue
		}
		opt, found := d.searchPreempt(w, mi, inQuota, budget)
		if !found {
			ok = false
			break
		}
		for _, v := range opt.victims {
			victims = append(victims, taken{v, d.right(w, inQuota, d.ws[v])})
		}
		budget -= len(opt.victims)
		if waitFor == nil {
			waitFor = map[int32]bool{}
		}
		pl := d.applyOption(wi, w, r, opt, waitFor)
		pls = append(pls, pl)
	}
	if !ok {
		d.rollback()
		if sm.failed == nil {
			sm.failed = make([]failure, 1+2*len(d.projs))
		}
		sm.failed[fi] = failure{gen: d.memoGen + 1, could: d.couldPreempt}
		d.waitForCapacity(wi, w, sm, mi, guarded)
		return
	}

	// 3. Commit.
	d.journal = d.journal[:0]
	d.admitted++
	d.gen++
	// Preempting its own project's lower tiers may have brought it
	// inside the quota.
	w.out.Borrowed = !d.inQuota(p, w)
	p.held += need
	p.heldW += d.placedWeight(pls)
	p.rheld = p.rheld.add(quotaNeed(w))
	w.out.Verdict = VerdictStart
	w.out.Placements = pls
	var why []string
	for _, t := range victims {
		v := d.ws[t.victim]
		by := w.ref
		v.out.Verdict = VerdictPreempt
		v.out.PreemptedBy = &by
		v.out.Right = t.right
		v.out.Reason = Reason{ReasonPreempted, fmt.Sprintf("preempted by %s: %s", w.ref, d.rightWhy(w, v, t.right))}
		why = append(why, v.ref.String())
	}
	for v := range waitFor {
		w.out.Preempts = append(w.out.Preempts, d.ws[v].ref)
	}
	sort.Slice(w.out.Preempts, func(i, j int) bool { return w.out.Preempts[i].Less(w.out.Preempts[j]) })
	switch {
	case len(why) > 0:
		w.out.Reason = Reason{ReasonNone, "starts after preempting " + strings.Join(why, ", ")}
	case len(w.out.Preempts) > 0:
		w.out.Reason = Reason{ReasonNone, "starts once the GPUs it takes over are released"}
	default:
		w.out.Reason = Reason{ReasonNone, "starts on free GPUs"}
	}
	if w.preempted != nil {
		w.out.Reason.Message = fmt.Sprintf("resumes (preempted by %s at %s); %s", w.preempted.By, stamp(w.preempted.At), w.out.Reason.Message)
	}
}

// waitForCapacity tells w, which found no room (the cluster as it was
// before w was tried; d.couldPreempt says whether the search saw a
// workspace it may preempt), to wait, and reserves GPUs for it when
// nobody holds a reservation yet and it is a gang (the head of the
// queue) or the starvation guard's pick.
//
// The reason is memoized per shape (sm, w's) and couldPreempt while
// d.gen stays the same, and the memo is exact: waitReason reads only the
// shape (mi, w.topo's levels, gpus, replicas, cpu, mem: model names map
// one to one to mi), the couldPreempt it is given, the free GPU indexes
// and total free counts, the reservation (reservedBy, reserved),
// d.admitted, node names and initialMost. initialMost and the nodes
// never change during a decision; every change of the others bumps
// d.gen (setOwner, victimize, reserve when it holds anything, admit
// freeing a reservation, every start), and a rollback only restores a
// state after gen moved on. The same holds for reserve: it reads the
// shape and the free indexes, and it is tried only when reservedBy < 0
// for a reason that is not ReasonQueue (or any reason, for an overdue
// guarded workspace), for a gang (replicas are part of the shape) or a
// guarded workspace (which always misses: freeing its reservation bumped
// gen just before; only the guard's overdue pick, always guarded, also
// reads which GPUs late work holds). A gang reserves only inside its
// quota, which the shape does not say, so a gang inside its quota tries
// on a hit too; for the rest, on a hit either it was not tried then and
// is not now, or it was tried with this very input and held nothing
// (holding would have bumped gen): it is skipped.
func (d *decider) waitForCapacity(wi int32, w *wsState, sm *shapeMemo, mi int, guarded bool) {
	c := 0
	if d.couldPreempt {
		c = 1
	}
	gangHead := w.replicas > 1 && d.inQuota(d.projs[w.proj], w)
	var reason Reason
	// The memoized reason is per shape, not per project: a gang inside
	// its quota still tries to reserve on a hit when nobody holds GPUs.
	if sm.reasonGen[c] == d.gen+1 {
		d.couldPreempt = false
		reason = sm.reason[c]
		if !gangHead || d.reservedBy >= 0 {
			d.wait(w, reason)
			return
		}
	} else {
		reason = d.waitReason(w, mi)
		sm.reason[c], sm.reasonGen[c] = reason, d.gen+1
	}
	// A gang inside its quota at the head of the queue reserves: without
	// it, single workspaces could take GPUs one by one forever before a
	// whole gang's worth is free. A gang beyond its quota waits for
	// borrowable capacity, no quota's promise: like a single workspace,
	// it reserves only as the starvation guard's pick (guarded: it held the guard's reservation); an overdue
	// one reserves again even when higher tiers ahead of it took the GPUs
	// it fits in (the wait bound).
	if d.reservedBy < 0 && (reason.Kind != ReasonQueue || (guarded && d.guardOverdue)) && (gangHead || guarded) {
		as := "head of the queue"
		if guarded {
			as = d.guardAs()
		}
		if msg := d.reserve(wi, w, mi, as); msg != "" {
			reason.Message += "; " + msg
		}
	}
	d.wait(w, reason)
}

// preemptorWaits returns the workspace that preempted w if that one, of
// w's project and a higher tier, still waits to start and has not had
// its turn in this decision, else -1. w goes first only by ranking ahead
// of it (inside its quota while the preemptor borrows), and it would
// take back the GPUs it gave up and be preempted again at once by the
// same right: on the Philly replay one job went round 982 times. Once
// its preemptor has had its turn and still waits, w may resume. A victim
// of reclaim or of another project resumes as it may: back inside its
// quota, it is not borrowed work its preemptor could take again. An
// overdue w goes anyway: the wait bound.
func (d *decider) preemptorWaits(w *wsState) int32 {
	if w.preempted == nil || w.overdue {
		return -1
	}
	pi := d.find(w.preempted.By)
	if pi < 0 {
		return -1
	}
	p := d.ws[pi]
	if p.proj != w.proj || p.tier <= w.tier || p.spec == nil || p.stopped || p.running || d.decided(pi) {
		return -1
	}
	return pi
}

func (d *decider) wait(w *wsState, r Reason) {
	w.out.Verdict = VerdictWait
	w.out.Placements = nil
	var overdue schema.Ref
	if r.Kind == ReasonCapacity && d.policy.Preemption.Enabled && d.overdueHolds(w) {
		overdue = d.ws[d.overduePick].ref
	}
	if overdue.Name == "" && w.preempted == nil {
		w.out.Reason = r
		return
	}
	// The message is composed once and reused while what it says holds:
	// a workspace waiting to resume is told so again at every decision.
	var p drivers.Preemption
	if w.preempted != nil {
		p = *w.preempted
	}
	m := d.in.Scratch.reason(w.ref)
	if m.msg == "" || m.base != r.Message || m.overdue != overdue || m.preempted != (w.preempted != nil) || m.by != p.By || !m.at.Equal(p.At) {
		msg := r.Message
		if overdue.Name != "" {
			msg += "; it preempts nothing while " + overdue.String() + " (waiting past aging.maxWait) waits"
		}
		if w.preempted != nil {
			msg = "preempted by " + p.By.String() + " at " + stamp(p.At) + "; waiting to resume: " + msg
		}
		*m = reasonMemo{base: r.Message, overdue: overdue, preempted: w.preempted != nil, by: p.By, at: p.At, msg: msg}
	}
	r.Message = m.msg
	if w.preempted != nil {
		r.Kind = ReasonPreempted
		w.out.PreemptedBy = &m.by
	}
	w.out.Reason = r
}

// placedWeight is what the GPUs of pls count in GPU-equivalents.
func (d *decider) placedWeight(pls []drivers.Placement) float64 {
	sum := 0.0
	for _, pl := range pls {
		if d.c.unitWeights {
			sum += float64(len(pl.GPUs))
			continue
		}
		ni := d.c.nodeIndex(pl.Node)
		for _, id := range pl.GPUs {
			if si := d.c.slot(ni, id); si >= 0 {
				sum += d.c.weights[d.c.slots[si].mi-1]
			}
		}
	}
	return sum
}

// chooseKind picks the kind w, which asks for several in order of
// preference, is admitted under, as Kueue's flavor fungibility does: the
// first of its kinds in whose quota it fits and where it starts on free
// GPUs now; else the first where it may borrow and starts on free GPUs
// now; else the first in whose quota it fits, else its first, under
// which it then preempts or waits as a workspace of one kind does. It
// sets w's kind and quota account to the kind's.
func (d *decider) chooseKind(w *wsState) {
	root := d.projs[w.proj].root
	use := func(k string) {
		w.kind, w.proj = k, d.account(root, k)
	}
	firstIn := ""
	for pass := range 2 {
		for _, k := range w.kinds {
			use(k)
			p := d.projs[w.proj]
			if _, over := d.overLimit(p, w); over {
				continue
			}
			if pass == 0 {
				if !d.inQuota(p, w) {
					continue
				}
				if firstIn == "" {
					firstIn = k
				}
			}
			if d.startsFree(w) {
				return
			}
		}
	}
	use(cmp.Or(firstIn, w.kinds[0]))
}

// startsFree reports whether every replica of w would start on free GPUs
// of its model index now; it tries, and takes nothing back it did not
// undo.
func (d *decider) startsFree(w *wsState) bool {
	mi := d.modelIndexOf(w)
	if mi < 0 || d.c.totalFree[mi] < w.gpus*w.replicas || w.gpus <= 0 {
		return mi >= 0 && w.gpus <= 0
	}
	d.journal = d.journal[:0]
	ok := true
	for r := 0; r < w.replicas && ok; r++ {
		_, ok = d.placeFree(w.idx, w, mi, r)
	}
	d.rollback()
	return ok
}

// placeFree places replica r on free GPUs: the first level (preferred
// topology first) where a group fits, in the group with the fewest free
// GPUs that still fits (least stranded capacity); off the node that
// ended its last run (wsState.avoid) where another fits.
func (d *decider) placeFree(wi int32, w *wsState, mi, r int) (drivers.Placement, bool) {
	if w.avoid > 0 {
		if pl, ok := d.placeFreeOff(wi, w, mi, r, w.avoid-1); ok {
			return pl, true
		}
	}
	return d.placeFreeOff(wi, w, mi, r, -1)
}

// placeFreeOff is placeFree on any node but skip (-1: none).
func (d *decider) placeFreeOff(wi int32, w *wsState, mi, r int, skip int32) (drivers.Placement, bool) {
	for _, l := range w.levels {
		li := d.c.index[mi][l]
		gi := -1
		li.each(w.gpus, func(g int) bool {
			if li.groups[g].node != skip && d.fitsNode(int(li.groups[g].node), w, amount{}) {
				gi = g
				return false
			}
			return true
		})
		if gi < 0 {
			continue
		}
		slots := d.orderFree(mi, li.groups[gi].gpus)[:w.gpus]
		for _, si := range slots {
			d.setOwner(si, wi, false)
		}
		d.takeNode(int(li.groups[gi].node), w, amount{})
		return d.placement(r, slots), true
	}
	return drivers.Placement{}, false
}

// orderFree returns the free slots of a group, those in the most used
// NVLink domain first, so whole domains stay whole.
func (d *decider) orderFree(mi int, gpus []int32) []int32 {
	var out []int32
	for _, si := range gpus {
		if d.c.slots[si].owner == ownerFree {
			out = append(out, si)
		}
	}
	k := d.c.setOf(mi)
	dom := d.c.index[mi][levelDomain]
	sort.SliceStable(out, func(i, j int) bool {
		a, b := &d.c.slots[out[i]], &d.c.slots[out[j]]
		fa, fb := dom.groups[a.groups[k][levelDomain]].free, dom.groups[b.groups[k][levelDomain]].free
		if fa != fb {
			return fa < fb
		}
		if a.dom != b.dom {
			return a.dom < b.dom
		}
		return a.index < b.index
	})
	return out
}

func (d *decider) placement(r int, slots []int32) drivers.Placement {
	pl := drivers.Placement{Replica: r, Node: d.c.nodes[d.c.slots[slots[0]].node].Name}
	for _, si := range slots {
		pl.GPUs = append(pl.GPUs, d.c.slots[si].id)
	}
	sort.Strings(pl.GPUs)
	return pl
}

// waitReason explains why w cannot start; the cluster is as it was
// before w was tried. For a workspace that asks for a kind, it adds
// what the other kinds have free.
func (d *decider) waitReason(w *wsState, mi int) Reason {
	r := d.whyNoStart(w, mi)
	if w.kind != "" {
		r.Message += d.kindsText(mi, d.c.totalFree, "free")
	}
	return r
}

func (d *decider) whyNoStart(w *wsState, mi int) Reason {
	defer func() { d.couldPreempt = false }()
	// Reserved for the head of the queue?
	if d.reservedBy >= 0 && d.fitsWithoutReservation(w, mi) {
		h := d.ws[d.reservedBy]
		return Reason{ReasonQueue, fmt.Sprintf("queue: the free GPUs it fits in are held for %s, waiting since %s", h.ref, stamp(h.queuedSince))}
	}
	loosest := w.levels[len(w.levels)-1]
	li := d.c.index[mi][loosest]
	gpuFits := false
	for _, l := range w.levels {
		if d.c.index[mi][l].bestFit(w.gpus) >= 0 {
			gpuFits = true
		}
	}
	// Others took the GPUs it fits in (when GPUs still fit, what it
	// lacks is a node's CPU, memory, disk or features: said below).
	if d.admitted > 0 && w.replicas == 1 && !gpuFits {
		for _, l := range w.levels {
			if d.initialMost[mi][l] >= w.gpus { // one group had room
				r := Reason{ReasonQueue, fmt.Sprintf("queue: %s ahead of it in the queue took the free GPUs it fits in", text.Plural(d.admitted, "workspace"))}
				if d.couldPreempt {
					r.Message += "; preempting what it may would not make room"
				}
				return r
			}
		}
	}
	of := ""
	switch {
	case w.kind != "":
		of = " of kind " + w.kind
	case w.model != "":
		of = " of model " + w.model
	}
	best := func(li *levelIndex) string {
		gi := li.most()
		if gi < 0 {
			return "no usable GPU"
		}
		g := &li.groups[gi]
		if mi == 0 && len(d.c.models) > 1 {
			// Any whole GPU, on a cluster of several models: a group is
			// one model's (a replica's GPUs are one device group's).
			return fmt.Sprintf("best: %s has %d %s", d.c.nodes[g.node].Name, g.free, d.c.slots[g.gpus[0]].model)
		}
		return fmt.Sprintf("best: %s has %d", d.c.nodes[g.node].Name, g.free)
	}
	var r Reason
	switch {
	case gpuFits && w.cpu == 0 && w.mem == 0 && w.disk == 0 && w.cores == 0 && w.feat >= 0 && w.replicas == 1:
		r = Reason{ReasonCapacity, fmt.Sprintf("capacity: no node%s has %s%s free", d.featureText(w), text.Plural(w.gpus, "GPU"), of)}
	case gpuFits && (w.cpu > 0 || w.mem > 0 || w.disk > 0 || w.cores > 0 || w.feat >= 0) && w.replicas == 1:
		r = Reason{ReasonCapacity, fmt.Sprintf("capacity: no node with %s%s free also has %s free%s", text.Plural(w.gpus, "GPU"), of, resources(w.cpu, w.cores, w.mem, w.disk), d.featureText(w))}
	case w.replicas > 1 && li.bestFit(w.gpus) >= 0:
		r = Reason{ReasonCapacity, fmt.Sprintf("capacity: gang of %d×%s%s does not fit all at once (%d free)", w.replicas, text.Plural(w.gpus, "GPU"), of, d.c.totalFree[mi])}
	case loosest != levelNode && d.c.index[mi][levelNode].bestFit(w.gpus) >= 0:
		r = Reason{ReasonTopology, fmt.Sprintf("topology: no node has %s%s in one %s (%s)", text.Plural(w.gpus, "free GPU"), of, levelName[loosest], best(li))}
	default:
		r = Reason{ReasonCapacity, fmt.Sprintf("capacity: no node has %s%s (%s)", text.Plural(w.gpus, "free GPU"), of, best(d.c.index[mi][levelNode]))}
	}
	if d.couldPreempt {
		r.Message += "; preempting what it may would not make room"
	}
	return r
}

// kindsText writes what the declared kinds other than model index mi
// have by count (the cluster's totals, or its free GPUs): "; the
// cluster has 8 h100 and 14 a100-1g", "; free: 3 h100"; "" when no
// other kind has any.
func (d *decider) kindsText(mi int, count []int, what string) string {
	var parts []string
	for k := range d.c.kinds {
		if m := d.c.kindBase + k; m != mi && count[m] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", count[m], d.c.kinds[k].Meta.Name))
		}
	}
	switch {
	case len(parts) == 0:
		return ""
	case what == "free":
		return "; free: " + joinAnd(parts)
	}
	return "; the cluster " + what + " " + joinAnd(parts)
}

// fitsWithoutReservation reports whether one replica of w would fit in
// free GPUs if the reserved ones were free too: some group at one of its
// levels holding reserved GPUs has enough free and reserved together.
func (d *decider) fitsWithoutReservation(w *wsState, mi int) bool {
	k := d.c.setOf(mi)
	// The reserved GPUs per group, as (group, count) pairs: a
	// reservation holds a few groups' GPUs.
	type held struct{ gi, n int32 }
	var buf [8]held
	for _, l := range w.levels {
		li := d.c.index[mi][l]
		seen := buf[:0]
	slots:
		for _, si := range d.reserved {
			s := &d.c.slots[si]
			if !s.in(mi) {
				continue
			}
			gi := s.groups[k][l]
			for i := range seen {
				if seen[i].gi == gi {
					seen[i].n++
					continue slots
				}
			}
			seen = append(seen, held{gi, 1})
		}
		for _, h := range seen {
			if li.groups[h.gi].free+int(h.n) >= w.gpus {
				return true
			}
		}
	}
	return false
}

// reserve holds the best free GPUs for w, the first workspace of the
// queue that waits for capacity, so later arrivals cannot keep taking
// them: for each replica, the free GPUs of the group with the most free.
func (d *decider) reserve(wi int32, w *wsState, mi int, as string) string {
	l := w.levels[len(w.levels)-1]
	li := d.c.index[mi][l]
	if li.maxK < w.gpus {
		return "" // it fits nowhere even when the cluster is empty
	}
	var parts []string
	// A node whose whole CPU or memory is too small is no use to it.
	big := func(ni int32) bool {
		n := &d.c.nodes[ni]
		if w.feat >= 0 && !d.feats[w.feat].ok[ni] {
			return false
		}
		return d.needOn(int(ni), w).within(nodeAmount(n))
	}
	if !d.anyNodeBig(w) {
		return ""
	}
	var holding []drivers.Placement
	// held: GPUs per group that earlier replicas will take: a group
	// holds another replica only where its GPUs leave room for one more
	// (a 2×7 gang holds 7 on one 8-GPU node and 1 on another, never 7+1
	// on the same node, where its second replica could never run).
	var held map[int]int
	late := d.lateWork(w)
	for r := range w.replicas {
		gi := -1
		// An overdue workspace holds GPUs in a group none of whose GPUs
		// are held by work queued after it that started once it was
		// overdue (late): what else holds that group was there before
		// and ends within the longest run, so the group does not slip
		// away behind work it should have gone before (the wait bound).
		// Only where no such group is left, any.
		for _, avoid := range []bool{late != nil, false} {
			for k := li.maxK; k >= 1 && gi < 0; k-- {
				li.eachAt(k, func(g int) bool {
					room := len(li.groups[g].gpus) - held[g]
					if avoid {
						room -= late(li.groups[g].gpus)
					}
					if room >= w.gpus && big(li.groups[g].node) {
						gi = g
						return false
					}
					return true
				})
			}
			if gi >= 0 || !avoid {
				break
			}
		}
		if gi < 0 {
			break
		}
		slots := d.orderFree(mi, li.groups[gi].gpus)
		slots = slots[:min(len(slots), w.gpus)]
		if held == nil {
			held = map[int]int{}
		}
		held[gi] += w.gpus // the replica's, whatever is free of it now
		for _, si := range slots {
			d.changeSlot(si, ownerReserved, false, false)
			d.reserved = append(d.reserved, si)
		}
		parts = append(parts, fmt.Sprintf("%d on %s", len(slots), d.c.nodes[li.groups[gi].node].Name))
		holding = append(holding, d.placement(r, slots))
	}
	d.journal = d.journal[:0]
	if len(parts) == 0 {
		return ""
	}
	d.reservedBy = wi
	d.ws[wi].out.Holding = holding
	d.gen++
	return "holds free GPUs for itself as " + as + " (" + strings.Join(parts, ", ") + ")"
}

// lateWork returns, for the starvation guard's overdue pick w, a count
// of the GPUs of a group held by late work: workspaces queued after w
// that started once w was overdue (or start in this decision); nil for
// any other workspace.
func (d *decider) lateWork(w *wsState) func(slots []int32) int {
	if !d.guardOverdue || w.idx != d.overduePick {
		return nil
	}
	overdueAt := w.queuedSince.Add(d.policy.Aging.MaxWait)
	var queued map[schema.Ref]time.Time
	if d.in.History != nil {
		queued = d.in.History.QueuedSince
	}
	late := func(o *wsState) bool {
		if !o.running {
			return true // starts in this decision
		}
		q, ok := queued[o.ref]
		after := ok && (q.After(w.queuedSince) || (q.Equal(w.queuedSince) && w.ref.Less(o.ref)))
		return after && !o.startedAt.Before(overdueAt)
	}
	return func(slots []int32) int {
		n := 0
		for _, si := range slots {
			if s := &d.c.slots[si]; s.owner >= 0 && !s.releasing && late(d.ws[s.owner]) {
				n++
			}
		}
		return n
	}
}

// decided reports whether queued workspace wi has had its turn.
func (d *decider) decided(wi int32) bool {
	return d.decidedWS[wi]
}

// anyNodeBig reports whether some node's whole CPU and some node's whole
// memory could hold one replica of w (a quick filter).
func (d *decider) anyNodeBig(w *wsState) bool {
	return amount{w.cpu, w.mem, w.disk, int64(w.cores)}.within(d.big)
}

// featureText is ", and the docker driver and host volume data" when w
// needs a node feature some node lacks, else "".
func (d *decider) featureText(w *wsState) string {
	if w.feat < 0 {
		return ""
	}
	fs := &d.feats[w.feat]
	if !slices.Contains(fs.ok, false) {
		return ""
	}
	var what []string
	if fs.driver != "" {
		what = append(what, "the "+fs.driver+" driver")
	}
	for _, v := range fs.volumes {
		what = append(what, "host volume "+v)
	}
	in := ""
	if !fs.placement.IsZero() {
		in = " in " + fs.placement.String()
	}
	if len(what) == 0 {
		return in
	}
	return in + " with " + strings.Join(what, " and ")
}

// featureReason is the wait reason of a workspace no ready node has the
// features or placement for: "capacity: no ready node has the docker
// driver", or "capacity: placement: no ready, eligible node is in
// datacenter eu-west".
func (d *decider) featureReason(w *wsState) Reason {
	return Reason{ReasonCapacity, "capacity: " + d.feats[w.feat].missing}
}
