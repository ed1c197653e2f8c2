package reconcile

import (
	"strings"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/policies"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
)

// stateInput is what one cycle knows of one workspace: all that
// nextState reads. Its optional parts are values with a flag, not
// pointers, so that a cycle allocates nothing to fill it in.
type stateInput struct {
	// Prev is its state before this cycle ("" when berth did not know
	// it), and PrevReason and PrevReasonKind the reason it had then.
	Prev                       view.State
	PrevReason, PrevReasonKind string
	// Held: the last observation (before this cycle's) showed it holding
	// GPUs.
	Held bool
	// Resumed is the note kept for its next Running transition after a
	// resume (resumedText); "" when none.
	Resumed string
	// Spec is its spec in the set in force; nil when the specs do not
	// name it.
	Spec *schema.Workspace
	// Decision is the decision's verdict and reason for it; nil when the
	// decision did not consider it.
	Decision *policies.WorkspaceDecision
	// Allocs are its allocations in the snapshot.
	Allocs []drivers.Alloc
	// Acted is the action applied to it this cycle when DidAct (an update
	// does not count).
	Acted  drivers.Action
	DidAct bool
	// Waiting: its start is held back until its victims are gone.
	Waiting bool
	// Preempted is the history's record of its preemption when
	// WasPreempted.
	Preempted    drivers.Preemption
	WasPreempted bool
	// Ended is its run that ended for good (settleEnds) when HasEnded.
	Ended    drivers.Exit
	HasEnded bool
	// Retry is its run that its node ended, started again, when
	// Retrying (settleEnds).
	Retry    retry
	Retrying bool
	// Rejected: the cluster refused its job at the revision in force,
	// with RejectedReason.
	Rejected       bool
	RejectedReason string
}

// stateOutput is what nextState decides of one workspace.
type stateOutput struct {
	State              view.State
	Reason, ReasonKind string
	PreemptedBy        *schema.Ref
	// Node and GPUs are where it runs: its placement when it was started
	// this cycle, else its allocations ("" and nil when none).
	Node string
	GPUs []string
	// Decision is the decision's verdict, with its reason ("" when none).
	Decision string
	// Failed: it held GPUs at the last observation, berth did not stop
	// it, and they are gone: it failed, even if it is started again at
	// once (State then is not Failed: a transition to Failed comes first).
	// One the specs want stopped (or no longer name) did not fail: berth
	// stopped it, even if the stop's answer was lost on the way back.
	Failed bool
	// Resumed is the resume note left for a later Running transition:
	// in.Resumed, or "" once a Running state has taken it.
	Resumed string
}

// Reasons that nextState gives itself (the others come from the
// decision, the actions, the history and the cluster).
const (
	reasonPlaced      = "placed"
	reasonFailed      = "its allocation ended without berth stopping it"
	reasonStopping    = "stopping: checkpoint signal sent"
	reasonNotInSpecs  = "no longer in the specs"
	reasonWantStopped = "the specs want it stopped"
	reasonWaitingGPUs = "waiting for the GPUs it needs to be freed"
)

// waitingOf is why the cluster holds a workspace's start, from the
// first of its allocations (sorted by replica) that says so; "" when none
// does.
func waitingOf(own []drivers.Alloc) string {
	for _, a := range own {
		if a.Phase == drivers.AllocStarting && a.Waiting != "" {
			return a.Waiting
		}
	}
	return ""
}

// reasonKindMoving is the reason kind (policies.ReasonMoving's name) of a
// workspace that moves off a node or GPU that failed, or that starts
// again after its node ended its run.
var reasonKindMoving = policies.ReasonMoving.String()

// startsElsewhere ends the reason of a workspace pending after a move.
const startsElsewhere = "; it starts again elsewhere"

// movedFrom is why a workspace that holds nothing now moved, when it was
// Moving, or Pending after a move (not a retry after its node's fault,
// which says so itself); "" otherwise.
func movedFrom(in stateInput) string {
	switch {
	case in.Prev == view.StateMoving:
		return in.PrevReason
	case in.Prev == view.StatePending && in.PrevReasonKind == reasonKindMoving && strings.Contains(in.PrevReason, startsElsewhere):
		return in.PrevReason[:strings.Index(in.PrevReason, startsElsewhere)]
	}
	return ""
}

