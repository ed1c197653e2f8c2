package baseline

import (
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/policies"
	"github.com/berth-dev/berth/schema"
)

// world is one decision's working copy of the cluster and the workloads.
// It is built from the input and never shares mutable state with it.
// Its memory comes from a pool (newWorld) and goes back to it (release),
// except the decision it returns.
type world struct {
	now time.Time
	// nodes are the device groups of the nodes: a node's usable GPUs of
	// one model each (groups.go), by node name, then in the order of the
	// node's first GPU of each; a node of one model is one entry.
	nodes []node
	gpus  []gpu  // the nodes' GPUs, node by node, each group's together
	ws    []work // specs order (by Ref), then orphans by Ref
	// out is the decision's verdicts, by Ref: each work writes its own
	// entry (work.out), so the decision is returned without a copy.
	out []policies.WorkspaceDecision
	// turns counts the queued workspaces admitAll has considered: each
	// one's WorkspaceDecision.Queue.
	turns int
	projs []project // as specs.Projects (by name)
	specs *schema.Set
	hist  *drivers.History // nil: none
	// placements is what the holders' placements are cut from; heldGPUs
	// counts the GPU IDs of all allocations.
	placements *drivers.PlacementBuf
	heldGPUs   int
	// gen changes whenever a GPU changes hands, so memoized failures are
	// recomputed only when they could differ.
	gen     int
	journal []undo
	lowest  int // admitAll: the lowest priority running (in a project)
	// roomAt is room's answer when gen was roomGen.
	roomAt, roomGen int
	// preempt: the policy preempts at all (and with how many victims at most).
	maxVictims int

	// Scratch memory: released to the pool with the world.
	owners  []int            // newWorld: each allocation's workspace
	ptrs    []*drivers.Alloc // backs work.allocs
	queue   []*work          // settle's result
	ordered []*work          // sorted's result
	rest    []*work          // partition's
	failed  map[uint64]bool
	// nodeAt remembers where node lookups found each name, from one
	// decision to the next (checked before use: a hint, not a truth).
	nodeAt map[string]int
	// kinds: which groups each workspace may use (groups.go).
	kinds kinds
}

// node is one device group of a node: its usable GPUs of one model.
// Nomad takes the devices of one request from one group, so a replica's
// GPUs are of one group.
type node struct {
	name string
	gpus []gpu // by index
	// all is every usable GPU of the node, each group's together: where
	// an allocation's GPUs are looked for.
	all []gpu
	// model is the index of the group's model in kinds.models (-1: the
	// node has no usable GPU).
	model int32
	// free and releasing count the GPUs not taken by this decision that
	// are free, or held by a workspace that releases them (gpu.tally).
	free, releasing int
}

// gpu is one usable GPU (healthy, on a ready, eligible node).
type gpu struct {
	id        string
	node      *node
	owner     *work // nil: free
	releasing bool  // its owner is stopping, or a victim of this decision
	taken     *work // tentatively placed by this decision
	// movable: its owner runs, may be preempted and has a project (fixed
	// for the decision), so preemptNode reads the owner only for these.
	movable bool
}

// tally adds d times g's part to its node's counts: every change to a
// GPU is bracketed by tally(-1) and tally(+1).
func (g *gpu) tally(d int) {
	if g.taken != nil {
		return
	}
	switch {
	case g.owner == nil:
		g.node.free += d
	case g.releasing:
		g.node.releasing += d
	}
}

// work is one workspace in a decision. The fields a queue's ordering and
// admission read come first, so they share a cache line more often.
type work struct {
	queued time.Time // set for the queue only (settle)
	proj   *project
	prio   int
	// idx is its place in world.ws: for a workspace of the specs, its
	// place in specs order, which is Ref order (a Set's workspaces are
	// sorted), so comparing idx orders spec workspaces as Ref.Less does.
	idx      int
	gpus     int
	replicas int
	cls      int32 // the GPUs it may use: a class of kinds (groups.go)
	canPre   bool  // its tier may preempt
	fits     bool  // Quota: inside its project's quota when the cycle began
	decided  bool  // has its verdict
	preempt  bool  // may be preempted (tier and workspace)
	stopping bool
	stopped  bool // its desired state is Stopped
	running  bool
	victim   bool
	out      *policies.WorkspaceDecision // its entry in world.out
	held     int
	ref      schema.Ref
	spec     *schema.Workspace // nil: an orphan (allocations only)
	allocs   []*drivers.Alloc
}

