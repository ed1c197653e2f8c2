package plan

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/policies"
	"github.com/berth-dev/berth/schema"
)

// Plan is the ordered list of actions that moves the cluster toward a
// decision: stops, preemptions, waits for victims to be gone, starts,
// updates; within each kind by workspace. A Wait guards the Start of the
// same workspace: that start runs only once the victims are gone (in a
// later cycle, from a fresh snapshot).
type Plan struct {
	Revision string           `json:"revision"`
	Actions  []drivers.Action `json:"actions"`
}

// Empty reports whether the plan does nothing.
func (p Plan) Empty() bool { return len(p.Actions) == 0 }

// planOrder is where each kind of action goes in a plan.
var planOrder = map[drivers.ActionKind]int{
	drivers.ActionStop:    0,
	drivers.ActionPreempt: 1,
	drivers.ActionWait:    2,
	drivers.ActionStart:   3,
	drivers.ActionUpdate:  4,
}

// New diffs decision d against snapshot snap. It is a pure function of
// its arguments and mutates none of them; set is the revision d was made
// from. Actions point into set (read-only).
//
// 1. Workspaces the decision stops or preempts and that still hold GPUs
// (not already stopping) get a Stop or Preempt.
// 2. A workspace to start gets a Start at the decision's placements,
// preceded by a Wait while anything still holds those GPUs (its victims,
// or itself, stopping).
// 3. A workspace that keeps running gets an Update only when what its
// task sees changed (its drivers.Fingerprint differs from the one its
// allocations run, or its job drifted: Restarts, the task restarts) or
// its tier's priority changed (in place, nothing restarts). A new
// revision that changes neither updates nothing.
// 4. Allocations the decision does not mention are stopped.
// 5. A workspace whose run ended on its own (Snapshot.Exits) and that the
// specs now want stopped or no longer list gets a Stop, which clears the
// ended run: set back to Running, it runs again.
//
// set is the revision as written; d may come from StopFinished(set, …)
// (the loop's ends), so a finished workspace is not started again.
func New(set *schema.Set, snap *drivers.Snapshot, d policies.Decision) Plan {
	return NewWith(set, snap, d, Options{})
}

// Options tune New for a caller that knows more than a snapshot says.
// The zero Options is New's.
type Options struct {
	// Settled: every workspace holding allocations is in the decision
	// and runs set's spec of it at its tier's priority, and snap's
	// allocations are sorted as Snapshot says. New then checks no running
	// workspace for an Update (step 3) and stops no forgotten allocation
	// (step 4), and finds by binary search the allocations only of the
	// workspaces the decision stops, preempts or starts: a cycle costs
	// what it acts on, not what runs. The replay knows it (its specs and
	// priorities never change, and it decides every job that holds GPUs);
	// the loop does not (a new revision, drift, a workspace dropped from
	// the specs).
	Settled bool
}

// NewWith is New tuned by opt: the same plan wherever what opt says of
// the input is true.
func NewWith(set *schema.Set, snap *drivers.Snapshot, d policies.Decision, opt Options) Plan {
	// Drivers sort allocations by workspace and policies.Decide sorts its
	// decision: the plan walks the two together, and is made again from a
	// map of the allocations when the walk finds either out of order.
	if p, ok := newPlan(set, snap, d, &allocGroups{allocs: snap.Allocs, decided: d.Workspaces, search: opt.Settled}); ok {
		return p
	}
	p, _ := newPlan(set, snap, d, indexAllocs(snap.Allocs, d))
	return p
}

