package baseline

import (
	"sort"
	"time"

	"github.com/berth-dev/berth/policies"
	"github.com/berth-dev/berth/reconcile/state"
	"github.com/berth-dev/berth/schema"
)

// world is one decision's working copy of the cluster and the workloads.
// It is built from the input and never shares mutable state with it.
type world struct {
	now   time.Time
	nodes []*node
	ws    []*work // specs order (by Ref), then orphans by Ref
	projs map[string]*project
	// gen changes whenever a GPU changes hands, so memoized failures are
	// recomputed only when they could differ.
	gen     int
	journal []undo
	// preempt: the policy preempts at all (and with how many victims at most).
	maxVictims int
}

type node struct {
	name string
	gpus []*gpu // by index
}

// gpu is one usable GPU (healthy, on a ready, eligible node).
type gpu struct {
	id        string
	node      *node
	owner     *work // nil: free
	releasing bool  // its owner is stopping, or a victim of this decision
	taken     *work // tentatively placed by this decision
}

type work struct {
	ref      schema.Ref
	spec     *schema.Workspace
	proj     *project
	prio     int
	canPre   bool // its tier may preempt
	preempt  bool // may be preempted (tier and workspace)
	gpus     int
	replicas int
	allocs   []*state.Alloc
	held     int
	stopping bool
	running  bool
	started  time.Time
	queued   time.Time
	victim   bool
	fits     bool // Quota: inside its project's quota when the cycle began
	decided  bool // has its verdict
	out      policies.WorkspaceDecision
}

type project struct {
	name   string
	quota  int
	borrow int // < 0 unlimited
	held   int
}

type undo struct {
	g         *gpu
	owner     *work
	releasing bool
	taken     *work
	w         *work // a victim mark
	projHeld  int
}

func newWorld(in policies.Input) *world {
	wd := &world{now: in.Now, projs: map[string]*project{}}
	specs := in.Specs
	if specs == nil {
		specs = &schema.Set{Policy: schema.DefaultPolicy()}
	}
	pol := specs.Policy.Spec.Preemption
	if pol.Enabled {
		wd.maxVictims = pol.MaxVictims
	}
	snap := in.Snapshot
	if snap == nil {
		snap = &state.Snapshot{}
	}
	nodeIdx := make(map[string]int, len(snap.Nodes))
	var all []gpu
	for _, n := range snap.Nodes {
		if n.Ready && n.Eligible {
			for _, g := range n.GPUs {
				if g.Healthy {
					all = append(all, gpu{id: g.ID})
				}
			}
		}
	}
	nodes := make([]node, len(snap.Nodes))
	k := 0
	for i, n := range snap.Nodes {
		nd := &nodes[i]
		nd.name = n.Name
		nodeIdx[n.Name] = i
		if n.Ready && n.Eligible {
			for _, g := range n.GPUs {
				if g.Healthy {
					all[k].node = nd
					nd.gpus = append(nd.gpus, &all[k])
					k++
				}
			}
		}
		wd.nodes = append(wd.nodes, nd)
	}
	tiers := map[string]*schema.PriorityTier{}
	for i := range specs.Tiers {
		tiers[specs.Tiers[i].Meta.Name] = &specs.Tiers[i]
	}
	for i := range specs.Projects {
		p := &specs.Projects[i]
		wd.projs[p.Meta.Name] = &project{name: p.Meta.Name, quota: p.Spec.Quota.GPUs, borrow: p.Spec.BorrowLimit.GPUs}
	}
	works := make([]work, len(specs.Workspaces))
	var lastProj *project
	var lastTier *schema.PriorityTier
	for i := range specs.Workspaces {
		sw := &specs.Workspaces[i]
		w := &works[i]
		*w = work{ref: sw.Ref(), spec: sw, gpus: sw.Spec.Resources.GPUs, replicas: max(sw.Spec.Replicas, 1)}
		w.out.Ref = w.ref
		if i == 0 || w.ref.Project != specs.Workspaces[i-1].Meta.Project {
			// Workspaces come by project: look each project up once.
			lastProj, lastTier = nil, nil
			if p := specs.Project(w.ref.Project); p != nil {
				lastProj, lastTier = wd.projs[p.Meta.Name], tiers[p.Spec.Tier]
			}
		}
		w.proj = lastProj
		if t := lastTier; t != nil {
			w.prio = t.Spec.Value
			w.canPre = t.Spec.CanPreempt
			w.preempt = t.Spec.Preemptible && sw.Spec.Preemptible
		}
		wd.ws = append(wd.ws, w)
	}
	// Allocations (sorted by workspace) join the workspaces (sorted by
	// Ref) in one pass when both are sorted, else through a map.
	find := wd.finder(specs)
	var orphans []*work
	for ai := range snap.Allocs {
		a := &snap.Allocs[ai]
		w := find(a.Workspace)
		if w == nil {
			if n := len(orphans); n > 0 && orphans[n-1].ref == a.Workspace {
				w = orphans[n-1]
			} else {
				w = &work{ref: a.Workspace, proj: wd.projs[a.Workspace.Project]}
				w.out.Ref = w.ref
				orphans = append(orphans, w)
			}
		}
		w.allocs = append(w.allocs, a)
		w.held += len(a.GPUs)
		if a.Phase == state.AllocStopping {
			w.stopping = true
		}
		if a.StartedAt.After(w.started) {
			w.started = a.StartedAt
		}
		ni, ok := nodeIdx[a.Node]
		if !ok {
			continue
		}
		for _, id := range a.GPUs {
			for _, g := range nodes[ni].gpus {
				if g.id == id {
					g.owner = w
					break
				}
			}
		}
	}
	sort.Slice(orphans, func(i, j int) bool { return orphans[i].ref.Less(orphans[j].ref) })
	wd.ws = append(wd.ws, orphans...)
	var hist state.History
	if in.History != nil {
		hist = *in.History
	}
	for _, w := range wd.ws {
		w.queued = in.Now
		if t, ok := hist.QueuedSince[w.ref]; ok && t.Before(in.Now) {
			w.queued = t
		}
		if w.held == 0 {
			continue
		}
		leaving := w.stopping || w.spec == nil || w.spec.Spec.State == schema.DesiredStopped
		w.running = !leaving
		if leaving {
			for _, nd := range wd.nodes {
				for _, g := range nd.gpus {
					if g.owner == w {
						g.releasing = true
					}
				}
			}
		}
		if w.running && w.proj != nil {
			w.proj.held += w.held
		}
	}
	return wd
}

