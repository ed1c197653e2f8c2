package drivers

import "github.com/berth-dev/berth/schema"

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
