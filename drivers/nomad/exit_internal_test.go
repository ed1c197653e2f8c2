package nomad

import (
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad/api"
)

// TestExitsOfGarbageCollectedJob: a berth job that is dead with Stop false
// and whose allocations Nomad has garbage-collected is still an exit; the
// job summary says whether it failed. A stopped job and a running one are
// not exits; a run the cluster ended (a lost node) is, of the node's
// fault.
func TestExitsOfGarbageCollectedJob(t *testing.T) {
	meta := func(name string) map[string]string {
		return map[string]string{MetaProject: "p", MetaWorkspace: name, MetaSpecHash: "h-" + name}
	}
	berth := map[[2]string]*api.JobListStub{
		{"p", "gone-ok"}: {ID: "gone-ok", Namespace: "p", Status: "dead", Meta: meta("gone-ok"),
			JobSummary: &api.JobSummary{Summary: map[string]api.TaskGroupSummary{"replica-0": {Complete: 1}}}},
		{"p", "gone-bad"}: {ID: "gone-bad", Namespace: "p", Status: "dead", Meta: meta("gone-bad"),
			JobSummary: &api.JobSummary{Summary: map[string]api.TaskGroupSummary{"replica-0": {Failed: 1}}}},
		{"p", "stopped"}: {ID: "stopped", Namespace: "p", Status: "dead", Stop: true, Meta: meta("stopped")},
		{"p", "running"}: {ID: "running", Namespace: "p", Status: "running", Meta: meta("running")},
		{"p", "lost"}:    {ID: "lost", Namespace: "p", Status: "dead", Meta: meta("lost")},
	}
	jmi := uint64(7)
	berth[[2]string{"p", "lost"}].JobModifyIndex = jmi
	lost := &api.Allocation{ID: "a1", Namespace: "p", JobID: "lost", ClientStatus: "lost", DesiredStatus: "run",
		Job: &api.Job{JobModifyIndex: &jmi}}
	got, _ := exitsOf([]nodeData{{allocs: []*api.Allocation{lost}}}, berth)
	want := []drivers.Exit{
		{Workspace: schema.Ref{Project: "p", Name: "gone-bad"}, Failed: true, Message: "Nomad no longer has its allocations", SpecHash: "h-gone-bad", Class: drivers.EndTaskFailed},
		{Workspace: schema.Ref{Project: "p", Name: "gone-ok"}, Message: "Nomad no longer has its allocations", SpecHash: "h-gone-ok", Class: drivers.EndCompleted},
		// A run its node lost is the node's fault: berth starts it again.
		{Workspace: schema.Ref{Project: "p", Name: "lost"}, Failed: true, Message: "its allocation was lost", SpecHash: "h-lost", Class: drivers.EndNodeFault},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}

// TestEndOfClassifies: how an allocation ended decides whose fault it
// was. A task that ran and exited non-zero, or failed its validation, is
// the task's; a start that failed before the task ran (the device, the
// driver), a lost allocation and one Nomad stopped (a drain) are the
// node's; across a gang the task's failure names the run.
func TestEndOfClassifies(t *testing.T) {
	ev := func(typ string, code int, msg string) *api.TaskEvent {
		return &api.TaskEvent{Type: typ, ExitCode: code, DisplayMessage: msg}
	}
	task := func(failed bool, started bool, events ...*api.TaskEvent) map[string]*api.TaskState {
		ts := &api.TaskState{Failed: failed, Events: events}
		if started {
			ts.StartedAt = time.Unix(100, 0)
		}
		return map[string]*api.TaskState{TaskName: ts}
	}
	tests := map[string]struct {
		a     api.Allocation
		class drivers.EndClass
		code  int
		msg   string
	}{
		"completed": {api.Allocation{ClientStatus: "complete", DesiredStatus: "run", TaskStates: task(false, true, ev("Terminated", 0, "Exit Code: 0"))},
			drivers.EndCompleted, 0, ""},
		"exit 3": {api.Allocation{ClientStatus: "failed", DesiredStatus: "run", TaskStates: task(true, true, ev("Started", 0, ""), ev("Terminated", 3, "Exit Code: 3"))},
			drivers.EndTaskFailed, 3, "Exit Code: 3"},
		"validation": {api.Allocation{ClientStatus: "failed", DesiredStatus: "run", TaskStates: task(true, false, ev("Failed Validation", 0, "missing command"))},
			drivers.EndTaskFailed, 0, "missing command"},
		"device": {api.Allocation{ClientStatus: "failed", DesiredStatus: "run", TaskStates: task(true, false,
			ev("Setup Failure", 0, "failed to reserve device nvidia/gpu/H100-fake: unknown device"))},
			drivers.EndNodeFault, 0, "failed to reserve device nvidia/gpu/H100-fake: unknown device"},
		// As Nomad 1.6.5 and 2.0.5 report a secret's key its Variable
		// lacks: the task killed before it started, the spec's mistake.
		"secret key missing": {api.Allocation{ClientStatus: "failed", DesiredStatus: "run", TaskStates: task(true, false,
			ev("Task Setup", 0, "Building Task Directory"),
			ev("Killing", 0, `Template failed: (dynamic): execute: template: :2:13: executing "" at <sprig_fail "berth: Nomad Variable nomad/jobs/nokey has no key \"tokn\"">: error calling sprig_fail: berth: Nomad Variable nomad/jobs/nokey has no key "tokn"`),
			ev("Template", 0, "Missing: nomad.var.block(nomad/jobs/nokey@berth-real.global)"))},
			drivers.EndTaskFailed, 0, `its secrets could not be rendered: Nomad Variable nomad/jobs/nokey has no key "tokn"; fix spec.task.secrets or the Variable`},
		"no task state": {api.Allocation{ClientStatus: "failed", DesiredStatus: "run", ClientDescription: "failed to setup alloc"},
			drivers.EndNodeFault, 0, "failed to setup alloc"},
		"lost": {api.Allocation{ClientStatus: "lost", DesiredStatus: "run", ClientDescription: "alloc is lost since its node is down"},
			drivers.EndNodeFault, 0, "alloc is lost since its node is down"},
		"drained": {api.Allocation{ClientStatus: "complete", DesiredStatus: "stop", DesiredDescription: "alloc is being migrated",
			TaskStates: task(false, true, ev("Killed", 0, ""))},
			drivers.EndNodeFault, 0, "alloc is being migrated"},
	}
	for name, tt := range tests {
		class, code, msg := endOf(&tt.a)
		if class != tt.class || code != tt.code || msg != tt.msg {
			t.Errorf("%s: %s, %d, %q; want %s, %d, %q", name, class, code, msg, tt.class, tt.code, tt.msg)
		}
	}
}

// TestExitsNameTheLastRunOfEachReplica: of a replica's ended allocations
// only the one created last is its run; an earlier one (stopped by a job
// update) does not name the end, whatever the ID order.
func TestExitsNameTheLastRunOfEachReplica(t *testing.T) {
	jmi := uint64(9)
	meta := map[string]string{MetaProject: "p", MetaWorkspace: "w", MetaSpecHash: "h"}
	berth := map[[2]string]*api.JobListStub{{"p", "w"}: {ID: "w", Namespace: "p", Status: "pending", Meta: meta, JobModifyIndex: jmi}}
	job := &api.Job{JobModifyIndex: &jmi}
	old := &api.Allocation{ID: "a-old", Namespace: "p", JobID: "w", TaskGroup: "replica-0", NodeName: "node-1", CreateIndex: 5, Job: job,
		ClientStatus: "complete", DesiredStatus: "stop", DesiredDescription: "alloc not needed due to job update"}
	lost := &api.Allocation{ID: "z-lost", Namespace: "p", JobID: "w", TaskGroup: "replica-0", NodeName: "node-2", CreateIndex: 8, Job: job,
		ClientStatus: "lost", DesiredStatus: "run", ClientDescription: "alloc is lost since its node is down"}
	got, by := exitsOf([]nodeData{{allocs: []*api.Allocation{old, lost}}}, berth)
	if len(got) != 1 || got[0].Node != "node-2" || got[0].Message != "alloc is lost since its node is down" || by[0] != lost {
		t.Errorf("exits %+v; want the lost run on node-2 to name the end", got)
	}
}
