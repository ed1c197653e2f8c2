package nomad

import (
	"testing"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad/api"
)

// TestExitsOfGarbageCollectedJob: a berth job that is dead with Stop false
// and whose allocations Nomad has garbage-collected is still an exit; the
// job summary says whether it failed. A stopped job, a running one, and a
// run the cluster ended (a lost node) are not exits.
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
	got := exitsOf([]nodeData{{allocs: []*api.Allocation{lost}}}, berth)
	want := []drivers.Exit{
		{Workspace: schema.Ref{Project: "p", Name: "gone-bad"}, Failed: true, Message: "Nomad no longer has its allocations", SpecHash: "h-gone-bad"},
		{Workspace: schema.Ref{Project: "p", Name: "gone-ok"}, Message: "Nomad no longer has its allocations", SpecHash: "h-gone-ok"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}
