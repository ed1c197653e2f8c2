package reconcile

import (
	"reflect"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/policies"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
)

// TestNextState covers nextState, the state switch of Loop.record: each
// case of the switch at least once (a row per branch inside a case), with
// the reasons the loop really produces.
func TestNextState(t *testing.T) {
	research := schema.Ref{Project: "research", Name: "train"}
	spec := func(state schema.DesiredState) *schema.Workspace {
		w := workspace("med", "train", state)
		return &w
	}
	running := func() *schema.Workspace { return spec(schema.DesiredRunning) }
	stopped := func() *schema.Workspace { return spec(schema.DesiredStopped) }
	alloc := func(phase drivers.AllocPhase) []drivers.Alloc {
		return []drivers.Alloc{{Workspace: schema.Ref{Project: "med", Name: "train"}, Node: "dgx-1", GPUs: []string{"gpu-1", "gpu-0"}, Phase: phase}}
	}
	waitingAlloc := func(why string) []drivers.Alloc {
		a := alloc(drivers.AllocStarting)
		a[0].Waiting = why
		return a
	}
	preemption := drivers.Preemption{Victim: schema.Ref{Project: "med", Name: "train"}, By: research,
		Reason: "tier high (80) outranks tier medium (50)"}
	wait := &policies.WorkspaceDecision{Verdict: policies.VerdictWait,
		Reason: policies.Reason{Kind: policies.ReasonCapacity, Message: "capacity: no node has 8 free GPUs"}}
	again := "; berth does not run it again until its spec changes (or it is set Stopped, then Running)"
	resumed := "resumed from its checkpoint at 25m of progress; 0s of work lost"

	cases := []struct {
		name string
		in   stateInput
		want stateOutput
	}{
		// Case 1: a preemption applied this cycle.
		{"preempt applied", stateInput{Prev: view.StateRunning, Spec: running(), Allocs: alloc(drivers.AllocRunning),
			Acted: drivers.Action{Kind: drivers.ActionPreempt, By: research, Reason: "tier high (80) outranks tier medium (50)"}, DidAct: true},
			stateOutput{State: view.StatePreempting, ReasonKind: "preempted", Reason: "tier high (80) outranks tier medium (50)",
				PreemptedBy: &research, Node: "dgx-1", GPUs: []string{"gpu-0", "gpu-1"}}},
		{"preempt applied without a reason", stateInput{Prev: view.StateRunning, Spec: running(), Allocs: alloc(drivers.AllocRunning),
			Acted: drivers.Action{Kind: drivers.ActionPreempt, By: research}, DidAct: true},
			stateOutput{State: view.StatePreempting, ReasonKind: "preempted", Reason: "preempted by research/train",
				PreemptedBy: &research, Node: "dgx-1", GPUs: []string{"gpu-0", "gpu-1"}}},
		// Case 2: a stop applied this cycle.
		{"stop applied", stateInput{Prev: view.StateRunning, Allocs: alloc(drivers.AllocRunning),
			Acted: drivers.Action{Kind: drivers.ActionStop, Reason: "no longer in the specs"}, DidAct: true},
			stateOutput{State: view.StateStopped, ReasonKind: "stopped", Reason: "no longer in the specs", Node: "dgx-1", GPUs: []string{"gpu-0", "gpu-1"}}},
		// Case 3: a start applied this cycle: where it was placed.
		{"start applied", stateInput{Prev: view.StatePending, PrevReason: "capacity: no node has 8 free GPUs", PrevReasonKind: "capacity", Spec: running(),
			Decision: &policies.WorkspaceDecision{Verdict: policies.VerdictStart},
			Acted:    drivers.Action{Kind: drivers.ActionStart, Placements: []drivers.Placement{{Node: "dgx-2", GPUs: []string{"gpu-3"}}}}, DidAct: true},
			stateOutput{State: view.StateStarting, Reason: "placed", Node: "dgx-2", GPUs: []string{"gpu-3"}, Decision: "start"}},
		{"start applied after a preemption", stateInput{Prev: view.StatePreempted, Spec: running(), Preempted: preemption, WasPreempted: true,
			Decision: &policies.WorkspaceDecision{Verdict: policies.VerdictStart, Reason: policies.Reason{Message: "starts after preempting med/train"}},
			Acted:    drivers.Action{Kind: drivers.ActionStart, Placements: []drivers.Placement{{Node: "dgx-2", GPUs: []string{"gpu-3"}}}}, DidAct: true},
			stateOutput{State: view.StateStarting, Reason: "resuming after preemption by research/train", Node: "dgx-2", GPUs: []string{"gpu-3"},
				Decision: "start: starts after preempting med/train"}},
		{"started again at once after it failed", stateInput{Prev: view.StateRunning, Held: true, Spec: running(),
			Acted: drivers.Action{Kind: drivers.ActionStart, Placements: []drivers.Placement{{Node: "dgx-2", GPUs: []string{"gpu-3"}}}}, DidAct: true},
			stateOutput{State: view.StateStarting, Reason: "placed", Node: "dgx-2", GPUs: []string{"gpu-3"}, Failed: true}},
		// An update applied is no action for the state (record leaves
		// updates out of Acted; nextState ignores one anyway).
		{"update applied", stateInput{Prev: view.StateRunning, Spec: running(), Allocs: alloc(drivers.AllocRunning),
			Acted: drivers.Action{Kind: drivers.ActionUpdate}, DidAct: true},
			stateOutput{State: view.StateRunning, Node: "dgx-1", GPUs: []string{"gpu-0", "gpu-1"}}},
		// Case 4: all its allocations stopping.
		{"stopping after a preemption", stateInput{Prev: view.StatePreempting, Held: true, Spec: running(), Allocs: alloc(drivers.AllocStopping),
			Preempted: preemption, WasPreempted: true},
			stateOutput{State: view.StatePreempting, ReasonKind: "preempted", Reason: "tier high (80) outranks tier medium (50)",
				PreemptedBy: &research, Node: "dgx-1", GPUs: []string{"gpu-0", "gpu-1"}}},
		{"stopping", stateInput{Prev: view.StateStopped, Held: true, Spec: stopped(), Allocs: alloc(drivers.AllocStopping)},
			stateOutput{State: view.StateStopped, ReasonKind: "stopped", Reason: "stopping: checkpoint signal sent", Node: "dgx-1", GPUs: []string{"gpu-0", "gpu-1"}}},
		// Case 5: it holds GPUs: Running, or Starting while one is.
		{"running", stateInput{Prev: view.StateStarting, PrevReason: "placed", Held: true, Spec: running(), Allocs: alloc(drivers.AllocRunning),
			Decision: &policies.WorkspaceDecision{Verdict: policies.VerdictRun}},
			stateOutput{State: view.StateRunning, Node: "dgx-1", GPUs: []string{"gpu-0", "gpu-1"}, Decision: "run"}},
		{"still starting keeps its reason", stateInput{Prev: view.StateStarting, PrevReason: "resuming after preemption by research/train", Held: true,
			Spec: running(), Allocs: alloc(drivers.AllocStarting)},
			stateOutput{State: view.StateStarting, Reason: "resuming after preemption by research/train", Node: "dgx-1", GPUs: []string{"gpu-0", "gpu-1"}}},
		{"starting, seen first", stateInput{Prev: view.StatePending, PrevReason: "capacity: no node has 8 free GPUs", PrevReasonKind: "capacity",
			Spec: running(), Allocs: alloc(drivers.AllocStarting)},
			stateOutput{State: view.StateStarting, Node: "dgx-1", GPUs: []string{"gpu-0", "gpu-1"}}},
		{"running after a resume", stateInput{Prev: view.StateStarting, PrevReason: "placed", Resumed: resumed, Spec: running(), Allocs: alloc(drivers.AllocRunning)},
			stateOutput{State: view.StateRunning, Reason: resumed, Node: "dgx-1", GPUs: []string{"gpu-0", "gpu-1"}}},
		{"running through a resume", stateInput{Prev: view.StateRunning, Resumed: resumed, Spec: running(), Allocs: alloc(drivers.AllocRunning)},
			stateOutput{State: view.StateRunning, Node: "dgx-1", GPUs: []string{"gpu-0", "gpu-1"}}},
		{"starting keeps the resume note", stateInput{Prev: view.StatePreempted, Resumed: resumed, Spec: running(), Allocs: alloc(drivers.AllocStarting)},
			stateOutput{State: view.StateStarting, Node: "dgx-1", GPUs: []string{"gpu-0", "gpu-1"}, Resumed: resumed}},
		// Starting, the cluster holding its task back: why, until it is
		// not held any more.
		{"starting, waiting for a secret", stateInput{Prev: view.StateStarting, PrevReason: "placed", Held: true, Spec: running(),
			Allocs: waitingAlloc("its task waits for its secrets: Nomad Variable ml/hf …")},
			stateOutput{State: view.StateStarting, ReasonKind: view.ReasonWaiting, Reason: "its task waits for its secrets: Nomad Variable ml/hf …", Node: "dgx-1", GPUs: []string{"gpu-0", "gpu-1"}}},
		{"waits no more", stateInput{Prev: view.StateStarting, PrevReason: "its task waits for its secrets: Nomad Variable ml/hf …", PrevReasonKind: view.ReasonWaiting,
			Held: true, Spec: running(), Allocs: alloc(drivers.AllocStarting)},
			stateOutput{State: view.StateStarting, Reason: "placed", Node: "dgx-1", GPUs: []string{"gpu-0", "gpu-1"}}},
		{"runs after waiting", stateInput{Prev: view.StateStarting, PrevReason: "its task waits for its secrets: Nomad Variable ml/hf …", PrevReasonKind: view.ReasonWaiting,
			Held: true, Spec: running(), Allocs: alloc(drivers.AllocRunning)},
			stateOutput{State: view.StateRunning, Node: "dgx-1", GPUs: []string{"gpu-0", "gpu-1"}}},
		// Case 6: out of the specs, holding nothing.
		{"no longer in the specs", stateInput{Prev: view.StateStopped, Held: true,
			Decision: &policies.WorkspaceDecision{Verdict: policies.VerdictStop}},
			stateOutput{State: view.StateStopped, ReasonKind: "stopped", Reason: "no longer in the specs", Decision: "stop"}},
		// Case 7: its run ended on its own.
		{"completed", stateInput{Prev: view.StateRunning, Held: true, Spec: running(), Ended: drivers.Exit{}, HasEnded: true},
			stateOutput{State: view.StateCompleted, ReasonKind: "exited", Reason: "its task exited 0" + again}},
		{"exited with a code", stateInput{Prev: view.StateRunning, Held: true, Spec: running(),
			Ended: drivers.Exit{Failed: true, ExitCode: 3, Message: "Exit Code: 3", Restarts: 2}, HasEnded: true},
			stateOutput{State: view.StateFailed, ReasonKind: "exited", Reason: "its task exited with code 3 after 2 restart(s)" + again}},
		// Case 8: the cluster refused its job at this revision.
		{"refused by the cluster", stateInput{Prev: view.StatePending, Spec: running(), Rejected: true, RejectedReason: "invalid job: bad image"},
			stateOutput{State: view.StateFailed, Reason: "the cluster refused it: invalid job: bad image; fix the spec"}},
		{"refused, but wanted stopped", stateInput{Prev: view.StateFailed, Spec: stopped(), Rejected: true, RejectedReason: "invalid job: bad image"},
			stateOutput{State: view.StateStopped, ReasonKind: "stopped", Reason: "the specs want it stopped"}},
		// Case 9: the specs want it stopped.
		{"wanted stopped", stateInput{Prev: view.StateRunning, Held: true, Spec: stopped(),
			Decision: &policies.WorkspaceDecision{Verdict: policies.VerdictStop}},
			stateOutput{State: view.StateStopped, ReasonKind: "stopped", Reason: "the specs want it stopped", Decision: "stop"}},
		// Case 10: preempted, its GPUs gone.
		{"preempted", stateInput{Prev: view.StatePreempting, Held: true, Spec: running(), Preempted: preemption, WasPreempted: true, Decision: wait},
			stateOutput{State: view.StatePreempted, ReasonKind: "preempted", Reason: "tier high (80) outranks tier medium (50)",
				PreemptedBy: &research, Decision: "wait: capacity: no node has 8 free GPUs"}},
		// Case 11: its GPUs gone without berth stopping it.
		{"failed", stateInput{Prev: view.StateRunning, Held: true, Spec: running(), Decision: wait},
			stateOutput{State: view.StateFailed, Reason: "its allocation ended without berth stopping it", Failed: true,
				Decision: "wait: capacity: no node has 8 free GPUs"}},
		{"failed while starting", stateInput{Prev: view.StateStarting, Held: true, Spec: running()},
			stateOutput{State: view.StateFailed, Reason: "its allocation ended without berth stopping it", Failed: true}},
		// Case 12: Pending, with the decision's reason.
		{"pending", stateInput{Prev: view.StatePending, PrevReason: "placed", Spec: running(), Decision: wait},
			stateOutput{State: view.StatePending, ReasonKind: "capacity", Reason: "capacity: no node has 8 free GPUs",
				Decision: "wait: capacity: no node has 8 free GPUs"}},
		{"pending, not decided", stateInput{Spec: running()},
			stateOutput{State: view.StatePending}},
		{"pending, it held no GPUs before", stateInput{Prev: view.StateRunning, Spec: running()},
			stateOutput{State: view.StatePending}},
		{"waiting for its victims", stateInput{Prev: view.StatePending, Spec: running(), Waiting: true,
			Decision: &policies.WorkspaceDecision{Verdict: policies.VerdictStart, Reason: policies.Reason{Message: "starts after preempting med/train"}}},
			stateOutput{State: view.StatePending, ReasonKind: "preempting", Reason: "starts after preempting med/train",
				Decision: "start: starts after preempting med/train"}},
		{"waiting for its victims, no reason", stateInput{Prev: view.StatePending, Spec: running(), Waiting: true,
			Decision: &policies.WorkspaceDecision{Verdict: policies.VerdictStart}},
			stateOutput{State: view.StatePending, ReasonKind: "preempting", Reason: "waiting for the GPUs it needs to be freed", Decision: "start"}},
		// Moves off a node or GPU that failed: Moving while it stops,
		// Pending saying why until it starts, then Starting saying it
		// moved; never Failed.
		{"move applied", stateInput{Prev: view.StateRunning, Held: true, Spec: running(), Allocs: alloc(drivers.AllocRunning),
			Acted: drivers.Action{Kind: drivers.ActionPreempt, Reason: "moving: node dgx-1 is draining"}, DidAct: true},
			stateOutput{State: view.StateMoving, ReasonKind: "moving", Reason: "moving: node dgx-1 is draining", Node: "dgx-1", GPUs: []string{"gpu-0", "gpu-1"}}},
		{"moving, stopping", stateInput{Prev: view.StateMoving, PrevReason: "moving: node dgx-1 is draining", PrevReasonKind: "moving", Held: true, Spec: running(),
			Allocs: alloc(drivers.AllocStopping), Decision: &policies.WorkspaceDecision{Verdict: policies.VerdictPreempt,
				Reason: policies.Reason{Kind: policies.ReasonMoving, Message: "moving: node dgx-1 is draining"}}},
			stateOutput{State: view.StateMoving, ReasonKind: "moving", Reason: "moving: node dgx-1 is draining", Node: "dgx-1", GPUs: []string{"gpu-0", "gpu-1"},
				Decision: "preempt: moving: node dgx-1 is draining"}},
		{"moving, stopping, the decision saying only stopping", stateInput{Prev: view.StateMoving, PrevReason: "moving: node dgx-1 is draining", PrevReasonKind: "moving",
			Held: true, Spec: running(), Allocs: alloc(drivers.AllocStopping), Decision: &policies.WorkspaceDecision{Verdict: policies.VerdictPreempt,
				Reason: policies.Reason{Kind: policies.ReasonPreempted, Message: "stopping; it queues again once its GPUs are free"}}},
			stateOutput{State: view.StateMoving, ReasonKind: "moving", Reason: "moving: node dgx-1 is draining", Node: "dgx-1", GPUs: []string{"gpu-0", "gpu-1"},
				Decision: "preempt: stopping; it queues again once its GPUs are free"}},
		{"moved, gone, waiting", stateInput{Prev: view.StateMoving, PrevReason: "moving: node dgx-1 is draining", PrevReasonKind: "moving", Held: true, Spec: running(),
			Decision: wait},
			stateOutput{State: view.StatePending, ReasonKind: "moving", Reason: "moving: node dgx-1 is draining; it starts again elsewhere (capacity: no node has 8 free GPUs)",
				Decision: "wait: capacity: no node has 8 free GPUs"}},
		{"moved, still waiting", stateInput{Prev: view.StatePending, PrevReason: "moving: node dgx-1 is draining; it starts again elsewhere (queue: 2 ahead)", PrevReasonKind: "moving",
			Spec: running(), Decision: wait},
			stateOutput{State: view.StatePending, ReasonKind: "moving", Reason: "moving: node dgx-1 is draining; it starts again elsewhere (capacity: no node has 8 free GPUs)",
				Decision: "wait: capacity: no node has 8 free GPUs"}},
		{"moved, started elsewhere", stateInput{Prev: view.StateMoving, PrevReason: "moving: node dgx-1 is draining", PrevReasonKind: "moving", Held: true, Spec: running(),
			Acted: drivers.Action{Kind: drivers.ActionStart, Placements: []drivers.Placement{{Node: "dgx-2", GPUs: []string{"gpu-3"}}}}, DidAct: true},
			stateOutput{State: view.StateStarting, ReasonKind: "moving", Reason: "moved: node dgx-1 is draining", Node: "dgx-2", GPUs: []string{"gpu-3"}}},
		// Its node ended its run: not Failed; it starts again (after its
		// backoff), and says so.
		{"node's fault, retried at once", stateInput{Prev: view.StateRunning, Held: true, Spec: running(), Retrying: true,
			Retry: retry{end: drivers.Exit{Class: drivers.EndNodeFault, Node: "dgx-1", Message: "alloc is lost since its node is down"}, attempt: 1},
			Acted: drivers.Action{Kind: drivers.ActionStart, Placements: []drivers.Placement{{Node: "dgx-2", GPUs: []string{"gpu-3"}}}}, DidAct: true},
			stateOutput{State: view.StateStarting, ReasonKind: "moving", Node: "dgx-2", GPUs: []string{"gpu-3"},
				Reason: "moving: its allocation on node dgx-1 ended (alloc is lost since its node is down); the node's fault, not the task's: berth starts it again elsewhere (attempt 1 of 5)"}},
		{"node's fault, backing off", stateInput{Prev: view.StateStarting, Held: true, Spec: running(), Retrying: true, Waiting: true,
			Retry: retry{end: drivers.Exit{Class: drivers.EndNodeFault, Node: "dgx-1", Message: "failed to reserve device"}, attempt: 2,
				until: time.Date(2026, 3, 2, 10, 0, 10, 0, time.UTC)}},
			stateOutput{State: view.StatePending, ReasonKind: "moving",
				Reason: "moving: its allocation on node dgx-1 ended (failed to reserve device); the node's fault, not the task's: berth starts it again elsewhere at 10:00:10 UTC (attempt 2 of 5)"}},
		{"node's fault, given up", stateInput{Prev: view.StatePending, Spec: running(), HasEnded: true,
			Ended: drivers.Exit{Failed: true, Class: drivers.EndNodeFault, Node: "dgx-1", Message: "failed to reserve device"}},
			stateOutput{State: view.StateFailed, ReasonKind: "exited",
				Reason: "its runs ended by the node's fault 6 times in a row, the last: its allocation on node dgx-1 ended (failed to reserve device)" + again}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := cloneStateInput(c.in)
			got := nextState(c.in)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("nextState:\n got %+v\nwant %+v", got, c.want)
			}
			if !reflect.DeepEqual(c.in, before) {
				t.Errorf("nextState mutated its input:\n got %+v\nwant %+v", c.in, before)
			}
		})
	}
}

// cloneStateInput copies in deeply enough to see nextState mutate it.
func cloneStateInput(in stateInput) stateInput {
	c := in
	if in.Spec != nil {
		s := *in.Spec
		c.Spec = &s
	}
	if in.Decision != nil {
		d := *in.Decision
		c.Decision = &d
	}
	if in.Allocs != nil {
		c.Allocs = make([]drivers.Alloc, len(in.Allocs))
		for i, a := range in.Allocs {
			a.GPUs = append([]string(nil), a.GPUs...)
			c.Allocs[i] = a
		}
	}
	if in.Acted.Placements != nil {
		c.Acted.Placements = make([]drivers.Placement, len(in.Acted.Placements))
		for i, p := range in.Acted.Placements {
			p.GPUs = append([]string(nil), p.GPUs...)
			c.Acted.Placements[i] = p
		}
	}
	return c
}
