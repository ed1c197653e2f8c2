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
	plan := Plan{Revision: set.Revision}
	groups := newAllocGroups(snap.Allocs, d)
	var exited map[schema.Ref]bool // built when first needed
	for _, wd := range d.Workspaces {
		own := groups.of(wd.Ref)
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
	sort.SliceStable(plan.Actions, func(i, j int) bool {
		a, b := plan.Actions[i], plan.Actions[j]
		if planOrder[a.Kind] != planOrder[b.Kind] {
			return planOrder[a.Kind] < planOrder[b.Kind]
		}
		return a.Workspace.Less(b.Workspace)
	})
	return plan
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
// workspaces with allocations that the decision does not mention. When
// the snapshot's allocations and the decision are both sorted by
// workspace (as drivers and policies.Decide give them), it walks the two
// together; otherwise it indexes the allocations in a map.
type allocGroups struct {
	allocs []drivers.Alloc
	// The walk: next is where the groups not yet reached begin; own is
	// the group of last, the workspace decided last (walked: any).
	next   int
	walked bool
	last   schema.Ref
	own    []drivers.Alloc
	forgot []schema.Ref
	// The map, where the input is not sorted.
	byRef   map[schema.Ref][]drivers.Alloc
	decided map[schema.Ref]bool
}

func newAllocGroups(allocs []drivers.Alloc, d policies.Decision) *allocGroups {
	g := &allocGroups{allocs: allocs}
	sorted := slices.IsSortedFunc(allocs, func(a, b drivers.Alloc) int { return a.Workspace.Compare(b.Workspace) }) &&
		slices.IsSortedFunc(d.Workspaces, func(a, b policies.WorkspaceDecision) int { return a.Ref.Compare(b.Ref) })
	if !sorted {
		g.byRef = drivers.ByWorkspace(allocs)
		g.decided = make(map[schema.Ref]bool, len(d.Workspaces))
		for _, wd := range d.Workspaces {
			g.decided[wd.Ref] = true
		}
	}
	return g
}

// of returns the allocations of ref, a workspace of the decision; calls
// come in the decision's order.
func (g *allocGroups) of(ref schema.Ref) []drivers.Alloc {
	if g.byRef != nil {
		return g.byRef[ref]
	}
	if g.walked && ref == g.last {
		return g.own
	}
	g.skipTo(func(r schema.Ref) bool { return r.Less(ref) })
	i := g.next
	for g.next < len(g.allocs) && g.allocs[g.next].Workspace == ref {
		g.next++
	}
	g.walked, g.last, g.own = true, ref, g.allocs[i:g.next:g.next]
	return g.own
}

// skipTo moves the walk past the groups whose workspace before reports
// true for, noting those not all stopping as forgotten.
func (g *allocGroups) skipTo(before func(schema.Ref) bool) {
	for g.next < len(g.allocs) && before(g.allocs[g.next].Workspace) {
		i := g.next
		for g.next < len(g.allocs) && g.allocs[g.next].Workspace == g.allocs[i].Workspace {
			g.next++
		}
		if !drivers.AllStopping(g.allocs[i:g.next]) {
			g.forgot = append(g.forgot, g.allocs[i].Workspace)
		}
	}
}

// holds reports whether ref holds any allocation; any order of calls.
func (g *allocGroups) holds(ref schema.Ref) bool {
	if g.byRef != nil {
		return len(g.byRef[ref]) > 0
	}
	_, found := slices.BinarySearchFunc(g.allocs, ref, func(a drivers.Alloc, r schema.Ref) int { return a.Workspace.Compare(r) })
	return found
}

// orphans returns the workspaces holding allocations, not all stopping,
// that the decision does not mention. It ends the walk.
func (g *allocGroups) orphans() []schema.Ref {
	if g.byRef == nil {
		g.skipTo(func(schema.Ref) bool { return true })
		return g.forgot
	}
	var out []schema.Ref
	for ref, own := range g.byRef {
		if !g.decided[ref] && !drivers.AllStopping(own) {
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
