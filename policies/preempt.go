package policies

// Rule: victim choice. Who may be preempted by whom (right), and the
// fewest, lowest-tier, over-quota, least-work-lost victims that make a
// preemptor fit.
//
// Scenarios: testdata/preempt/.

import (
	"fmt"
	"math"
	"slices"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/internal/text"
)

// right returns the right preemptor w has over running workspace v, or
// RightNone. inQuota: w fits inside its project's guaranteed quota.
//
//   - priority: w's tier may preempt and is strictly higher than v's,
//     and v is of w's own project (a team's higher-tier work goes before
//     its lower-tier work, inside or beyond its quota, like Kueue's
//     withinClusterQueue: LowerPriority) or borrowed work of another
//     (another project's in-quota work is guaranteed, whatever its tier).
//     When the quotas add up to more GPUs than the cluster has, they
//     cannot all hold at once: then tier ranks them, and a preemptor
//     inside its own quota may also take other projects' in-quota work of
//     lower tiers (the seed walk-through: two projects, a quota of 1 GPU
//     each, one GPU).
//   - reclaim: w is inside its quota and v is work of another project
//     that holds more than its quota: borrowed work, or any of its work
//     whose taking leaves the project at or above its quota in GPUs.
//
// Either way v must be preemptible (tier and workspace) and have run the
// policy's minimum runtime; and a v that started Aging.MaxWait or more
// after it first queued (the wait bound started it, or it resumed that
// late) is taken only by a higher tier or another team's in-quota work
// (its quota is a promise): otherwise the in-quota work of its team its
// reservation held back would reclaim it at once, and it would wait
// again (a start that lasts is what the bound promises). No preemptor
// places a replica on a node where the guard holds GPUs for an overdue
// workspace: what leaves that node is its (reservedOn); and work of the
// overdue workspace's tier or lower preempts nothing until it has
// started (overdueHolds).
// "Borrowed" is strict: v was admitted beyond
// its project's quota (overQuota), and taking it leaves its project at or
// above its quota. A workspace admitted inside its quota is never
// borrowed work, even when its project borrows through workspaces started
// after it: otherwise one that reclaimed its quota from a borrower could
// be taken back by that borrower's priority once a sibling starts to
// borrow, and the two would take turns (A↔B ping-pong).
func (d *decider) right(w *wsState, inQuota bool, v *wsState) Right {
	if !v.running || v.victim || !v.preemptible || v.proj < 0 {
		return RightNone
	}
	if d.now.Sub(v.startedAt) < d.policy.Preemption.MinRuntime {
		return RightNone
	}
	if v.startedOverdue && w.tier <= v.tier && (v.proj == w.proj || !inQuota) {
		return RightNone
	}
	vp := d.projs[v.proj]
	borrowed := v.overQuota && (vp.held-v.held >= vp.quota || vp.leavesAtQuota(v.rheld))
	if w.canPreempt && v.tier < w.tier && (v.proj == w.proj || borrowed || (inQuota && !d.quotasFit) || d.cohortTakes(w, v)) {
		return RightPriority
	}
	// What a tier that borrows within the cohort runs is reclaimed only
	// by strictly higher tiers: else the team it took from would reclaim
	// it back, and the two would take turns.
	if v.cohortBelow > 0 && w.tier <= v.tier {
		return RightNone
	}
	// Reclaim counts what the project holds, not which of its workspaces
	// started beyond the quota: any of its work may be taken while taking
	// it leaves the project at or above its quota in GPUs. Otherwise the
	// borrowed work could be spread so that no node frees room for the
	// in-quota workspace while the project holds more than its quota.
	// What reclaim starts is in-quota work, which the project it was taken
	// from, now at or above its quota, has no right to take back. Nor is
	// in-quota work taken so from the workspace it preempted (by
	// priority, the quotas adding up to more than the cluster has): the
	// two would take turns, the project's borrowing being another
	// workspace's.
	if inQuota && v.proj != w.proj && (borrowed || (v.held > 0 && vp.held-v.held >= vp.quota && !(w.preempted != nil && w.preempted.By == v.ref))) {
		return RightReclaim
	}
	if d.orderRight(w, inQuota, v, borrowed) {
		return RightOrder
	}
	return RightNone
}

// cohortTakes reports whether w's tier borrows within the cohort
// (schema.BorrowWithinCohort) far enough to take v: v is another
// project's work of a tier below the threshold (and below w's, which
// right checks).
func (d *decider) cohortTakes(w, v *wsState) bool {
	return w.cohortBelow > 0 && v.proj != w.proj && v.tier < w.cohortBelow
}

