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
	allocs := drivers.ByWorkspace(snap.Allocs)
	type gpu struct{ node, id string }
	holder := map[gpu]schema.Ref{}
	for _, a := range snap.Allocs {
		for _, g := range a.GPUs {
			holder[gpu{a.Node, g}] = a.Workspace
		}
	}
	exited := map[schema.Ref]bool{}
	for _, e := range snap.Exits {
		exited[e.Workspace] = true
	}
	decided := make(map[schema.Ref]bool, len(d.Workspaces))
	for _, wd := range d.Workspaces {
		decided[wd.Ref] = true
		own := allocs[wd.Ref]
		live := len(own) > 0 && !drivers.AllStopping(own)
		switch wd.Verdict {
		case policies.VerdictStop:
			if live {
				plan.Actions = append(plan.Actions, drivers.Action{Kind: drivers.ActionStop, Workspace: wd.Ref,
					Reason: orDefault(wd.Reason.Message, "the specs want it stopped"), Revision: set.Revision})
			} else if len(own) == 0 && exited[wd.Ref] && !wantsRunning(set, wd.Ref) {
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
				if len(allocs[v]) > 0 {
					victims[v] = true
				}
			}
			if len(own) > 0 {
				victims[wd.Ref] = true // itself, still stopping
			}
			for _, p := range wd.Placements {
				for _, g := range p.GPUs {
					if h, ok := holder[gpu{p.Node, g}]; ok {
						victims[h] = true
					}
				}
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
			if !live || set.Workspace(wd.Ref) == nil {
				continue
			}
			// What runs now: an allocation that is stopping (replaced by a
			// job update) is on its way out.
			running := own
			if slices.ContainsFunc(own, func(al drivers.Alloc) bool { return al.Phase == drivers.AllocStopping }) {
				running = slices.DeleteFunc(slices.Clone(own), func(al drivers.Alloc) bool { return al.Phase == drivers.AllocStopping })
			}
			a := describe(set, wd.Ref, drivers.ActionUpdate)
			reason, restarts, ok := updateOf(running, &a)
			if !ok {
				continue
			}
			for _, al := range running {
				a.Placements = append(a.Placements, drivers.Placement{Replica: al.Replica, Node: al.Node, GPUs: slices.Clone(al.GPUs)})
			}
			a.Reason, a.Restarts = reason, restarts
			plan.Actions = append(plan.Actions, a)
		}
	}
	// 4. Anything running that the decision forgot is stopped.
	var orphans []schema.Ref
	for ref, own := range allocs {
		if !decided[ref] && !drivers.AllStopping(own) {
			orphans = append(orphans, ref)
		}
	}
	for _, ref := range orphans {
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

// updateOf says whether a running workspace needs an Update to match a
// (describe's action): its task restarts when any allocation runs another
// fingerprint or drifted; its priority changes in place. ok is false when
// nothing changes.
func updateOf(own []drivers.Alloc, a *drivers.Action) (reason string, restarts, ok bool) {
	fp := drivers.Fingerprint(&a.Spec.Spec)
	prio := 0
	if a.Tier != nil {
		prio = a.Tier.Spec.Value
	}
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
