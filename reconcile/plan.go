package reconcile

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/berth-dev/berth/policies"
	"github.com/berth-dev/berth/reconcile/state"
	"github.com/berth-dev/berth/schema"
)

// Plan is the ordered list of actions that moves the cluster toward a
// decision: stops, preemptions, waits for victims to be gone, starts,
// updates; within each kind by workspace. A Wait guards the Start of the
// same workspace: that start runs only once the victims are gone (in a
// later cycle, from a fresh snapshot).
type Plan struct {
	Revision string         `json:"revision"`
	Actions  []state.Action `json:"actions"`
}

// Empty reports whether the plan does nothing.
func (p Plan) Empty() bool { return len(p.Actions) == 0 }

// planOrder is where each kind of action goes in a plan.
var planOrder = map[state.ActionKind]int{
	state.ActionStop:    0,
	state.ActionPreempt: 1,
	state.ActionWait:    2,
	state.ActionStart:   3,
	state.ActionUpdate:  4,
}

// NewPlan diffs decision d against snapshot snap. It is a pure function of
// its arguments and mutates none of them; set is the revision d was made
// from. Actions point into set (read-only).
//
// 1. Workspaces the decision stops or preempts and that still hold GPUs
// (not already stopping) get a Stop or Preempt.
// 2. A workspace to start gets a Start at the decision's placements,
// preceded by a Wait while anything still holds those GPUs (its victims,
// or itself, stopping).
// 3. A workspace that keeps running from an older revision gets an Update.
// 4. Allocations the decision does not mention are stopped.
func NewPlan(set *schema.Set, snap *state.Snapshot, d policies.Decision) Plan {
	plan := Plan{Revision: set.Revision}
	allocs := map[schema.Ref][]state.Alloc{}
	holder := map[string]schema.Ref{} // node/gpu -> workspace
	for _, a := range snap.Allocs {
		allocs[a.Workspace] = append(allocs[a.Workspace], a)
		for _, g := range a.GPUs {
			holder[a.Node+"/"+g] = a.Workspace
		}
	}
	decided := map[schema.Ref]bool{}
	for _, wd := range d.Workspaces {
		decided[wd.Ref] = true
		own := allocs[wd.Ref]
		live := len(own) > 0 && !allStopping(own)
		switch wd.Verdict {
		case policies.VerdictStop:
			if live {
				plan.Actions = append(plan.Actions, state.Action{Kind: state.ActionStop, Workspace: wd.Ref,
					Reason: orDefault(wd.Reason.Message, "the specs want it stopped"), Revision: set.Revision})
			}
		case policies.VerdictPreempt:
			if live {
				a := state.Action{Kind: state.ActionPreempt, Workspace: wd.Ref, Reason: wd.Reason.Message, Revision: set.Revision}
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
					if h, ok := holder[p.Node+"/"+g]; ok {
						victims[h] = true
					}
				}
			}
			if len(victims) > 0 {
				plan.Actions = append(plan.Actions, state.Action{Kind: state.ActionWait, Workspace: wd.Ref,
					Victims: sortedRefs(victims), Reason: "the GPUs it needs are still held", Revision: set.Revision})
			}
			a := describe(set, wd.Ref, state.ActionStart)
			a.Placements = clonePlacements(wd.Placements)
			a.Reason = wd.Reason.Message
			plan.Actions = append(plan.Actions, a)
		case policies.VerdictRun:
			if !live || !stale(own, set.Revision) || set.Workspace(wd.Ref) == nil {
				continue
			}
			a := describe(set, wd.Ref, state.ActionUpdate)
			for _, al := range own {
				a.Placements = append(a.Placements, state.Placement{Replica: al.Replica, Node: al.Node, GPUs: slices.Clone(al.GPUs)})
			}
			a.Reason = "revision " + set.Revision
			plan.Actions = append(plan.Actions, a)
		}
	}
	// 4. Anything running that the decision forgot is stopped.
	var orphans []schema.Ref
	for ref, own := range allocs {
		if !decided[ref] && !allStopping(own) {
			orphans = append(orphans, ref)
		}
	}
	for _, ref := range orphans {
		plan.Actions = append(plan.Actions, state.Action{Kind: state.ActionStop, Workspace: ref,
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
func describe(set *schema.Set, ref schema.Ref, kind state.ActionKind) state.Action {
	a := state.Action{Kind: kind, Workspace: ref, Revision: set.Revision, Spec: set.Workspace(ref), Project: set.Project(ref.Project)}
	if a.Project != nil {
		a.Tier = set.Tier(a.Project.Spec.Tier)
	}
	return a
}

func allStopping(allocs []state.Alloc) bool {
	for _, a := range allocs {
		if a.Phase != state.AllocStopping {
			return false
		}
	}
	return true
}

func stale(allocs []state.Alloc, revision string) bool {
	for _, a := range allocs {
		if a.Revision != revision {
			return true
		}
	}
	return false
}

func sortedRefs(m map[schema.Ref]bool) []schema.Ref {
	refs := make([]schema.Ref, 0, len(m))
	for r := range m {
		refs = append(refs, r)
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].Less(refs[j]) })
	return refs
}

func clonePlacements(ps []state.Placement) []state.Placement {
	out := make([]state.Placement, len(ps))
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
func ActionLine(a state.Action) string {
	line := fmt.Sprintf("%-8s %s", a.Kind, a.Workspace)
	switch a.Kind {
	case state.ActionStart, state.ActionUpdate:
		line += " on " + placementText(a.Placements)
	case state.ActionPreempt:
		if a.By != (schema.Ref{}) {
			line += " for " + a.By.String()
		}
	case state.ActionWait:
		names := make([]string, len(a.Victims))
		for i, v := range a.Victims {
			names[i] = v.String()
		}
		line += " until " + strings.Join(names, ", ") + " gone"
	}
	if a.Reason != "" && a.Kind != state.ActionWait {
		line += ": " + a.Reason
	}
	return line
}

func placementText(ps []state.Placement) string {
	var parts []string
	for _, p := range ps {
		parts = append(parts, fmt.Sprintf("%s [%s]", p.Node, strings.Join(shortGPUs(p.GPUs), " ")))
	}
	return strings.Join(parts, ", ")
}

// shortGPUs abbreviates UUID-shaped device IDs to their first group.
func shortGPUs(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		if strings.HasPrefix(id, "GPU-") && len(id) > 12 {
			id = id[:12]
		}
		out[i] = id
	}
	return out
}