// nextState is a workspace's state after this cycle, and why, from what
// the cycle knows of it (stateInput). It is pure: no Loop, no lock, no
// log, no clock; it mutates nothing of in.
//
// The first case that holds decides: an action applied this cycle (a
// preemption, a stop, a start); then its allocations (all stopping, or
// running/starting); then, holding no GPUs: out of the specs, its run
// ended on its own, refused by the cluster, wanted stopped, preempted,
// failed; else it is Pending with the decision's reason.
func nextState(in stateInput) stateOutput {
	var out stateOutput
	own := in.Allocs
	if len(own) > 0 {
		out.Node, out.GPUs = drivers.Where(own)
	}
	wantsRun := in.Spec != nil && in.Spec.Spec.State != schema.DesiredStopped
	// limit: a limit stops it (its time limit, its GPUs idle), as the
	// decision says: Stopped, with the decision's reason, never Failed.
	var limit *policies.Reason
	if wd := in.Decision; wd != nil && wd.Verdict == policies.VerdictStop {
		if _, ok := policies.EndOf(wd.Reason); ok {
			limit = &wd.Reason
		}
	}
	out.Failed = len(own) == 0 && in.Held && wantsRun && !in.WasPreempted && !in.HasEnded && !in.Retrying && limit == nil &&
		(in.Prev == view.StateRunning || in.Prev == view.StateStarting)
	out.Resumed = in.Resumed
	a, pre := &in.Acted, &in.Preempted
	switch {
	case in.DidAct && a.Kind == drivers.ActionPreempt && a.By == (schema.Ref{}):
		out.State, out.ReasonKind, out.Reason = view.StateMoving, reasonKindMoving, a.Reason
	case in.DidAct && a.Kind == drivers.ActionPreempt:
		by := a.By
		out.State, out.PreemptedBy, out.ReasonKind = view.StatePreempting, &by, policies.ReasonPreempted.String()
		out.Reason = preemptReason(*a)
	case in.DidAct && a.Kind == drivers.ActionStop:
		out.State, out.ReasonKind, out.Reason = view.StateStopped, policies.ReasonStopped.String(), a.Reason
		if limit != nil {
			out.ReasonKind = limit.Kind.String()
		}
	case in.DidAct && a.Kind == drivers.ActionStart:
		out.State = view.StateStarting
		out.Node, out.GPUs = drivers.WherePlaced(a.Placements)
		out.Reason = reasonPlaced
		switch {
		case in.WasPreempted:
			out.Reason = "resuming after preemption by " + pre.By.String()
		case in.Retrying:
			out.ReasonKind, out.Reason = reasonKindMoving, retryReason(in.Retry)
		case movedFrom(in) != "":
			out.ReasonKind, out.Reason = reasonKindMoving, "moved: "+strings.TrimPrefix(movedFrom(in), "moving: ")
		}
	case len(own) > 0 && drivers.AllStopping(own):
		if in.WasPreempted {
			by := pre.By
			out.State, out.PreemptedBy, out.ReasonKind, out.Reason = view.StatePreempting, &by, policies.ReasonPreempted.String(), pre.Reason
		} else if wd := in.Decision; wd != nil && wd.Reason.Kind == policies.ReasonMoving {
			out.State, out.ReasonKind, out.Reason = view.StateMoving, reasonKindMoving, wd.Reason.Message
		} else if in.Prev == view.StateMoving {
			out.State, out.ReasonKind, out.Reason = view.StateMoving, reasonKindMoving, in.PrevReason
		} else if limit != nil {
			out.State, out.ReasonKind, out.Reason = view.StateStopped, limit.Kind.String(), limit.Message
		} else {
			out.State, out.ReasonKind, out.Reason = view.StateStopped, policies.ReasonStopped.String(), reasonStopping
		}
	case len(own) > 0:
		out.State = view.StateRunning
		for _, al := range own {
			if al.Phase == drivers.AllocStarting {
				out.State = view.StateStarting
			}
		}
		if out.State == view.StateStarting && in.Prev == view.StateStarting {
			out.Reason, out.ReasonKind = in.PrevReason, in.PrevReasonKind
		}
		if out.State == view.StateStarting {
			switch w := waitingOf(own); {
			case w != "":
				out.Reason, out.ReasonKind = w, view.ReasonWaiting
			case out.ReasonKind == view.ReasonWaiting:
				out.Reason, out.ReasonKind = reasonPlaced, "" // it waits no more
			}
		}
		if out.State == view.StateRunning && in.Resumed != "" {
			if in.Prev != view.StateRunning {
				out.Reason = in.Resumed
			}
			out.Resumed = ""
		}
	case in.Spec == nil:
		out.State, out.ReasonKind, out.Reason = view.StateStopped, policies.ReasonStopped.String(), reasonNotInSpecs
	case in.HasEnded:
		out.State, out.Reason = endedState(in.Ended)
		out.ReasonKind = view.ReasonExited
	case in.Spec.Spec.State == schema.DesiredRunning && in.Rejected:
		out.State, out.Reason = view.StateFailed, "the cluster refused it: "+in.RejectedReason+"; fix the spec"
	case in.Spec.Spec.State == schema.DesiredStopped:
		out.State, out.ReasonKind, out.Reason = view.StateStopped, policies.ReasonStopped.String(), reasonWantStopped
	case limit != nil:
		out.State, out.ReasonKind, out.Reason = view.StateStopped, limit.Kind.String(), limit.Message
	case in.WasPreempted:
		by := pre.By
		out.State, out.PreemptedBy, out.ReasonKind, out.Reason = view.StatePreempted, &by, policies.ReasonPreempted.String(), pre.Reason
	case out.Failed:
		out.State, out.Reason = view.StateFailed, reasonFailed
	case in.Retrying:
		out.State, out.ReasonKind, out.Reason = view.StatePending, reasonKindMoving, retryReason(in.Retry)
	case movedFrom(in) != "":
		// Gone from where it failed: it queues to start elsewhere, and
		// says so until it does.
		out.State, out.ReasonKind, out.Reason = view.StatePending, reasonKindMoving, movedFrom(in)+startsElsewhere
		if wd := in.Decision; wd != nil && wd.Reason.Message != "" {
			out.Reason += " (" + wd.Reason.Message + ")"
		}
	default:
		out.State = view.StatePending
		if wd := in.Decision; wd != nil {
			out.ReasonKind, out.Reason = wd.Reason.Kind.String(), wd.Reason.Message
		}
		if in.Waiting {
			out.ReasonKind = policies.ReasonPreempting.String()
			if out.Reason == "" {
				out.Reason = reasonWaitingGPUs
			}
		}
	}
	if wd := in.Decision; wd != nil {
		out.Decision = wd.Verdict.String()
		if wd.Reason.Message != "" {
			out.Decision += ": " + wd.Reason.Message
		}
	}
	return out
}