// settle gives every workspace that holds GPUs or is not wanted its
// verdict, and returns the queue: the workspaces that want to run and hold
// nothing, in specs order.
func (wd *world) settle() []*work {
	var queue []*work
	for _, w := range wd.ws {
		switch {
		case w.spec == nil:
			w.out.Verdict = policies.VerdictStop
			w.out.Placements = policies.PlacementsOf(w.allocs)
			w.out.Reason = policies.Reason{Kind: policies.ReasonStopped, Message: "removed: the specs no longer list it"}
		case w.spec.Spec.State == schema.DesiredStopped:
			w.out.Verdict = policies.VerdictStop
			w.out.Placements = policies.PlacementsOf(w.allocs)
			w.out.Reason = policies.Reason{Kind: policies.ReasonStopped, Message: "stopped: its desired state is Stopped"}
		case w.stopping:
			w.out.Verdict = policies.VerdictPreempt
			w.out.Placements = policies.PlacementsOf(w.allocs)
			w.out.Reason = policies.Reason{Kind: policies.ReasonPreempted, Message: "stopping; it queues again once its GPUs are free"}
		case w.running:
			w.out.Verdict = policies.VerdictRun
			w.out.Placements = policies.PlacementsOf(w.allocs)
		case w.proj == nil:
			w.out.Verdict = policies.VerdictWait
			w.out.Reason = policies.Reason{Kind: policies.ReasonQuota, Message: "quota: its project does not exist"}
		default:
			queue = append(queue, w)
		}
	}
	return queue
}

// decision collects the verdicts, sorted by Ref.
func (wd *world) decision() policies.Decision {
	out := policies.Decision{Now: wd.now, Workspaces: make([]policies.WorkspaceDecision, 0, len(wd.ws))}
	for _, w := range wd.ws {
		out.Workspaces = append(out.Workspaces, w.out)
	}
	if !sort.SliceIsSorted(out.Workspaces, func(i, j int) bool { return out.Workspaces[i].Ref.Less(out.Workspaces[j].Ref) }) {
		sort.Slice(out.Workspaces, func(i, j int) bool { return out.Workspaces[i].Ref.Less(out.Workspaces[j].Ref) })
	}
	return out
}

// avail counts the GPUs of nd a placement may take: free ones and ones
// being released, not yet taken by this decision.
func (nd *node) avail() (free, releasing int) {
	for _, g := range nd.gpus {
		if g.taken != nil {
			continue
		}
		switch {
		case g.owner == nil:
			free++
		case g.releasing:
			releasing++
		}
	}
	return free, releasing
}