func (d *decider) rightWhy(w, v *wsState, r Right) string {
	switch r {
	case RightOrder:
		return d.orderWhy(w, v)
	case RightPriority:
		vp := d.projs[v.proj]
		borrowed := v.overQuota && (vp.held-v.held >= vp.quota || vp.leavesAtQuota(v.rheld))
		if v.proj != w.proj && !borrowed && d.quotasFit && d.cohortTakes(w, v) {
			return fmt.Sprintf("tier %s (%d) outranks tier %s (%d) and borrows within the cohort (borrowWithinCohort): this breaks project %s's quota guarantee", w.tierName, w.tier, v.tierName, v.tier, vp.name)
		}
		return fmt.Sprintf("tier %s (%d) outranks tier %s (%d)", w.tierName, w.tier, v.tierName, v.tier)
	case RightReclaim:
		vp := d.projs[v.proj]
		if wp := d.projs[w.proj]; !wp.rquota.named() && !vp.rquota.named() && wp.kind == "" && vp.kind == "" && wp.accounts == nil && vp.accounts == nil {
			return fmt.Sprintf("project %s reclaims its guaranteed quota of %s from project %s, which borrows beyond its quota of %d", w.ref.Project, text.Plural(wp.quota, "GPU"), vp.name, vp.quota)
		}
		if vp.name == w.ref.Project {
			// Another of its own accounts: work of another kind that
			// borrowed GPUs of this one.
			return fmt.Sprintf("project %s reclaims its guaranteed quota of %s from its own work beyond its quota of %s", w.ref.Project, quotaText(d.projs[w.proj]), quotaText(vp))
		}
		return fmt.Sprintf("project %s reclaims its guaranteed quota of %s from project %s, which borrows beyond its quota of %s", w.ref.Project, quotaText(d.projs[w.proj]), vp.name, quotaText(vp))
	}
	return ""
}

// cand is a possible victim inside one group: how many of the group's GPUs
// it would free.
type cand struct {
	ws    int32
	count int
}

// option is one way to place a replica by preemption.
type option struct {
	level, group int
	victims      []int32 // in preference order
	cost         setCost
	leftover     int
}

// setCost orders victim sets: fewest, lowest tier, fewest in-quota, least
// work lost, most recently started.
type setCost struct {
	count    int
	maxTier  int
	inQuota  int
	lost     float64
	earliest int64 // earliest start among the victims, unix ns (later is cheaper)
}

func (a setCost) less(b setCost) bool {
	if a.count != b.count {
		return a.count < b.count
	}
	if a.maxTier != b.maxTier {
		return a.maxTier < b.maxTier
	}
	if a.inQuota != b.inQuota {
		return a.inQuota < b.inQuota
	}
	if a.lost != b.lost {
		return a.lost < b.lost
	}
	return a.earliest > b.earliest
}

// victimBefore is the preference order of single victims.
func (d *decider) victimBefore(a, b int32) bool {
	va, vb := d.ws[a], d.ws[b]
	if va.tier != vb.tier {
		return va.tier < vb.tier
	}
	if va.overQuota != vb.overQuota {
		return va.overQuota
	}
	if va.workLost != vb.workLost {
		return va.workLost < vb.workLost
	}
	if !va.startedAt.Equal(vb.startedAt) {
		return va.startedAt.After(vb.startedAt)
	}
	return va.ref.Less(vb.ref)
}

// searchLimit bounds, per placement level, how many ways to place a
// replica by preemption the search weighs once none fits without
// victims: among the nodes or domains where enough GPUs could come free,
// the ones with the most GPUs free or being released (the fewest victims
// needed), so the search costs the same on 10 nodes and on 10,000.
const searchLimit = 32

// scanLimit bounds how many groups the search looks at to find those
// searchLimit ways: groups where the preemptor has no right over enough
// of what runs give none, and are passed over. Below this many groups a
// level, the choice is exact.
const scanLimit = 8 * searchLimit

