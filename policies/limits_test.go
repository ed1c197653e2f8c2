package policies

import (
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
	"github.com/google/go-cmp/cmp"
)

// limitSet is a Set of one tier and project, with workspaces named by
// refs of project ml, each with spec edit applied.
func limitSet(edit map[string]func(*schema.WorkspaceSpec)) *schema.Set {
	set := &schema.Set{Policy: schema.DefaultPolicy(),
		Tiers:    []schema.PriorityTier{{Meta: schema.Meta{Name: "t"}, Spec: schema.TierSpec{Value: 50, Preemptible: true, CanPreempt: true}}},
		Projects: []schema.Project{{Meta: schema.Meta{Name: "ml"}, Spec: schema.ProjectSpec{Tier: "t"}}},
	}
	for name, f := range edit {
		w := schema.Workspace{Meta: schema.Meta{Name: name, Project: "ml"}, Spec: schema.WorkspaceSpec{State: schema.DesiredRunning, Replicas: 1, Resources: schema.WorkResources{GPUs: 1}}}
		f(&w.Spec)
		set.Workspaces = append(set.Workspaces, w)
	}
	set.Sort()
	return set
}

// TestAdvanceRan: how long a limited workspace ran is kept across
// advances and runs of its spec, counts a run without a record from its
// start, starts again with a run of another spec, ignores what is not
// running, and is dropped for a workspace set Stopped or unlimited.
func TestAdvanceRan(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	two := 2 * time.Hour
	zero := time.Duration(0)
	set := limitSet(map[string]func(*schema.WorkspaceSpec){
		"a":       func(s *schema.WorkspaceSpec) { s.MaxRuntime = &two },
		"b":       func(s *schema.WorkspaceSpec) { s.MaxRuntime = &two },
		"c":       func(s *schema.WorkspaceSpec) { s.MaxRuntime = &two },
		"new":     func(s *schema.WorkspaceSpec) { s.MaxRuntime = &two },
		"stopped": func(s *schema.WorkspaceSpec) { s.MaxRuntime = &two; s.State = schema.DesiredStopped },
		"free":    func(s *schema.WorkspaceSpec) { s.MaxRuntime = &zero },
		"waiting": func(s *schema.WorkspaceSpec) { s.MaxRuntime = &two },
	})
	set.Policy.Spec.Service = schema.ServicePolicy{} // limits alone first
	ref := func(n string) schema.Ref { return schema.Ref{Project: "ml", Name: n} }
	h := drivers.History{UsageAt: t0, Ran: map[schema.Ref]drivers.RunTime{
		ref("a"):       {SpecHash: "h1", Ran: time.Hour},
		ref("b"):       {SpecHash: "old", Ran: time.Hour},
		ref("stopped"): {SpecHash: "h1", Ran: time.Hour},
		ref("free"):    {SpecHash: "h1", Ran: time.Hour},
		ref("waiting"): {SpecHash: "h1", Ran: 30 * time.Minute},
	}}
	now := t0.Add(10 * time.Minute)
	snap := &drivers.Snapshot{Allocs: []drivers.Alloc{
		{Workspace: ref("a"), Phase: drivers.AllocRunning, StartedAt: t0.Add(-time.Hour), SpecHash: "h1"},
		{Workspace: ref("a"), Replica: 1, Phase: drivers.AllocRunning, StartedAt: t0.Add(-time.Hour), SpecHash: "h1"},
		{Workspace: ref("b"), Phase: drivers.AllocRunning, StartedAt: t0.Add(-time.Hour), SpecHash: "h2"},
		{Workspace: ref("c"), Phase: drivers.AllocStarting, StartedAt: t0},
		{Workspace: ref("new"), Phase: drivers.AllocRunning, StartedAt: t0.Add(-3 * time.Hour), SpecHash: "h1"},
	}}
	got := AdvanceHistory(h, set, snap, now).Ran
	want := map[schema.Ref]drivers.RunTime{
		ref("a"):       {SpecHash: "h1", Ran: time.Hour + 10*time.Minute}, // two replicas count the wall time once
		ref("b"):       {SpecHash: "h2", Ran: 70 * time.Minute},           // another spec: from its start
		ref("new"):     {SpecHash: "h1", Ran: 3*time.Hour + 10*time.Minute},
		ref("waiting"): {SpecHash: "h1", Ran: 30 * time.Minute},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Ran (-want +got):\n%s", diff)
	}
	if h.Ran[ref("a")].Ran != time.Hour {
		t.Error("AdvanceHistory changed its input")
	}
	if got := AdvanceHistory(h, &schema.Set{Policy: set.Policy}, snap, now).Ran; got != nil {
		t.Errorf("without limits or ordering, Ran = %v, want none", got)
	}
	// Attained-service ordering keeps every running workspace's, limited
	// or not: free's too.
	set.Policy.Spec.Service = schema.DefaultPolicy().Spec.Service
	got = AdvanceHistory(h, set, snap, now).Ran
	want[ref("free")] = drivers.RunTime{SpecHash: "h1", Ran: time.Hour}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("with ordering, Ran (-want +got):\n%s", diff)
	}
}