// newPlan is NewWith with groups finding the allocations; ok is false
// when the groups found the input out of order (the plan is then wrong).
func newPlan(set *schema.Set, snap *drivers.Snapshot, d policies.Decision, groups *allocGroups) (_ Plan, ok bool) {
	plan := Plan{Revision: set.Revision}
	var exited map[schema.Ref]bool // built when first needed
	for i := range d.Workspaces {
		wd := &d.Workspaces[i] // not copied: most of a long queue is skipped
		if groups.search && (wd.Verdict == policies.VerdictRun || wd.Verdict == policies.VerdictWait) {
			continue // settled: nothing to update, nothing to find
		}
		own := groups.of(i)
		if wd.Verdict == policies.VerdictWait {
			continue // most of a long queue
		}
		live := len(own) > 0 && !drivers.AllStopping(own)
		switch wd.Verdict {
		case policies.VerdictStop:
			if live {
				plan.Actions = append(plan.Actions, drivers.Action{Kind: drivers.ActionStop, Workspace: wd.Ref,
					Reason: orDefault(wd.Reason.Message, "the specs want it stopped"), Revision: set.Revision})
				continue
			}
			if len(own) > 0 || wantsRunning(set, wd.Ref) {
				continue
			}
			if exited == nil {
				exited = make(map[schema.Ref]bool, len(snap.Exits))
				for _, e := range snap.Exits {
					exited[e.Workspace] = true
				}
			}
			if exited[wd.Ref] {
				plan.Actions = append(plan.Actions, drivers.Action{Kind: drivers.ActionStop, Workspace: wd.Ref,
					Reason: "its run has ended; cleared so that it runs again when the specs want it running", Revision: set.Revision})
			}
		case policies.VerdictPreempt:
			if live {
				a := drivers.Action{Kind: drivers.ActionPreempt, Workspace: wd.Ref, Reason: wd.Reason.Message, Revision: set.Revision}
				if wd.PreemptedBy != nil {
					a.By = *wd.PreemptedBy
				}
				plan.Actions = append(plan.Actions, a)
			}
		case policies.VerdictStart:
			if live {
				continue // already started; the next decision says Run
			}
			victims := map[schema.Ref]bool{}
			for _, v := range wd.Preempts {
				if groups.holds(v) {
					victims[v] = true
				}
			}
			if len(own) > 0 {
				victims[wd.Ref] = true // itself, still stopping
			}
			for _, p := range wd.Placements {
				holders(snap.Allocs, p, victims)
			}
			if len(victims) > 0 {
				plan.Actions = append(plan.Actions, drivers.Action{Kind: drivers.ActionWait, Workspace: wd.Ref,
					Victims: schema.SortedRefs(victims), Reason: "the GPUs it needs are still held", Revision: set.Revision})
			}
			a := describe(set, wd.Ref, drivers.ActionStart)
			a.Placements = clonePlacements(wd.Placements)
			a.Reason = wd.Reason.Message
			plan.Actions = append(plan.Actions, a)
		case policies.VerdictRun:
			if !live {
				continue
			}
			spec := specOf(set, wd.Ref)
			if spec.w == nil {
				continue
			}
			// What runs now: an allocation that is stopping (replaced by a
			// job update) is on its way out.
			running := own
			if slices.ContainsFunc(own, func(al drivers.Alloc) bool { return al.Phase == drivers.AllocStopping }) {
				running = slices.DeleteFunc(slices.Clone(own), func(al drivers.Alloc) bool { return al.Phase == drivers.AllocStopping })
			}
			reason, restarts, ok := updateOf(running, spec.fp, spec.prio)
			if !ok {
				continue
			}
			a := describe(set, wd.Ref, drivers.ActionUpdate)
			for _, al := range running {
				a.Placements = append(a.Placements, drivers.Placement{Replica: al.Replica, Node: al.Node, GPUs: slices.Clone(al.GPUs)})
			}
			a.Reason, a.Restarts = reason, restarts
			plan.Actions = append(plan.Actions, a)
		}
	}
	// 4. Anything running that the decision forgot is stopped.
	for _, ref := range groups.orphans() {
		plan.Actions = append(plan.Actions, drivers.Action{Kind: drivers.ActionStop, Workspace: ref,
			Reason: "no longer in the specs", Revision: set.Revision})
	}
	if groups.unsorted {
		return Plan{}, false
	}
	sort.SliceStable(plan.Actions, func(i, j int) bool {
		a, b := plan.Actions[i], plan.Actions[j]
		if planOrder[a.Kind] != planOrder[b.Kind] {
			return planOrder[a.Kind] < planOrder[b.Kind]
		}
		return a.Workspace.Less(b.Workspace)
	})
	return plan, true
}