// started is when w's latest allocation started.
func (w *work) started() time.Time {
	var t time.Time
	for _, a := range w.allocs {
		if a.StartedAt.After(t) {
			t = a.StartedAt
		}
	}
	return t
}

type project struct {
	idx    int // in world.projs
	name   string
	quota  int
	borrow int // < 0 unlimited
	held   int
	lowest int // the lowest priority running in it (admitAll)
}

type undo struct {
	g         *gpu
	owner     *work
	releasing bool
	taken     *work
	w         *work // a victim mark
	projHeld  int
}

// newWorld builds the world of in. It relies on the orders the input
// types promise: a Set's workspaces and projects sorted by name, a
// Snapshot's allocations by workspace (joined in one pass; other orders
// still join, more slowly).
func newWorld(in policies.Input) *world {
	wd := worlds.Get().(*world)
	wd.now, wd.hist = in.Now, in.History
	wd.placements = in.Scratch.Placements()
	wd.roomGen = -1
	specs := in.Specs
	if specs == nil {
		specs = &schema.Set{Policy: schema.DefaultPolicy()}
	}
	wd.specs = specs
	pol := specs.Policy.Spec.Preemption
	if pol.Enabled {
		wd.maxVictims = pol.MaxVictims
	}
	snap := in.Snapshot
	if snap == nil {
		snap = &drivers.Snapshot{}
	}

	// 1. Nodes, as device groups, and their usable GPUs, in one array.
	wd.groups(snap)

	// 2. Projects, as specs.Projects.
	wd.projs = resize(wd.projs, len(specs.Projects))
	for i := range specs.Projects {
		p := &specs.Projects[i]
		wd.projs[i] = project{idx: i, name: p.Meta.Name, quota: p.Spec.Quota.GPUs, borrow: p.Spec.BorrowLimit.GPUs}
	}

	// 3. Which workspace each allocation belongs to: one of the specs
	// (by index), or an orphan the specs no longer list.
	find := finder(specs.Workspaces)
	wd.owners = resize(wd.owners, len(snap.Allocs))
	owners := wd.owners // specs index; -1-k: orphan k
	var orphanRefs []schema.Ref
	for ai := range snap.Allocs {
		ref := snap.Allocs[ai].Workspace
		i := find(ref)
		if i < 0 {
			// An orphan's allocations are consecutive (sorted by workspace).
			k := len(orphanRefs) - 1
			if k < 0 || orphanRefs[k] != ref {
				k = len(orphanRefs)
				orphanRefs = append(orphanRefs, ref)
			}
			i = -1 - k
		}
		owners[ai] = i
	}
	// Orphans by Ref; orphan[k] is orphan k's place in that order.
	order := make([]int, len(orphanRefs))
	for k := range order {
		order[k] = k
	}
	sort.Slice(order, func(a, b int) bool { return orphanRefs[order[a]].Less(orphanRefs[order[b]]) })
	orphan := make([]int, len(orphanRefs))
	for place, k := range order {
		orphan[k] = place
	}

	// 4. The workspaces, each with its entry in the decision: specs
	// order is Ref order, and each orphan goes where a binary search
	// among the specs puts it.
	n := len(specs.Workspaces)
	wd.ws = resize(wd.ws, n+len(orphanRefs))
	wd.out = in.Scratch.Workspaces(len(wd.ws), len(wd.ws))
	o := 0
	next := 0 // the next orphan in Ref order
	bind := func(w *work, ref schema.Ref) {
		w.ref = ref
		w.out = &wd.out[o]
		w.out.Ref = ref
		o++
	}
	orphanAt := make([]int, len(order)) // specs before each orphan in Ref order
	for place, k := range order {
		orphanAt[place] = sort.Search(n, func(i int) bool { return !specs.Workspaces[i].Ref().Less(orphanRefs[k]) })
	}
	var lastProj *project
	var lastTier *schema.PriorityTier
	// The tiers workspaces name, as looked up: a set has few tiers and
	// many workspaces, and comparing a name with the few seen costs less
	// than a search of the set's tiers each time.
	type tierAt struct {
		name string
		tier *schema.PriorityTier
	}
	var tiersSeen [8]tierAt
	seen := tiersSeen[:0]
	tierNamed := func(name string) *schema.PriorityTier {
		for _, s := range seen {
			if s.name == name {
				return s.tier
			}
		}
		t := specs.Tier(name)
		if len(seen) < cap(seen) {
			seen = append(seen, tierAt{name, t})
		}
		return t
	}
	for i := range specs.Workspaces {
		for next < len(order) && orphanAt[next] <= i {
			bind(&wd.ws[n+next], orphanRefs[order[next]])
			next++
		}
		sw := &specs.Workspaces[i]
		w := &wd.ws[i]
		bind(w, sw.Ref())
		w.spec = sw
		w.stopped = sw.Spec.State == schema.DesiredStopped
		w.idx = i
		w.gpus = sw.Spec.Resources.GPUs
		w.replicas = max(sw.Spec.Replicas, 1)
		if r := &sw.Spec.Resources; r.GPUKind != "" || r.GPUModel != "" {
			w.cls = wd.kinds.class(r.GPUKind, r.GPUModel)
		} else if len(r.GPUKinds) > 0 {
			w.cls = wd.kinds.class(r.GPUKinds[0], "") // its first choice alone
		}
		if i == 0 || w.ref.Project != specs.Workspaces[i-1].Meta.Project {
			// Workspaces come by project: look each project up once.
			lastProj, lastTier = nil, nil
			if p := wd.projectIndex(w.ref.Project); p >= 0 {
				lastProj, lastTier = &wd.projs[p], specs.Tier(specs.Projects[p].Spec.Tier)
			}
		}
		w.proj = lastProj
		t := lastTier
		if sw.Spec.Tier != "" && lastProj != nil {
			t = tierNamed(sw.Spec.Tier) // a tier of its own
		}
		if t != nil {
			w.prio = t.Spec.Value
			w.canPre = t.Spec.CanPreempt
			w.preempt = t.Spec.Preemptible && sw.Spec.Preemptible
		}
	}
	for ; next < len(order); next++ {
		bind(&wd.ws[n+next], orphanRefs[order[next]])
	}
	wd.kinds.settle(specs)
	for k := range orphanRefs {
		w := &wd.ws[n+orphan[k]]
		w.idx = n + orphan[k]
		if p := wd.projectIndex(w.ref.Project); p >= 0 {
			w.proj = &wd.projs[p]
		}
	}

	// 5. Allocations: what each workspace holds, and where.
	wd.ptrs = resize(wd.ptrs, len(snap.Allocs))
	ptrs := wd.ptrs
	for ai := range snap.Allocs {
		a := &snap.Allocs[ai]
		ptrs[ai] = a
		var w *work
		if i := owners[ai]; i >= 0 {
			w = &wd.ws[i]
		} else {
			w = &wd.ws[n+orphan[-1-i]]
		}
		// A workspace's allocations are consecutive (sorted by
		// workspace): its list is a window of ptrs, grown in place;
		// otherwise a copy of its own.
		switch k := len(w.allocs); {
		case k == 0:
			w.allocs = ptrs[ai : ai+1 : ai+1]
		case k <= ai && &w.allocs[0] == &ptrs[ai-k]:
			w.allocs = ptrs[ai-k : ai+1 : ai+1]
		default:
			w.allocs = append(w.allocs[:k:k], a)
		}
		w.held += len(a.GPUs)
		wd.heldGPUs += len(a.GPUs)
		if a.Phase == drivers.AllocStopping {
			w.stopping = true
		}
		nd := wd.node(a.Node)
		if nd == nil {
			continue
		}
		// GPU IDs are unique on a node and usually listed in the node's
		// order: each search starts after the last match.
		at := 0
		for _, id := range a.GPUs {
			for range len(nd.all) {
				g := &nd.all[at]
				if at++; at == len(nd.all) {
					at = 0
				}
				if g.id == id {
					g.owner = w
					break
				}
			}
		}
	}

	// 6. Who runs, who leaves (its GPUs are being released).
	for i := range wd.ws {
		w := &wd.ws[i]
		if w.held == 0 {
			continue
		}
		leaving := w.stopping || w.spec == nil || w.stopped
		w.running = !leaving
		if w.running && w.proj != nil {
			w.proj.held += w.held
		}
	}
	for i := range wd.gpus {
		g := &wd.gpus[i]
		if o := g.owner; o != nil {
			g.releasing = !o.running
			g.movable = o.running && o.preempt && o.proj != nil
		}
		g.tally(+1)
	}
	return wd
}

