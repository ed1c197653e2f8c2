package drivers

import (
	"cmp"
	"slices"

	"github.com/berth-dev/berth/schema"
)

// ActionKind is what an Action does.
type ActionKind int

const (
	// ActionStart starts (or resumes) a workspace at its placements.
	ActionStart ActionKind = iota
	// ActionStop stops a workspace the specs want stopped or no longer
	// list; it gets its checkpoint signal and grace period.
	ActionStop
	// ActionPreempt stops a workspace to make room for another; it gets its
	// checkpoint signal and grace period and is resumed later.
	ActionPreempt
	// ActionWait is a barrier in a plan: the actions after it wait until
	// the named victims are gone. Drivers never see it.
	ActionWait
	// ActionUpdate changes a running workspace where it runs: its task
	// (Restarts: the task is restarted, its work since the last
	// checkpoint lost) or only its priority (in place, nothing restarts).
	ActionUpdate
	// ActionPurge removes what is left of a stopped workspace that the
	// specs no longer list (its job and saved state), once the prune delay
	// has passed. It never reaches a workspace that holds GPUs, and it is
	// never part of a Plan: the loop issues it on its own schedule.
	ActionPurge
)

func (k ActionKind) String() string {
	switch k {
	case ActionStart:
		return "start"
	case ActionStop:
		return "stop"
	case ActionPreempt:
		return "preempt"
	case ActionWait:
		return "wait"
	case ActionUpdate:
		return "update"
	case ActionPurge:
		return "purge"
	}
	return "unknown"
}

// Placement is where one replica of a workspace runs.
type Placement struct {
	Replica int    `json:"replica"`
	Node    string `json:"node"`
	// GPUs are device IDs on Node, sorted.
	GPUs []string `json:"gpus"`
}

// Action is one step of a plan. Applying the same Action twice has the
// effect of applying it once. The schema pointers are shared, read-only.
type Action struct {
	Kind      ActionKind `json:"kind"`
	Workspace schema.Ref `json:"workspace"`
	// Spec, Project and Tier describe the workspace for Start and Update
	// (drivers render jobs from them); nil for the other kinds.
	Spec    *schema.Workspace    `json:"-"`
	Project *schema.Project      `json:"-"`
	Tier    *schema.PriorityTier `json:"-"`
	// Placements: Start and Update only, one per replica, by Replica.
	Placements []Placement `json:"placements,omitempty"`
	// By is the preemptor (Preempt only). Victims lists what a Wait waits for.
	By      schema.Ref   `json:"by,omitzero"`
	Victims []schema.Ref `json:"victims,omitempty"`
	// Reason is a sentence a person reads.
	Reason   string `json:"reason,omitempty"`
	Revision string `json:"revision,omitempty"`
	// Restarts (Update only): the update changes what the task sees, so
	// the driver restarts the task where it runs; false: only the
	// priority changes, in place.
	Restarts bool `json:"restarts,omitempty"`
}

// PlacementsOf turns allocations into placements, sorted by replica, with
// each placement's GPUs sorted; it copies and never mutates allocs. Nil
// for no allocations.
func PlacementsOf(allocs []*Alloc) []Placement {
	var b PlacementBuf
	return b.Of(allocs)
}

// PlacementBuf is PlacementsOf for many workspaces at once (a decision's
// holders): it carves their placements, and their GPU lists, out of two
// shared arrays, one allocation each instead of one per workspace and one
// per placement. Each slice cut from them is capped at its length, so
// appending to one never reaches another. The zero value is ready.
type PlacementBuf struct {
	pls  []Placement
	gpus []string
}

// Grow makes room for allocs placements listing gpus GPUs in all.
func (b *PlacementBuf) Grow(allocs, gpus int) {
	b.pls = slices.Grow(b.pls, allocs)
	b.gpus = slices.Grow(b.gpus, gpus)
}

// Reset empties b, keeping its arrays: placements cut from it before are
// overwritten by the next ones.
func (b *PlacementBuf) Reset() {
	b.pls, b.gpus = b.pls[:0], b.gpus[:0]
}

// Of is PlacementsOf, cut from b's arrays.
func (b *PlacementBuf) Of(allocs []*Alloc) []Placement {
	if len(allocs) == 0 {
		return nil
	}
	if cap(b.pls)-len(b.pls) < len(allocs) {
		b.pls = make([]Placement, 0, max(len(allocs), 256))
	}
	start := len(b.pls)
	for _, a := range allocs {
		var gpus []string // nil for none, as append([]string(nil)) gives
		if len(a.GPUs) > 0 {
			if cap(b.gpus)-len(b.gpus) < len(a.GPUs) {
				b.gpus = make([]string, 0, max(len(a.GPUs), 1024))
			}
			n := len(b.gpus)
			b.gpus = append(b.gpus, a.GPUs...)
			gpus = b.gpus[n:len(b.gpus):len(b.gpus)]
			if !slices.IsSorted(gpus) {
				slices.Sort(gpus)
			}
		}
		b.pls = append(b.pls, Placement{Replica: a.Replica, Node: a.Node, GPUs: gpus})
	}
	out := b.pls[start:len(b.pls):len(b.pls)]
	if !slices.IsSortedFunc(out, byReplica) {
		slices.SortFunc(out, byReplica)
	}
	return out
}

func byReplica(a, b Placement) int { return cmp.Compare(a.Replica, b.Replica) }