// seenSpec is what the update check needs of a workspace: where the set
// has it (nil: nowhere), its fingerprint and its tier's priority.
type seenSpec struct {
	w    *schema.Workspace
	fp   string
	prio int
}

// specOf returns the workspace ref of set, its fingerprint and its
// tier's priority.
func specOf(set *schema.Set, ref schema.Ref) seenSpec {
	w := set.Workspace(ref)
	if w == nil {
		return seenSpec{}
	}
	s := seenSpec{w: w, fp: drivers.Fingerprint(&w.Spec)}
	if t := set.TierFor(w); t != nil {
		s.prio = t.Spec.Value
	}
	return s
}

// allocGroups finds each decided workspace's allocations and the
// workspaces with allocations that the decision does not mention: by
// walking the allocations along the decision, both sorted by workspace,
// or (byRef set) from a map, for input in any order.
type allocGroups struct {
	allocs  []drivers.Alloc
	decided []policies.WorkspaceDecision
	// The walk: next is where the groups not yet reached begin; own
	// (allocs[lo:hi]) is the group of the workspace decided last.
	// unsorted: the walk found the allocations or the decision out of
	// order, and its answers are wrong.
	next, lo, hi int
	forgot       []schema.Ref
	unsorted     bool
	// search: find each group by binary search, in any order of calls,
	// and no orphans (Options.Settled).
	search bool
	// The map, and the workspaces decided.
	byRef map[schema.Ref][]drivers.Alloc
	refs  map[schema.Ref]bool
}

// indexAllocs returns the groups of allocs found from a map.
func indexAllocs(allocs []drivers.Alloc, d policies.Decision) *allocGroups {
	g := &allocGroups{allocs: allocs, decided: d.Workspaces, byRef: drivers.ByWorkspace(allocs), refs: make(map[schema.Ref]bool, len(d.Workspaces))}
	for _, wd := range d.Workspaces {
		g.refs[wd.Ref] = true
	}
	return g
}

// of returns the allocations of the i-th workspace of the decision;
// calls come in the decision's order.
func (g *allocGroups) of(i int) []drivers.Alloc {
	ref := g.decided[i].Ref
	if g.byRef != nil {
		return g.byRef[ref]
	}
	if g.search {
		return drivers.AllocsOf(g.allocs, ref)
	}
	if i > 0 {
		switch ref.Compare(g.decided[i-1].Ref) {
		case 0:
			return g.allocs[g.lo:g.hi:g.hi]
		case -1:
			g.unsorted = true
			return nil
		}
	}
	g.lo, g.hi = 0, 0
	for g.next < len(g.allocs) {
		switch g.allocs[g.next].Workspace.Compare(ref) {
		case 1:
			return nil
		case 0:
			// In order: the groups before it come before a workspace
			// decided before ref, or the one decided last.
			g.lo = g.next
			g.group()
			g.hi = g.next
			return g.allocs[g.lo:g.hi:g.hi]
		}
		g.pass()
	}
	return nil
}

// group moves the walk past the group of allocations at next (those of
// one workspace).
func (g *allocGroups) group() {
	ref := g.allocs[g.next].Workspace
	for g.next++; g.next < len(g.allocs) && g.allocs[g.next].Workspace == ref; g.next++ {
	}
}