// worlds keeps the memory of worlds done with (world.release): a
// decision touches megabytes that do not leave it, and getting them afresh
// (zeroed, then collected) costs about as much as the decision itself.
var worlds = sync.Pool{New: func() any { return new(world) }}

// resize returns s resliced to n elements, all zero: the pool keeps every
// element up to cap(s) zero (release).
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// release zeroes wd's scratch memory and gives it to the next world;
// wd must not be used afterwards. The decision (world.out and the
// placements cut from wd.placements) is not scratch: it is the caller's
// (in the Input's Scratch, when it lent one).
func (wd *world) release() {
	s := world{
		nodes:   clearAll(wd.nodes),
		gpus:    clearAll(wd.gpus),
		kinds:   wd.kinds.clear(),
		ws:      clearAll(wd.ws),
		projs:   clearAll(wd.projs),
		journal: clearAll(wd.journal),
		owners:  clearAll(wd.owners),
		ptrs:    clearAll(wd.ptrs),
		queue:   clearAll(wd.queue),
		ordered: clearAll(wd.ordered),
		rest:    clearAll(wd.rest),
		failed:  wd.failed,
		nodeAt:  wd.nodeAt,
	}
	clear(s.failed)
	*wd = s
	worlds.Put(wd)
}

// clearAll zeroes s and returns it empty.
func clearAll[T any](s []T) []T {
	clear(s)
	return s[:0]
}