// searchPreempt finds the cheapest way to place one replica of w using free
// GPUs, GPUs already being released, and GPUs of workspaces w may preempt
// (at most budget of them). Only groups where the victims' removal makes
// the replica fit are considered, and within a group only minimal sets.
// It is called only once placeFree has found no room for this replica,
// with nothing changed since (step 0 relies on it).
func (d *decider) searchPreempt(w *wsState, mi int, inQuota bool, budget int) (option, bool) {
	k := 0 // victims may be of the k lowest tiers
	if d.policy.Preemption.Enabled && budget > 0 && !d.overdueHolds(w) {
		if inQuota {
			k = d.numTiers
		} else if w.canPreempt {
			k = w.rank
		}
		if d.ordering() && !inQuota {
			k = max(k, w.rank+1) // its own tier's borrowers, for ordering
		}
	}
	// 0. With no GPU being released, step 1 weighs what placeFree just
	// found no room in (the free GPUs, with no CPU or memory freed); and
	// with no workspace w may preempt, step 2 finds no victim and sees
	// none (couldPreempt stays as it is). Then the search fails without
	// building the avail indexes.
	if d.nReleasing == 0 && (k == 0 || !d.mayPreemptAny(w, inQuota)) {
		return option{}, false
	}
	d.searchID++
	n := w.gpus
	d.buildAvail(mi, w.levels) // the levels read below, in one pass
	// 1. No victims: free and releasing GPUs, preferred level first,
	// tightest fit.
	for rank, l := range w.levels {
		ci := d.availAt(mi, l)[0]
		groups := d.c.index[mi][l].groups
		found := -1
		ci.each(n, func(gi int) bool {
			if !d.reservedOn(w, groups[gi].node) && d.fitsAfter(w, &groups[gi], nil) {
				found = gi
				return false
			}
			return true
		})
		if found >= 0 {
			return option{level: rank, group: found, leftover: int(ci.count[found]) - n}, true
		}
	}
	if k == 0 {
		return option{}, false
	}
	// 2. Victims: the groups where enough GPUs could come free, those
	// with the most free and releasing GPUs first (they need the fewest
	// victims), at most searchLimit per level.
	var best option
	found := false
	for rank, l := range w.levels {
		avail := d.availAt(mi, l)
		zero, ci := avail[0], avail[k]
		if ci.bestFit(n) < 0 {
			continue // nowhere could enough GPUs come free
		}
		// weigh weighs group gi and reports whether it gave an option.
		weigh := func(gi int) bool {
			opt, ok := d.evalGroup(w, mi, inQuota, budget, rank, l, gi)
			if ok && (!found || opt.cost.less(best.cost) || (opt.cost == best.cost && (opt.level < best.level || (opt.level == best.level && opt.leftover < best.leftover)))) {
				opt.victims = append(best.victims[:0], opt.victims...)
				best, found = opt, true
			}
			return ok
		}
		// Groups that give an option count towards searchLimit, every
		// group looked at towards scanLimit: the counts are of the k
		// lowest tiers, whatever w's rights over their projects, so the
		// groups with the most GPUs that could come free may hold none w
		// may take.
		options, weighed, scanned := 0, 0, 0
		for c := zero.maxK; c >= 0 && options < searchLimit && scanned < scanLimit; c-- {
			zero.eachAt(c, func(gi int) bool {
				scanned++
				if int(ci.count[gi]) >= n {
					weighed++
					if weigh(gi) {
						options++
					}
				}
				return options < searchLimit && scanned < scanLimit
			})
		}
		if weighed == 0 {
			// None in the scanned window: the tightest that could fit.
			ci.each(n, func(gi int) bool {
				weighed++
				if weigh(gi) {
					options++
				}
				return options < searchLimit && weighed < scanLimit
			})
		}
	}
	return best, found
}

// overdueHolds reports whether the guard's overdue pick holds off w's
// preemptions: w is of the pick's tier or lower, and the pick has not
// started. What w would take is capacity the overdue workspace waits
// for, and the pick's reservation holds free GPUs only: with none free
// it holds nothing reservedOn could see, and a reclaim by work queued
// after it would take the GPUs it waits for (TestPropWaitBound).
func (d *decider) overdueHolds(w *wsState) bool {
	if d.overduePick < 0 || w.idx == d.overduePick {
		return false
	}
	g := d.ws[d.overduePick]
	return g.out.Verdict != VerdictStart && d.overdueBinds(w, g)
}