// pass moves the walk past the group at next, which the decision does
// not mention, noting when it comes out of order: forgotten unless all
// stopping.
func (g *allocGroups) pass() {
	i := g.next
	if i > 0 && !g.allocs[i-1].Workspace.Less(g.allocs[i].Workspace) {
		g.unsorted = true
	}
	g.group()
	if !drivers.AllStopping(g.allocs[i:g.next]) {
		g.forgot = append(g.forgot, g.allocs[i].Workspace)
	}
}

// holds reports whether ref holds any allocation; any order of calls.
func (g *allocGroups) holds(ref schema.Ref) bool {
	if g.byRef != nil {
		return len(g.byRef[ref]) > 0
	}
	return len(drivers.AllocsOf(g.allocs, ref)) > 0
}

// orphans returns the workspaces holding allocations, not all stopping,
// that the decision does not mention. It ends the walk.
func (g *allocGroups) orphans() []schema.Ref {
	if g.search {
		return nil
	}
	if g.byRef == nil {
		for g.next < len(g.allocs) {
			g.pass()
		}
		return g.forgot
	}
	var out []schema.Ref
	for ref, own := range g.byRef {
		if !g.refs[ref] && !drivers.AllStopping(own) {
			out = append(out, ref)
		}
	}
	return out
}

// holders adds to victims the workspace holding each GPU of placement p:
// of the allocations on its node that list the GPU, the last in allocs.
func holders(allocs []drivers.Alloc, p drivers.Placement, victims map[schema.Ref]bool) {
	found := 0
	var seen []bool
	for k := len(allocs) - 1; k >= 0 && found < len(p.GPUs); k-- {
		a := &allocs[k]
		if a.Node != p.Node {
			continue
		}
		for _, g := range a.GPUs {
			i := slices.Index(p.GPUs, g)
			if i < 0 {
				continue
			}
			if seen == nil {
				seen = make([]bool, len(p.GPUs))
			}
			if !seen[i] {
				seen[i] = true
				found++
				victims[a.Workspace] = true
			}
		}
	}
}

// Waves splits p's actions into what one cycle sends, by index into
// p.Actions in plan order: first the stops and preemptions, then the
// starts and updates. A Wait is never sent (drivers never see it), and
// neither is the Start it guards: that start is held back (held, in plan
// order) until a later plan, made from a fresh snapshot, has no Wait for
// it. The loop's apply and the replay send plans by this one rule.
func (p Plan) Waves() (waves [2][]int, held []schema.Ref) {
	k := 0 // the Waits and the Starts each come in workspace order (New)
	for i, a := range p.Actions {
		if a.Kind == drivers.ActionStart {
			for k < len(held) && held[k].Less(a.Workspace) {
				k++
			}
		}
		switch {
		case a.Kind == drivers.ActionWait:
			held = append(held, a.Workspace)
		case a.Kind == drivers.ActionStart && k < len(held) && held[k] == a.Workspace:
		case a.Kind == drivers.ActionStop || a.Kind == drivers.ActionPreempt:
			waves[0] = append(waves[0], i)
		default:
			waves[1] = append(waves[1], i)
		}
	}
	return waves, held
}

// describe fills the spec pointers drivers render jobs from.
func describe(set *schema.Set, ref schema.Ref, kind drivers.ActionKind) drivers.Action {
	a := drivers.Action{Kind: kind, Workspace: ref, Revision: set.Revision, Spec: set.Workspace(ref), Project: set.Project(ref.Project)}
	if a.Spec != nil {
		a.Tier = set.TierFor(a.Spec)
	} else if a.Project != nil {
		a.Tier = set.Tier(a.Project.Spec.Tier)
	}
	return a
}