// fit is how a node is chosen among those where a replica fits.
type fit int

const (
	firstFit fit = iota // the first node in name order
	bestFit             // the node with the fewest GPUs left over (bin-packing)
)

// pickNode returns the node a replica of n GPUs goes on, counting GPUs
// being released only when useReleasing, or nil.
func (wd *world) pickNode(n int, how fit, useReleasing bool) *node {
	var best *node
	bestLeft := 0
	for _, nd := range wd.nodes {
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
// GPUs being released; waitFor collects the workspaces those belong to.
func (wd *world) take(w *work, r int, nd *node, waitFor map[*work]bool) state.Placement {
	pl := state.Placement{Replica: r, Node: nd.name}
	need := w.gpus
	for pass := 0; pass < 2 && need > 0; pass++ {
		for _, g := range nd.gpus {
			if need == 0 {
				break
			}
			if g.taken != nil || (pass == 0 && g.owner != nil) || (pass == 1 && (g.owner == nil || !g.releasing)) {
				continue
			}
			wd.journal = append(wd.journal, undo{g: g, owner: g.owner, releasing: g.releasing, taken: g.taken})
			g.taken = w
			if g.owner != nil {
				waitFor[g.owner] = true
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
	for _, nd := range wd.nodes {
		for _, g := range nd.gpus {
			if g.owner == v && !g.releasing {
				wd.journal = append(wd.journal, undo{g: g, owner: g.owner, releasing: g.releasing, taken: g.taken})
				g.releasing = true
			}
		}
	}
	wd.gen++
}

func (wd *world) rollback() {
	for i := len(wd.journal) - 1; i >= 0; i-- {
		u := wd.journal[i]
		if u.g != nil {
			u.g.owner, u.g.releasing, u.g.taken = u.owner, u.releasing, u.taken
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
	for _, g := range nd.gpus {
		o := g.owner
		if o == nil || g.taken != nil || g.releasing || o.victim || !o.running || !o.preempt || o.proj == nil {
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
	var cands []cand
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
	sort.Slice(cands, func(i, j int) bool { return order(cands[i].w, cands[j].w) })
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
	waitFor := map[*work]bool{}
	var pls []state.Placement
	var victims []*work
	budget := wd.maxVictims
	for r := 0; r < w.replicas; r++ {
		nd := wd.pickNode(w.gpus, how, false)
		if nd == nil {
			nd = wd.pickNode(w.gpus, how, true)
		}
		if nd == nil && may != nil && budget > 0 {
			var best []*work
			for _, cand := range wd.nodes {
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
		pls = append(pls, wd.take(w, r, nd, waitFor))
	}
	wd.journal = wd.journal[:0]
	w.decided = true
	w.out.Verdict = policies.VerdictStart
	w.out.Placements = pls
	w.out.Reason = policies.Reason{Message: "starts on free GPUs"}
	if w.proj != nil {
		w.proj.held += w.gpus * w.replicas
	}
	for v := range waitFor {
		w.out.Preempts = append(w.out.Preempts, v.ref)
	}
	sort.Slice(w.out.Preempts, func(i, j int) bool { return w.out.Preempts[i].Less(w.out.Preempts[j]) })
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
// on enough nodes.
func (wd *world) usable(w *work) bool {
	fits := 0
	for _, nd := range wd.nodes {
		if len(nd.gpus) >= w.gpus {
			fits++
		}
	}
	return fits >= w.replicas || (w.gpus == 0)
}

// finder returns a lookup from Ref to the world's workspace in specs
// order. Lookups in ascending Ref order (a snapshot's allocations) cost
// one pass over the workspaces in all.
func (wd *world) finder(specs *schema.Set) func(schema.Ref) *work {
	i := 0
	return func(ref schema.Ref) *work {
		n := len(specs.Workspaces)
		switch {
		case i < n && specs.Workspaces[i].Ref() == ref:
		case i < n && specs.Workspaces[i].Ref().Less(ref):
			// Jump ahead by binary search over what is left.
			i += sort.Search(n-i, func(k int) bool { return !specs.Workspaces[i+k].Ref().Less(ref) })
		default:
			i = sort.Search(n, func(k int) bool { return !specs.Workspaces[k].Ref().Less(ref) })
		}
		if i < n && specs.Workspaces[i].Ref() == ref {
			return wd.ws[i]
		}
		return nil
	}
}