// reservedOn reports whether node ni holds GPUs the starvation guard
// reserves for an overdue workspace that binds w (overdueBinds): what
// leaves that node, by its end or by preemption, is for that workspace,
// so no later preemptor it binds places a replica there.
func (d *decider) reservedOn(w *wsState, ni int32) bool {
	if !d.guardOverdue || d.guardIdx < 0 || d.reservedBy != d.guardIdx || !d.overdueBinds(w, d.ws[d.guardIdx]) {
		return false
	}
	for _, si := range d.reserved {
		if d.c.slots[si].node == ni {
			return true
		}
	}
	return false
}

// mayPreemptAny reports whether some running workspace might give w a
// right (see right): false only when none can. It reads each project's
// candidates and leastOver, fixed when the decision began: victims taken
// since are counted as still there, so it errs only towards true.
func (d *decider) mayPreemptAny(w *wsState, inQuota bool) bool {
	for vi, vp := range d.projs {
		// Some candidate of vp could be borrowed work: it is beyond the
		// quota, and taking it leaves vp at or above its quota.
		borrowed := vp.leastOver <= vp.held-vp.quota || (vp.rquota.named() && vp.leastOver != math.MaxInt)
		if w.canPreempt && vp.minTier < w.tier && (((vi == w.proj || (inQuota && !d.quotasFit)) && vp.candidates) || borrowed) {
			return true // priority
		}
		if inQuota && vi != w.proj && (borrowed || vp.leastHeld <= vp.held-vp.quota) {
			return true // reclaim
		}
		if w.canPreempt && w.cohortBelow > 0 && vi != w.proj && vp.candidates && vp.minTier < min(w.tier, w.cohortBelow) {
			return true // priority, borrowing within the cohort
		}
		if d.mayOrder(w, inQuota, vi, vp, borrowed) {
			return true // ordering
		}
	}
	return false
}

// rightOf is right() cached for the current search.
func (d *decider) rightOf(w *wsState, inQuota bool, o int32) Right {
	if d.rightStamp[o] != d.searchID {
		d.rightStamp[o] = d.searchID
		d.rightVal[o] = d.right(w, inQuota, d.ws[o])
	}
	return d.rightVal[o]
}

// evalGroup weighs placing one replica of w in group gi of level l by
// preempting a minimal set of the workspaces holding its GPUs.
func (d *decider) evalGroup(w *wsState, mi int, inQuota bool, budget, rank, l, gi int) (option, bool) {
	g := &d.c.index[mi][l].groups[gi]
	if d.reservedOn(w, g.node) {
		return option{}, false
	}
	n := w.gpus
	free, rel := g.free, 0
	cands := d.bufCands[:0]
	defer func() { d.bufCands = cands[:0] }()
	total := 0
	for _, si := range g.gpus {
		s := &d.c.slots[si]
		switch {
		case s.owner < 0:
		case s.releasing:
			rel++
		case d.rightOf(w, inQuota, s.owner) != RightNone:
			d.couldPreempt = true
			total++
			found := false
			for i := range cands {
				if cands[i].ws == s.owner {
					cands[i].count++
					found = true
					break
				}
			}
			if !found {
				cands = append(cands, cand{s.owner, 1})
			}
		}
	}
	deficit := n - free - rel
	if deficit > total {
		return option{}, false
	}
	opt := option{level: rank, group: gi, leftover: free + rel - n}
	if deficit <= 0 && d.fitsAfter(w, g, nil) {
		return opt, true
	}
	// Victims for the GPUs it lacks, or for the CPU and memory.
	set, cost, ok := d.minSet(w, inQuota, g, cands, max(deficit, 0), budget)
	if !ok {
		return option{}, false
	}
	opt.victims, opt.cost = set, cost
	for _, c := range cands {
		for _, v := range set {
			if c.ws == v {
				opt.leftover += c.count
			}
		}
	}
	return opt, true
}

