package policies

import (
	"fmt"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
)

// Input is everything a decision reads. Decide never mutates it (the
// Scratch it may be lent is not input: the decision is built there).
type Input struct {
	Specs    *schema.Set
	Snapshot *drivers.Snapshot
	History  *drivers.History
	Now      time.Time
	// Scratch, when set, is where the Decision is built (see Scratch).
	Scratch *Scratch
}

// Verdict is what the decision wants for one workspace.
type Verdict int

const (
	// VerdictRun: keep running where it is.
	VerdictRun Verdict = iota
	// VerdictStart: start (or resume) at Placements, after the workspaces
	// in Preempts are gone.
	VerdictStart
	// VerdictPreempt: stop to make room for PreemptedBy, or (PreemptedBy
	// nil, Reason ReasonMoving) to move off a node or GPU that failed;
	// resume later.
	VerdictPreempt
	// VerdictWait: pending; Reason says why.
	VerdictWait
	// VerdictStop: the specs want it stopped, or no longer list it.
	VerdictStop
)

func (v Verdict) String() string {
	switch v {
	case VerdictRun:
		return "run"
	case VerdictStart:
		return "start"
	case VerdictPreempt:
		return "preempt"
	case VerdictWait:
		return "wait"
	case VerdictStop:
		return "stop"
	}
	return "unknown"
}

// ReasonKind classifies why a workspace does what it does.
type ReasonKind int

const (
	ReasonNone ReasonKind = iota
	// ReasonQuota: its project is at its quota plus borrow limit.
	ReasonQuota
	// ReasonCapacity: no node has the free GPUs it needs.
	ReasonCapacity
	// ReasonTopology: GPUs are free but not in the shape it requires.
	ReasonTopology
	// ReasonQueue: capacity exists but others are ahead of it.
	ReasonQueue
	// ReasonPreempted: another workspace preempted it.
	ReasonPreempted
	// ReasonStopped: the specs want it stopped or removed it.
	ReasonStopped
	// ReasonPreempting: it is making room for itself; victims are stopping.
	ReasonPreempting
	// ReasonMoving: its node is draining or down, or a GPU it holds is
	// unhealthy or gone: it stops with its checkpoint grace, as a
	// preemption does, and starts again elsewhere, keeping its place in
	// the queue.
	ReasonMoving
	// ReasonTimeLimit: it ran its time limit (spec.maxRuntime) with its
	// spec: it stops with its checkpoint grace and does not start again
	// until its spec changes or its limit is raised.
	ReasonTimeLimit
	// ReasonIdle: its GPUs stayed idle for its idle rule's after
	// (spec.idle): it stops with its checkpoint grace and does not start
	// again until its spec changes (VerdictStop), or, where the rule only
	// reports, runs on with this reason (VerdictRun).
	ReasonIdle
)

func (k ReasonKind) String() string {
	switch k {
	case ReasonNone:
		return "none"
	case ReasonQuota:
		return "quota"
	case ReasonCapacity:
		return "capacity"
	case ReasonTopology:
		return "topology"
	case ReasonQueue:
		return "queue"
	case ReasonPreempted:
		return "preempted"
	case ReasonStopped:
		return "stopped"
	case ReasonPreempting:
		return "preempting"
	case ReasonMoving:
		return "moving"
	case ReasonTimeLimit:
		return "time-limit"
	case ReasonIdle:
		return "idle"
	}
	return "unknown"
}

// Reason is why, as data and as a sentence.
type Reason struct {
	Kind    ReasonKind `json:"kind"`
	Message string     `json:"message"`
}