// TestAdvanceIdle: a reading of every GPU under the rule's below starts
// or extends a run of idle readings; a busy one ends it; a workspace with
// a GPU unread keeps what it had; a span of an earlier run is over.
func TestAdvanceIdle(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	rule := func(s *schema.WorkspaceSpec) { s.Idle = schema.IdleRule{After: time.Hour, Below: 5} }
	set := limitSet(map[string]func(*schema.WorkspaceSpec){
		"idle": rule, "busy": rule, "fresh": rule, "unread": rule, "resumed": rule,
		"norule": func(*schema.WorkspaceSpec) {},
	})
	ref := func(n string) schema.Ref { return schema.Ref{Project: "ml", Name: n} }
	use := func(at time.Time, p ...float64) *drivers.GPUUse { return &drivers.GPUUse{At: at, Percent: p} }
	old := drivers.IdleSpan{Since: t0.Add(-2 * time.Hour), Last: t0.Add(-time.Minute)}
	h := drivers.History{UsageAt: t0, Idle: map[schema.Ref]drivers.IdleSpan{
		ref("idle"): old, ref("busy"): old, ref("unread"): old, ref("resumed"): old,
	}}
	now := t0.Add(time.Minute)
	run := func(n string, start time.Time, u *drivers.GPUUse, gpus ...string) drivers.Alloc {
		return drivers.Alloc{Workspace: ref(n), Phase: drivers.AllocRunning, StartedAt: start, GPUs: gpus, Use: u}
	}
	snap := &drivers.Snapshot{Allocs: []drivers.Alloc{
		run("busy", t0.Add(-5*time.Hour), use(now, 1, 40), "g0", "g1"),
		run("fresh", t0.Add(-5*time.Hour), use(now, 4.9), "g2"),
		run("idle", t0.Add(-5*time.Hour), use(now, 0, 0), "g3", "g4"),
		run("norule", t0.Add(-5*time.Hour), use(now, 0), "g5"),
		run("resumed", t0.Add(-10*time.Minute), use(now, 0), "g6"),
		run("unread", t0.Add(-5*time.Hour), use(now, 0), "g7", "g8"), // one GPU unread
	}}
	got := AdvanceHistory(h, set, snap, now).Idle
	want := map[schema.Ref]drivers.IdleSpan{
		ref("idle"):    {Since: old.Since, Last: now},
		ref("fresh"):   {Since: now, Last: now},
		ref("unread"):  old,
		ref("resumed"): {Since: now, Last: now},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Idle (-want +got):\n%s", diff)
	}
}

// TestRecordDecisionEnded: a workspace stopped idle is kept with its
// spec's fingerprint and the reason's first part; it is forgotten once
// it waits or runs (its spec changed), is set Stopped, or leaves.
func TestRecordDecisionEnded(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	set := limitSet(map[string]func(*schema.WorkspaceSpec){"nb": func(*schema.WorkspaceSpec) {}, "back": func(*schema.WorkspaceSpec) {}})
	ref := func(n string) schema.Ref { return schema.Ref{Project: "ml", Name: n} }
	h := drivers.History{Ended: map[schema.Ref]drivers.Ended{
		ref("back"): {Class: drivers.EndIdle, SpecHash: "old"},
		ref("gone"): {Class: drivers.EndIdle, SpecHash: "old"},
	}}
	d := Decision{Now: t0, Workspaces: []WorkspaceDecision{
		{Ref: ref("back"), Verdict: VerdictWait, Reason: Reason{ReasonQueue, "queue"}},
		{Ref: ref("nb"), Verdict: VerdictStop, Reason: Reason{ReasonIdle, "idle: every GPU under 1% for 4h; it stops with its checkpoint grace and runs again only when its spec changes"}},
	}}
	got := RecordDecision(h, set, d).Ended
	want := map[schema.Ref]drivers.Ended{ref("nb"): {Class: drivers.EndIdle, At: t0, SpecHash: drivers.Fingerprint(&set.Workspace(ref("nb")).Spec), Reason: "idle: every GPU under 1% for 4h"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Ended (-want +got):\n%s", diff)
	}
}