// minSet picks the fewest victims among cands that free deficit GPUs, and
// among sets of that size the cheapest. Victims whose right rests on their
// project borrowing are taken only while it still borrows; when no set of
// the smallest size passes that, the next size is tried. The returned set
// lives in a buffer the next call reuses.
func (d *decider) minSet(w *wsState, inQuota bool, g *group, cands []cand, deficit, budget int) ([]int32, setCost, bool) {
	// Insertion sorts: a node has a handful of candidates.
	for i := 1; i < len(cands); i++ {
		for j := i; j > 0 && d.victimBefore(cands[j].ws, cands[j-1].ws); j-- {
			cands[j], cands[j-1] = cands[j-1], cands[j]
		}
	}
	counts := append(d.bufCounts[:0], make([]int, len(cands))...)
	for i, c := range cands {
		counts[i] = c.count
	}
	for i := 1; i < len(counts); i++ {
		for j := i; j > 0 && counts[j] > counts[j-1]; j-- {
			counts[j], counts[j-1] = counts[j-1], counts[j]
		}
	}
	d.bufCounts = counts
	k, sum := 0, 0
	for k < len(counts) && sum < deficit {
		sum += counts[k]
		k++
	}
	if sum < deficit {
		return nil, setCost{}, false
	}
	// With GPUs enough, victims are wanted for CPU or memory only.
	k = max(k, 1)
	for ; k <= min(budget, len(cands)); k++ {
		if set, cost, ok := d.bestOfSize(w, inQuota, g, cands, deficit, k); ok {
			return set, cost, true
		}
	}
	return nil, setCost{}, false
}

// bestOfSize returns the cheapest set of k candidates that frees deficit
// GPUs and takes only borrowed GPUs where its right needs that.
func (d *decider) bestOfSize(w *wsState, inQuota bool, g *group, cands []cand, deficit, k int) ([]int32, setCost, bool) {
	var bestCost setCost
	found := false
	idx := d.bufIdx[:0]
	for i := range k {
		idx = append(idx, i)
	}
	d.bufIdx = idx
	set := append(d.bufSet[:0], make([]int32, k)...)
	d.bufSet = set
	best := d.bufBest[:0]
	for {
		got := 0
		for i, j := range idx {
			set[i] = cands[j].ws
			got += cands[j].count
		}
		if got >= deficit && d.borrowedOK(w, inQuota, set) && d.fitsAfter(w, g, set) {
			c := d.cost(set)
			if !found || c.less(bestCost) {
				best, bestCost, found = append(best[:0], set...), c, true
			}
		}
		// next combination
		i := k - 1
		for i >= 0 && idx[i] == len(cands)-k+i {
			i--
		}
		if i < 0 {
			break
		}
		idx[i]++
		for j := i + 1; j < k; j++ {
			idx[j] = idx[j-1] + 1
		}
	}
	d.bufBest = best
	return best, bestCost, found
}

// borrowedOK checks that victims taken because their project borrows
// take only borrowed GPUs: together they leave each project at or above
// its quota.
func (d *decider) borrowedOK(w *wsState, inQuota bool, set []int32) bool {
	// A priority right inside w's project, or over in-quota work when
	// the quotas overcommit the cluster, needs no borrowing.
	needs := func(v *wsState) bool {
		return v.proj != w.proj && !(inQuota && !d.quotasFit && w.canPreempt && v.tier < w.tier) && !(w.canPreempt && v.tier < w.tier && d.cohortTakes(w, v))
	}
	// A preemptor beyond its quota takes its own team's in-quota work
	// only so as to run inside the quota itself: else the GPUs it frees
	// go, once the victims are gone, to the in-quota work of other teams
	// queued before it, and the victim waits for a preemptor that cannot
	// start (preemptorWaits) while its team's quota goes unused.
	if !inQuota {
		own, ownIn := 0, false
		for _, a := range set {
			if va := d.ws[a]; va.proj == w.proj {
				own += va.held
				ownIn = ownIn || !va.overQuota
			}
		}
		if p := d.projs[w.proj]; ownIn && p.held-own < p.quota && p.held-own+w.gpus*w.replicas > p.quota {
			return false
		}
	}
	for _, a := range set {
		va := d.ws[a]
		if !needs(va) {
			continue
		}
		taken := 0
		var takenR quotaRes
		for _, b := range set {
			if vb := d.ws[b]; vb.proj == va.proj && needs(vb) {
				taken += vb.held
				takenR = takenR.add(vb.rheld)
			}
		}
		if p := d.projs[va.proj]; p.held-taken < p.quota && !p.leavesAtQuota(takenR) {
			return false
		}
	}
	return true
}

func (d *decider) cost(set []int32) setCost {
	c := setCost{count: len(set)}
	for i, vi := range set {
		v := d.ws[vi]
		c.maxTier = max(c.maxTier, v.tier)
		if !v.overQuota {
			c.inQuota++
		}
		c.lost += v.workLost
		if t := v.startedAt.UnixNano(); i == 0 || t < c.earliest {
			c.earliest = t
		}
	}
	return c
}