// Decision is the whole outcome of one Decide call. Workspaces are sorted
// by Ref.
type Decision struct {
	Now        time.Time           `json:"now"`
	Workspaces []WorkspaceDecision `json:"workspaces"`
	// Starved is the workspace the starvation guard chose this decision
	// (the longest waiting with its aging at the maximum), which gets the
	// first reservation of free GPUs; nil when none qualified.
	Starved *schema.Ref `json:"starved,omitempty"`
	// GuardReleased: at Starved's turn the guard let go of free GPUs it
	// had held for it that Starved neither started on nor held again, so
	// work queued after Starved could take GPUs that work before it saw
	// held. (The replay's narrowed queue reads it: narrow.go.)
	GuardReleased bool `json:"guardReleased,omitempty"`
}

// WorkspaceDecision is the verdict for one workspace (in the specs, or
// running in the cluster without being in the specs).
type WorkspaceDecision struct {
	Ref     schema.Ref `json:"ref"`
	Verdict Verdict    `json:"verdict"`
	// Placements: Run and Start, one per replica.
	Placements []drivers.Placement `json:"placements,omitempty"`
	// Preempts: Start only, every workspace that must be gone first: the
	// victims it preempts (VerdictPreempt, PreemptedBy this one), victims
	// of an earlier decision still stopping, and workspaces being stopped
	// (VerdictStop) whose GPUs, CPU or memory it takes over. Sorted by Ref.
	Preempts []schema.Ref `json:"preempts,omitempty"`
	// PreemptedBy: Preempt, and Wait of a workspace preempted earlier that
	// has not resumed yet (who preempted it last).
	PreemptedBy *schema.Ref `json:"preemptedBy,omitempty"`
	// Right: Preempt only, the right the preemptor used.
	Right Right `json:"right,omitempty"`
	// Borrowed: Run and Start, the workspace counts beyond its project's
	// guaranteed quota: a Start admitted beyond it, a Run admitted beyond
	// it and not since moved inside by in-quota work leaving.
	// RecordDecision keeps it in History.Borrowing.
	Borrowed bool `json:"borrowed,omitempty"`
	// Holding: Wait only, the free GPUs it holds for itself, one placement
	// per replica it found room for (the head of the queue's reservation,
	// or the starvation guard's), so that later workspaces do not take
	// them.
	Holding []drivers.Placement `json:"holding,omitempty"`
	Reason  Reason              `json:"reason"`
	// Queue is its place (1, 2, …) in the order this decision considered
	// the workspaces that wanted to run and held nothing; 0 for the rest.
	Queue int `json:"queue,omitempty"`
}

// Right names the right a preemptor uses to take a victim's GPUs.
type Right int

const (
	RightNone Right = iota
	// RightPriority: the preemptor's tier is strictly higher.
	RightPriority
	// RightReclaim: the preemptor is inside its project's guaranteed quota
	// and the victim's project is beyond its own (borrowing).
	RightReclaim
	// RightOrder: attained-service ordering (policy Service): the victim,
	// of the preemptor's tier, has run past a step the preemptor has not
	// reached, checkpoints and is not interactive; it is of the
	// preemptor's project (the preemptor inside its quota) or borrowed
	// work (the preemptor borrowing too).
	RightOrder
)

func (r Right) String() string {
	switch r {
	case RightNone:
		return "none"
	case RightPriority:
		return "priority"
	case RightReclaim:
		return "reclaim"
	case RightOrder:
		return "order"
	}
	return "unknown"
}

// MarshalText writes the right's name.
func (r Right) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// MarshalText writes the verdict's name ("run", "start", …).
func (v Verdict) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// UnmarshalText reads a verdict's name.
func (v *Verdict) UnmarshalText(b []byte) error {
	for c := VerdictRun; c <= VerdictStop; c++ {
		if c.String() == string(b) {
			*v = c
			return nil
		}
	}
	return fmt.Errorf("unknown verdict %q", b)
}

// MarshalText writes the reason kind's name ("quota", "capacity", …).
func (k ReasonKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads a reason kind's name.
func (k *ReasonKind) UnmarshalText(b []byte) error {
	for c := ReasonNone; c <= ReasonIdle; c++ {
		if c.String() == string(b) {
			*k = c
			return nil
		}
	}
	return fmt.Errorf("unknown reason kind %q", b)
}