// projectIndex returns the index of the project named name in
// specs.Projects (sorted by name), or -1.
func (wd *world) projectIndex(name string) int {
	ps := wd.specs.Projects
	i := sort.Search(len(ps), func(i int) bool { return ps[i].Meta.Name >= name })
	if i < len(ps) && ps[i].Meta.Name == name {
		return i
	}
	return -1
}

// node returns the node named name (its first group), or nil: where an earlier lookup
// found that name, when a node of that name is still there (clusters
// rarely change), else by binary search (a Snapshot's nodes are sorted
// by name), else, for a snapshot that is not sorted, by a linear one.
func (wd *world) node(name string) *node {
	if i, ok := wd.nodeAt[name]; ok && i < len(wd.nodes) && wd.nodes[i].name == name {
		return &wd.nodes[i]
	}
	lo, hi := 0, len(wd.nodes)
	for lo < hi {
		if m := int(uint(lo+hi) >> 1); wd.nodes[m].name < name {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == len(wd.nodes) || wd.nodes[lo].name != name {
		lo = slices.IndexFunc(wd.nodes, func(nd node) bool { return nd.name == name })
		if lo < 0 {
			return nil
		}
	}
	if wd.nodeAt == nil || len(wd.nodeAt) > 2*len(wd.nodes)+64 {
		wd.nodeAt = map[string]int{} // new, or full of names long gone
	}
	wd.nodeAt[name] = lo
	return &wd.nodes[lo]
}

// settle gives every workspace that holds GPUs or is not wanted its
// verdict, and returns the queue: the workspaces that want to run and hold
// nothing, in specs order, each with the time it was queued.
func (wd *world) settle() []*work {
	queue := resize(wd.queue, len(wd.ws))[:0]
	wd.placements.Grow(len(wd.ptrs), wd.heldGPUs)
	for i := range wd.ws {
		w := &wd.ws[i]
		switch {
		case w.spec == nil:
			w.out.Verdict = policies.VerdictStop
			w.out.Placements = wd.placements.Of(w.allocs)
			w.out.Reason = policies.Reason{Kind: policies.ReasonStopped, Message: "removed: the specs no longer list it"}
		case w.stopped:
			w.out.Verdict = policies.VerdictStop
			w.out.Placements = wd.placements.Of(w.allocs)
			w.out.Reason = policies.Reason{Kind: policies.ReasonStopped, Message: "stopped: its desired state is Stopped"}
		case w.stopping:
			w.out.Verdict = policies.VerdictPreempt
			w.out.Placements = wd.placements.Of(w.allocs)
			w.out.Reason = policies.Reason{Kind: policies.ReasonPreempted, Message: "stopping; it queues again once its GPUs are free"}
		case w.running:
			w.out.Verdict = policies.VerdictRun
			w.out.Placements = wd.placements.Of(w.allocs)
		case w.proj == nil:
			w.out.Verdict = policies.VerdictWait
			w.out.Reason = policies.Reason{Kind: policies.ReasonQuota, Message: "quota: its project does not exist"}
		default:
			w.queued = wd.now
			if wd.hist != nil {
				if t, ok := wd.hist.QueuedSince[w.ref]; ok && t.Before(wd.now) {
					w.queued = t
				}
			}
			queue = append(queue, w)
		}
	}
	wd.queue = queue
	return queue
}

// decision returns the verdicts, sorted by Ref: newWorld laid world.out
// out in that order.
func (wd *world) decision() policies.Decision {
	return policies.Decision{Now: wd.now, Workspaces: wd.out}
}

// avail counts the GPUs of nd a placement may take: free ones and ones
// being released, not yet taken by this decision.
func (nd *node) avail() (free, releasing int) {
	return nd.free, nd.releasing
}

// room returns the most GPUs one node has free or being released (what
// pickNode counts), recomputed when gen has changed. Between placement
// attempts gen only grows (a failed one restores it with the GPUs), so
// one value of gen is one state of the GPUs.
func (wd *world) room() int {
	if wd.roomGen != wd.gen {
		wd.roomAt, wd.roomGen = 0, wd.gen
		for i := range wd.nodes {
			wd.roomAt = max(wd.roomAt, wd.nodes[i].free+wd.nodes[i].releasing)
		}
	}
	return wd.roomAt
}

// fit is how a node is chosen among those where a replica fits.
type fit int

const (
	firstFit fit = iota // the first node in name order
	bestFit             // the node with the fewest GPUs left over (bin-packing)
)

// pickNode returns the node (a group of it) a replica of w goes on,
// counting GPUs being released only when useReleasing, or nil.
func (wd *world) pickNode(w *work, how fit, useReleasing bool) *node {
	n := w.gpus
	var best *node
	bestLeft := 0
	for i := range wd.nodes {
		nd := &wd.nodes[i]
		if wd.kinds.mixed && !wd.kinds.allows(w.cls, nd.model) {
			continue
		}
		f, r := nd.avail()
		a := f
		if useReleasing {
			a += r
		}
		if a < n {
			continue
		}
		if how == firstFit {
			return nd
		}
		if best == nil || a-n < bestLeft {
			best, bestLeft = nd, a-n
		}
	}
	return best
}

// take places one replica of w on nd: free GPUs first (by index), then
// GPUs being released; waitFor collects the workspaces those belong to
// (a few), once each.
func (wd *world) take(w *work, r int, nd *node, waitFor *[]*work) drivers.Placement {
	pl := drivers.Placement{Replica: r, Node: nd.name}
	need := w.gpus
	for pass := 0; pass < 2 && need > 0; pass++ {
		for i := range nd.gpus {
			g := &nd.gpus[i]
			if need == 0 {
				break
			}
			if g.taken != nil || (pass == 0 && g.owner != nil) || (pass == 1 && (g.owner == nil || !g.releasing)) {
				continue
			}
			wd.journal = append(wd.journal, undo{g: g, owner: g.owner, releasing: g.releasing, taken: g.taken})
			g.tally(-1)
			g.taken = w
			g.tally(+1)
			if g.owner != nil && !slices.Contains(*waitFor, g.owner) {
				*waitFor = append(*waitFor, g.owner)
			}
			pl.GPUs = append(pl.GPUs, g.id)
			need--
		}
	}
	sort.Strings(pl.GPUs)
	wd.gen++
	return pl
}

// victimize marks v preempted: its GPUs are being released.
func (wd *world) victimize(v *work) {
	wd.journal = append(wd.journal, undo{w: v, projHeld: v.proj.held})
	v.victim = true
	v.proj.held -= v.held
	for i := range wd.gpus {
		g := &wd.gpus[i]
		if g.owner == v && !g.releasing {
			wd.journal = append(wd.journal, undo{g: g, owner: g.owner, releasing: g.releasing, taken: g.taken})
			g.tally(-1)
			g.releasing = true
			g.tally(+1)
		}
	}
	wd.gen++
}

func (wd *world) rollback() {
	for i := len(wd.journal) - 1; i >= 0; i-- {
		u := wd.journal[i]
		if u.g != nil {
			u.g.tally(-1)
			u.g.owner, u.g.releasing, u.g.taken = u.owner, u.releasing, u.taken
			u.g.tally(+1)
			continue
		}
		u.w.victim = false
		u.w.proj.held = u.projHeld
	}
	wd.journal = wd.journal[:0]
}

// right decides whether preemptor w may take victim v's GPUs.
type right func(w, v *work) bool

// victimOrder orders candidate victims, preferred first.
type victimOrder func(a, b *work) bool

// preemptNode finds, on nd, the victims (in order, greedily) that make
// room for one replica of w, or ok false.
func (wd *world) preemptNode(w *work, nd *node, may right, order victimOrder, budget int) (victims []*work, ok bool) {
	f, r := nd.avail()
	have := f + r
	if have >= w.gpus {
		return nil, true
	}
	// A node holds few workspaces: slices, not maps.
	type cand struct {
		w     *work
		count int // GPUs on this node; -1: no right over it
	}
	var seen [16]cand
	cs := seen[:0]
	for i := range nd.gpus {
		g := &nd.gpus[i]
		if !g.movable || g.taken != nil || g.releasing {
			continue
		}
		o := g.owner
		if o.victim {
			continue
		}
		k := -1
		for i := range cs {
			if cs[i].w == o {
				k = i
				break
			}
		}
		if k < 0 {
			c := cand{w: o}
			if !may(w, o) {
				c.count = -1
			}
			cs = append(cs, c)
			k = len(cs) - 1
		}
		if cs[k].count >= 0 {
			cs[k].count++
		}
	}
	cands := cs[:0] // those it may take, in place
	for _, c := range cs {
		if c.count > 0 {
			cands = append(cands, c)
		}
	}
	if total := have + func() int {
		n := 0
		for _, c := range cands {
			n += c.count
		}
		return n
	}(); total < w.gpus {
		return nil, false // not even all of them would make room
	}
	// order breaks ties by Ref: any sort gives the same order.
	slices.SortFunc(cands, func(a, b cand) int {
		switch {
		case order(a.w, b.w):
			return -1
		case order(b.w, a.w):
			return 1
		}
		return 0
	})
	for _, c := range cands {
		if have >= w.gpus || len(victims) >= budget {
			break
		}
		victims = append(victims, c.w)
		have += c.count
	}
	return victims, have >= w.gpus
}

// place places every replica of w: on free GPUs by how when it can, else
// (when may is not nil) by preempting on the node whose victims are
// cheapest (ties: the first node). It commits and returns true, or rolls back and returns false.
func (wd *world) place(w *work, how fit, may right, order victimOrder, cheaper func(a, b []*work) bool) bool {
	wd.journal = wd.journal[:0]
	gen := wd.gen
	var waitFor []*work
	var pls []drivers.Placement
	var victims []*work
	budget := wd.maxVictims
	for r := 0; r < w.replicas; r++ {
		nd := wd.pickNode(w, how, false)
		if nd == nil {
			nd = wd.pickNode(w, how, true)
		}
		if nd == nil && may != nil && budget > 0 {
			var best []*work
			for i := range wd.nodes {
				cand := &wd.nodes[i]
				if wd.kinds.mixed && !wd.kinds.allows(w.cls, cand.model) {
					continue
				}
				vs, ok := wd.preemptNode(w, cand, may, order, budget)
				if !ok {
					continue
				}
				if nd == nil || cheaper(vs, best) {
					nd, best = cand, vs
				}
			}
			for _, v := range best {
				wd.victimize(v)
				victims = append(victims, v)
			}
			budget -= len(best)
		}
		if nd == nil {
			wd.rollback()
			wd.gen = gen // nothing changed: failures stay memoized
			return false
		}
		pls = append(pls, wd.take(w, r, nd, &waitFor))
	}
	wd.journal = wd.journal[:0]
	w.decided = true
	w.out.Verdict = policies.VerdictStart
	w.out.Placements = pls
	w.out.Reason = policies.Reason{Message: "starts on free GPUs"}
	if w.proj != nil {
		w.proj.held += w.gpus * w.replicas
	}
	for _, v := range waitFor {
		w.out.Preempts = append(w.out.Preempts, v.ref)
	}
	slices.SortFunc(w.out.Preempts, schema.Ref.Compare)
	if len(w.out.Preempts) > 0 {
		w.out.Reason.Message = "starts once the GPUs it takes over are released"
	}
	for _, v := range victims {
		by := w.ref
		v.out.Verdict = policies.VerdictPreempt
		v.out.PreemptedBy = &by
		v.out.Reason = policies.Reason{Kind: policies.ReasonPreempted, Message: "preempted by " + w.ref.String()}
		w.out.Reason.Message = "starts after preempting"
	}
	return true
}

func (wd *world) wait(w *work, r policies.Reason) {
	w.decided = true
	w.out.Verdict = policies.VerdictWait
	w.out.Reason = r
}

var (
	reasonCapacity = policies.Reason{Kind: policies.ReasonCapacity, Message: "capacity: no node has the free GPUs it needs"}
	reasonQuota    = policies.Reason{Kind: policies.ReasonQuota, Message: "quota: its project is at its quota plus borrow limit"}
	reasonFIFO     = policies.Reason{Kind: policies.ReasonQueue, Message: "queue: behind the head of the FIFO queue, which does not fit"}
)

// usable reports whether w could ever fit the cluster: enough usable GPUs
// of its kind on enough nodes (groups).
func (wd *world) usable(w *work) bool {
	fits := 0
	for i := range wd.nodes {
		nd := &wd.nodes[i]
		if wd.kinds.mixed && !wd.kinds.allows(w.cls, nd.model) {
			continue
		}
		if len(nd.gpus) >= w.gpus {
			fits++
		}
	}
	return fits >= w.replicas || (w.gpus == 0)
}

// finder returns a lookup from Ref to its index in ws (sorted by Ref), or
// -1. Lookups in ascending Ref order (a snapshot's allocations) search
// forward from the last one, galloping, so they cost O(log gap) each;
// a lookup that goes back starts over.
func finder(ws []schema.Workspace) func(schema.Ref) int {
	i := 0 // ws[:i] are all before the last Ref looked up
	return func(ref schema.Ref) int {
		if i > 0 && !ws[i-1].Ref().Less(ref) {
			i = 0
		}
		lo, hi := i, i
		for step := 1; hi < len(ws) && ws[hi].Ref().Less(ref); step *= 2 {
			lo, hi = hi+1, hi+step
		}
		hi = min(hi, len(ws))
		i = lo + sort.Search(hi-lo, func(k int) bool { return !ws[lo+k].Ref().Less(ref) })
		if i < len(ws) && ws[i].Ref() == ref {
			return i
		}
		return -1
	}
}
