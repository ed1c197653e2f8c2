package plan

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/policies"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/schema/schematest"
	"github.com/google/go-cmp/cmp"
)

// The specs of the plan's tests (schematest).
var (
	workspace      = schematest.Workspace
	withWorkspaces = schematest.WithWorkspaces
)

func TestNewPlan(t *testing.T) {
	med := schema.Ref{Project: "med", Name: "train"}
	hi := schema.Ref{Project: "hi", Name: "eval"}
	set := withWorkspaces(workspace("med", "train", schema.DesiredRunning), workspace("hi", "eval", schema.DesiredRunning))
	set.Revision = "r2"
	fp := drivers.Fingerprint(&set.Workspace(med).Spec)
	prio := set.Tier(set.Project("med").Spec.Tier).Spec.Value
	alloc := func(ref schema.Ref, phase drivers.AllocPhase, rev string) drivers.Alloc {
		return drivers.Alloc{Workspace: ref, Node: "n", GPUs: []string{"g0"}, Phase: phase, Revision: rev, SpecHash: fp, Priority: prio}
	}
	with := func(a drivers.Alloc, f func(*drivers.Alloc)) drivers.Alloc { f(&a); return a }
	place := []drivers.Placement{{Node: "n", GPUs: []string{"g0"}}}
	tests := map[string]struct {
		allocs    []drivers.Alloc
		decisions []policies.WorkspaceDecision
		want      []string
	}{
		"preempt, then wait for the victim, then start": {
			allocs: []drivers.Alloc{alloc(med, drivers.AllocRunning, "r2")},
			decisions: []policies.WorkspaceDecision{
				{Ref: hi, Verdict: policies.VerdictStart, Placements: place, Preempts: []schema.Ref{med}},
				{Ref: med, Verdict: policies.VerdictPreempt, PreemptedBy: &hi, Reason: policies.Reason{Kind: policies.ReasonPreempted, Message: "tier high (80) > medium (50)"}},
			},
			want: []string{"preempt med/train for hi/eval: tier high (80) > medium (50)", "wait hi/eval until med/train gone", "start hi/eval on n [g0]"},
		},
		"victim still stopping: wait, no second preempt": {
			allocs: []drivers.Alloc{alloc(med, drivers.AllocStopping, "r2")},
			decisions: []policies.WorkspaceDecision{
				{Ref: hi, Verdict: policies.VerdictStart, Placements: place, Preempts: []schema.Ref{med}},
				{Ref: med, Verdict: policies.VerdictPreempt, PreemptedBy: &hi},
			},
			want: []string{"wait hi/eval until med/train gone", "start hi/eval on n [g0]"},
		},
		"victim gone: start": {
			decisions: []policies.WorkspaceDecision{
				{Ref: hi, Verdict: policies.VerdictStart, Placements: place, Preempts: []schema.Ref{med}},
				{Ref: med, Verdict: policies.VerdictWait},
			},
			want: []string{"start hi/eval on n [g0]"},
		},
		"a GPU held by someone the decision forgot is waited for": {
			allocs: []drivers.Alloc{alloc(med, drivers.AllocStopping, "r2")},
			decisions: []policies.WorkspaceDecision{
				{Ref: hi, Verdict: policies.VerdictStart, Placements: place},
				{Ref: med, Verdict: policies.VerdictStop},
			},
			want: []string{"wait hi/eval until med/train gone", "start hi/eval on n [g0]"},
		},
		"stop what runs; nothing for what is stopping": {
			allocs: []drivers.Alloc{alloc(med, drivers.AllocRunning, "r2"), {Workspace: hi, Node: "n", GPUs: []string{"g1"}, Phase: drivers.AllocStopping}},
			decisions: []policies.WorkspaceDecision{
				{Ref: hi, Verdict: policies.VerdictStop},
				{Ref: med, Verdict: policies.VerdictStop, Reason: policies.Reason{Message: "the specs want it stopped"}},
			},
			want: []string{"stop med/train: the specs want it stopped"},
		},
		"running from an older revision that changes nothing it sees: nothing": {
			allocs:    []drivers.Alloc{alloc(med, drivers.AllocRunning, "r1")},
			decisions: []policies.WorkspaceDecision{{Ref: med, Verdict: policies.VerdictRun}},
		},
		"its task changed: update that restarts it": {
			allocs:    []drivers.Alloc{with(alloc(med, drivers.AllocRunning, "r1"), func(a *drivers.Alloc) { a.SpecHash = "older" })},
			decisions: []policies.WorkspaceDecision{{Ref: med, Verdict: policies.VerdictRun}},
			want:      []string{"update med/train on n [g0]: its task changed: restarts it where it runs"},
		},
		"its priority changed: update in place": {
			allocs:    []drivers.Alloc{with(alloc(med, drivers.AllocRunning, "r1"), func(a *drivers.Alloc) { a.Priority = prio - 10 })},
			decisions: []policies.WorkspaceDecision{{Ref: med, Verdict: policies.VerdictRun}},
			want:      []string{"update med/train on n [g0]: priority 40 → 50, in place (nothing restarts)"},
		},
		"its job drifted: put back": {
			allocs:    []drivers.Alloc{with(alloc(med, drivers.AllocRunning, "r2"), func(a *drivers.Alloc) { a.Drift = "edited" })},
			decisions: []policies.WorkspaceDecision{{Ref: med, Verdict: policies.VerdictRun}},
			want:      []string{"update med/train on n [g0]: drift: edited; berth puts it back, which restarts its task"},
		},
		"running the current revision: nothing": {
			allocs:    []drivers.Alloc{alloc(med, drivers.AllocRunning, "r2")},
			decisions: []policies.WorkspaceDecision{{Ref: med, Verdict: policies.VerdictRun}},
		},
		"an allocation the decision does not mention is stopped": {
			allocs: []drivers.Alloc{alloc(schema.Ref{Project: "old", Name: "x"}, drivers.AllocRunning, "r1")},
			want:   []string{"stop old/x: no longer in the specs"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			snap := &drivers.Snapshot{ObservedAt: time.Unix(0, 0), Allocs: tt.allocs}
			before := cloneSnap(snap)
			d := policies.Decision{Workspaces: tt.decisions}
			plan := New(set, snap, d)
			var got []string
			for _, a := range plan.Actions {
				got = append(got, strings.Join(strings.Fields(ActionLine(a)), " "))
				if (a.Kind == drivers.ActionStart || a.Kind == drivers.ActionUpdate) && (a.Spec == nil || a.Project == nil || a.Tier == nil) {
					t.Errorf("%s without its spec, project and tier", ActionLine(a))
				}
				if a.Revision != "r2" {
					t.Errorf("%s: revision %q", ActionLine(a), a.Revision)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, snap); diff != "" {
				t.Errorf("NewPlan mutated the snapshot (-before +after):\n%s", diff)
			}
			if again := New(set, snap, d); again.Text() != plan.Text() {
				t.Errorf("same input, different plan:\n%s\n%s", plan.Text(), again.Text())
			}
		})
	}
}

func cloneSnap(s *drivers.Snapshot) *drivers.Snapshot {
	c := *s
	c.Allocs = nil
	for _, a := range s.Allocs {
		a.GPUs = append([]string(nil), a.GPUs...)
		c.Allocs = append(c.Allocs, a)
	}
	return &c
}