// updateOf says whether a running workspace needs an Update to match
// its spec's fingerprint fp and its tier's priority prio: its task
// restarts when any allocation runs another fingerprint or drifted; its
// priority changes in place. ok is false when nothing changes.
func updateOf(own []drivers.Alloc, fp string, prio int) (reason string, restarts, ok bool) {
	var drift string
	task, priority, from := false, false, 0
	for _, al := range own {
		if al.SpecHash != "" && al.SpecHash != fp {
			task = true // unknown (""): an older berth started it; not restarted for that alone
		}
		if al.Drift != "" && drift == "" {
			drift = al.Drift
		}
		if al.Priority != 0 && al.Priority != prio {
			priority, from = true, al.Priority // 0: the driver does not know
		}
	}
	switch {
	case drift != "":
		return "drift: " + drift + "; berth puts it back, which restarts its task", true, true
	case task:
		return "its task changed: restarts it where it runs", true, true
	case priority:
		return fmt.Sprintf("priority %d → %d, in place (nothing restarts)", from, prio), false, true
	}
	return "", false, false
}

// wantsRunning reports whether the specs list ref and want it running.
func wantsRunning(set *schema.Set, ref schema.Ref) bool {
	w := set.Workspace(ref)
	return w != nil && w.Spec.State == schema.DesiredRunning
}

// Ended returns the ended runs (Snapshot.Exits) of workspaces that the
// specs still want running with the spec that run had (the same
// fingerprint). A changed spec, or a Stopped → Running round trip in the
// specs (whose Stop clears the ended run), runs them again. It mutates
// nothing.
func Ended(set *schema.Set, snap *drivers.Snapshot) map[schema.Ref]drivers.Exit {
	var out map[schema.Ref]drivers.Exit
	for _, e := range snap.Exits {
		w := set.Workspace(e.Workspace)
		if w == nil || w.Spec.State != schema.DesiredRunning || e.SpecHash != drivers.Fingerprint(&w.Spec) {
			continue
		}
		if out == nil {
			out = map[schema.Ref]drivers.Exit{}
		}
		out[e.Workspace] = e
	}
	return out
}

// StopFinished returns set with the workspaces of done set Stopped: set
// itself when done is empty, else a copy that shares everything but the
// Workspaces slice; set is not mutated.
func StopFinished(set *schema.Set, done map[schema.Ref]drivers.Exit) *schema.Set {
	if len(done) == 0 {
		return set
	}
	c := *set
	c.Workspaces = slices.Clone(set.Workspaces)
	for i := range c.Workspaces {
		if _, ok := done[c.Workspaces[i].Ref()]; ok {
			c.Workspaces[i].Spec.State = schema.DesiredStopped
		}
	}
	return &c
}

func clonePlacements(ps []drivers.Placement) []drivers.Placement {
	out := make([]drivers.Placement, len(ps))
	for i, p := range ps {
		out[i] = p
		out[i].GPUs = slices.Clone(p.GPUs)
	}
	return out
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Text renders the plan for a person, one action a line.
func (p Plan) Text() string {
	if p.Empty() {
		return "nothing to do\n"
	}
	var b strings.Builder
	for _, a := range p.Actions {
		b.WriteString(ActionLine(a))
		b.WriteByte('\n')
	}
	return b.String()
}

// ActionLine renders one action as a line a person reads.
func ActionLine(a drivers.Action) string {
	line := fmt.Sprintf("%-8s %s", a.Kind, a.Workspace)
	switch a.Kind {
	case drivers.ActionStart, drivers.ActionUpdate:
		line += " on " + placementText(a.Placements)
	case drivers.ActionPreempt:
		if a.By != (schema.Ref{}) {
			line += " for " + a.By.String()
		}
	case drivers.ActionWait:
		names := make([]string, len(a.Victims))
		for i, v := range a.Victims {
			names[i] = v.String()
		}
		line += " until " + strings.Join(names, ", ") + " gone"
	}
	if a.Reason != "" && a.Kind != drivers.ActionWait {
		line += ": " + a.Reason
	}
	return line
}

func placementText(ps []drivers.Placement) string {
	var parts []string
	for _, p := range ps {
		parts = append(parts, fmt.Sprintf("%s [%s]", p.Node, strings.Join(drivers.ShortGPUs(p.GPUs), " ")))
	}
	return strings.Join(parts, ", ")
}