// applyOption preempts the option's victims and takes the replica's GPUs:
// free ones first, then ones already being released, then the victims'.
// waitFor collects every workspace whose GPUs the start takes over.
func (d *decider) applyOption(wi int32, w *wsState, r int, opt option, waitFor map[int32]bool) drivers.Placement {
	mi := d.modelIndexOf(w)
	li := d.c.index[mi][w.levels[opt.level]]
	g := &li.groups[opt.group]
	var old []int32
	for _, si := range g.gpus {
		if s := &d.c.slots[si]; s.owner >= 0 && s.releasing {
			old = append(old, si)
		}
	}
	for _, v := range opt.victims {
		d.victimize(v)
	}
	var fresh []int32
	for _, si := range g.gpus {
		if s := &d.c.slots[si]; s.owner >= 0 && s.releasing && !containsSlot(old, si) {
			fresh = append(fresh, si)
		}
	}
	picked := d.orderFree(mi, g.gpus)
	picked = append(picked, old...)
	picked = append(picked, fresh...)
	picked = picked[:w.gpus]
	// It waits for every victim (one taken for CPU or memory may keep
	// its GPUs free) and for the owners of the GPUs it takes.
	owners := append([]int32(nil), opt.victims...)
	for _, v := range opt.victims {
		waitFor[v] = true
	}
	for _, si := range picked {
		if o := d.c.slots[si].owner; o >= 0 {
			waitFor[o] = true
			if !containsSlot(owners, o) {
				owners = append(owners, o)
			}
		}
		d.setOwner(si, wi, false)
	}
	// CPU and memory: first what the owners it waits for free, then the
	// node's free pool, then what other leaving workspaces in the group
	// free (it waits for those too).
	ni := int(g.node)
	need := d.needOn(ni, w)
	claim := func(o int32) {
		t := d.freedOn(o, ni).min(need)
		if !t.zero() {
			d.claimFreed(o, ni, t)
		}
		need = need.sub(t)
	}
	for _, o := range owners {
		claim(o)
	}
	for _, si := range g.gpus {
		if need.within(d.free[ni].sub(amount{})) {
			break
		}
		if o := d.c.slots[si].owner; o >= 0 && d.c.slots[si].releasing && !waitFor[o] {
			waitFor[o] = true
			claim(o)
		}
	}
	d.takeAmount(ni, need)
	return d.placement(r, picked)
}

// freedOn returns what workspace o's allocations on node ni will free
// that no start of this decision has claimed yet.
func (d *decider) freedOn(o int32, ni int) (out amount) {
	if r, ok := d.relLeft[[2]int32{o, int32(ni)}]; ok {
		return r
	}
	name := d.c.nodes[ni].Name
	for _, a := range d.ws[o].allocs {
		if a.Node == name {
			out = out.add(allocAmount(a))
		}
	}
	return out
}

// claimFreed records that a start claimed t of what o frees on node ni;
// journaled.
func (d *decider) claimFreed(o int32, ni int, t amount) {
	key := [2]int32{o, int32(ni)}
	f := d.freedOn(o, ni)
	old, had := d.relLeft[key]
	d.journal = append(d.journal, undo{slot: -3, owner: o, node: int32(ni), amt: old, victim: had})
	d.relLeft[key] = amount{f.cpu - t.cpu, f.mem - t.mem, f.disk - t.disk, f.cores - t.cores}
}

// fitsAfter reports whether group g's node has the CPU and memory for one
// replica of w once the workspaces releasing GPUs in g and the victims in
// set are gone (an estimate: it counts every releasing owner in g).
func (d *decider) fitsAfter(w *wsState, g *group, set []int32) bool {
	ni := int(g.node)
	if w.cpu == 0 && w.mem == 0 && w.disk == 0 && w.cores == 0 {
		return w.feat < 0 || d.feats[w.feat].ok[ni]
	}
	// Most nodes have room without counting what leaves.
	if d.fitsNode(ni, w, amount{}) {
		return true
	}
	var freed amount
	var buf [16]int32 // a group has a handful of owners
	seen := buf[:0]
	add := func(o int32) {
		if !slices.Contains(seen, o) {
			seen = append(seen, o)
			freed = freed.add(d.freedOn(o, ni))
		}
	}
	for _, si := range g.gpus {
		if s := &d.c.slots[si]; s.owner >= 0 && s.releasing {
			add(s.owner)
		}
	}
	for _, v := range set {
		add(v)
	}
	return d.fitsNode(ni, w, freed)
}

func containsSlot(s []int32, x int32) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}
