package view

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/policies"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/schema/schematest"
	"github.com/google/go-cmp/cmp"
)

func TestNodeViews(t *testing.T) {
	ref := schema.Ref{Project: "ml", Name: "train"}
	snap := &drivers.Snapshot{
		Nodes: []drivers.Node{
			{Name: "b", Ready: true, Eligible: false, GPUs: []drivers.GPU{
				{ID: "b0", Index: 0, Model: "H100", Domain: 0, NUMA: 0, Healthy: true},
				{ID: "b1", Index: 1, Model: "H100", Domain: 1, NUMA: 1, Healthy: false},
			}},
			{Name: "a", Ready: false, TopologyGuessed: true, GPUs: []drivers.GPU{{ID: "a0", Model: "A100", Healthy: true}}},
		},
		Allocs: []drivers.Alloc{{Workspace: ref, Node: "b", GPUs: []string{"b0"}, Phase: drivers.AllocStopping}},
	}
	want := []NodeView{
		{Name: "a", TopologyGuessed: true, GPUs: []GPUView{{ID: "a0", Model: "A100", Healthy: true}}},
		{Name: "b", Ready: true, GPUs: []GPUView{
			{ID: "b0", Model: "H100", Healthy: true, Workspace: "ml/train", Project: "ml", Phase: "stopping"},
			{ID: "b1", Index: 1, Model: "H100", Domain: 1, NUMA: 1},
		}},
	}
	if diff := cmp.Diff(want, nodeViews(snap)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestEventKind(t *testing.T) {
	tests := map[string]struct {
		t    Transition
		want string
	}{
		"started":    {Transition{From: StateStarting, To: StateRunning}, "started"},
		"resumed":    {Transition{From: StateStarting, To: StateRunning, Reason: "resumed from its checkpoint at 25m of progress; 0s of work lost"}, "resumed"},
		"preempted":  {Transition{From: StateRunning, To: StatePreempting}, "preempted"},
		"vacated":    {Transition{From: StatePreempting, To: StatePreempted}, "vacated"},
		"stopped":    {Transition{From: StateRunning, To: StateStopped}, "stopped"},
		"failed":     {Transition{From: StateRunning, To: StateFailed}, "failed"},
		"new starts": {Transition{To: StateStarting}, "starting"},
	}
	for name, tt := range tests {
		if got := eventKind(tt.t); got != tt.want {
			t.Errorf("%s: %q, want %q", name, got, tt.want)
		}
	}
}

// TestQueueOrder: the queue follows the decision's order; workspaces the
// decision did not number come last, by name.
func TestQueueOrder(t *testing.T) {
	set := schematest.WithWorkspaces(schematest.Workspace("med", "a", schema.DesiredRunning), schematest.Workspace("med", "b", schema.DesiredRunning),
		schematest.Workspace("hi", "c", schema.DesiredRunning), schematest.Workspace("hi", "d", schema.DesiredRunning), schematest.Workspace("hi", "off", schema.DesiredStopped))
	set.Sort()
	at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	d := &policies.Decision{Workspaces: []policies.WorkspaceDecision{
		{Ref: schema.Ref{Project: "hi", Name: "c"}, Verdict: policies.VerdictWait, Queue: 2},
		{Ref: schema.Ref{Project: "hi", Name: "d"}, Verdict: policies.VerdictWait},
		{Ref: schema.Ref{Project: "med", Name: "a"}, Verdict: policies.VerdictWait, Queue: 3},
		{Ref: schema.Ref{Project: "med", Name: "b"}, Verdict: policies.VerdictStart, Queue: 1, Preempts: []schema.Ref{{Project: "hi", Name: "x"}}},
	}}
	hist := &drivers.History{QueuedSince: map[schema.Ref]time.Time{{Project: "med", Name: "a"}: at}}
	var ws []WorkspaceStatus
	for _, r := range []string{"hi/c", "hi/d", "hi/off", "med/a", "med/b", "hi/running"} {
		p, n, _ := strings.Cut(r, "/")
		st := StatePending
		if n == "running" {
			st = StateRunning
		}
		ws = append(ws, WorkspaceStatus{Project: p, Name: n, State: st})
	}
	var got []string
	for _, q := range queue(ws, Inputs{Set: set, Decision: d, History: hist}) {
		got = append(got, fmt.Sprintf("%d %s %s", q.Position, q.Workspace, q.Tier))
	}
	want := []string{"1 med/b medium", "2 hi/c high", "3 med/a medium", "0 hi/d high"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("queue (-want +got):\n%s", diff)
	}
}
