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

func TestWaves(t *testing.T) {
	ref := func(name string) schema.Ref { return schema.Ref{Project: "p", Name: name} }
	act := func(k drivers.ActionKind, name string) drivers.Action {
		return drivers.Action{Kind: k, Workspace: ref(name)}
	}
	type waves struct {
		Waves [2][]int
		Held  []schema.Ref
	}
	tests := map[string]struct {
		actions []drivers.Action
		want    waves
	}{
		"empty": {},
		"stops and preemptions first, then starts and updates": {
			actions: []drivers.Action{act(drivers.ActionStop, "a"), act(drivers.ActionPreempt, "b"), act(drivers.ActionStart, "c"), act(drivers.ActionUpdate, "d")},
			want:    waves{Waves: [2][]int{{0, 1}, {2, 3}}},
		},
		"a wait holds back its start, not the others": {
			actions: []drivers.Action{act(drivers.ActionPreempt, "v"), act(drivers.ActionWait, "b"), act(drivers.ActionWait, "d"), act(drivers.ActionStart, "a"), act(drivers.ActionStart, "b"), act(drivers.ActionStart, "c"), act(drivers.ActionStart, "d"), act(drivers.ActionUpdate, "b")},
			want:    waves{Waves: [2][]int{{0}, {3, 5, 7}}, Held: []schema.Ref{ref("b"), ref("d")}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got waves
			got.Waves, got.Held = Plan{Actions: tc.actions}.Waves()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Waves (-want +got):\n%s", diff)
			}
		})
	}
}

// startPreemptUpdateStop is a revision (r2) and a cluster, its
// allocations sorted, where the sorted decision starts hi/eval after
// preempting med/train, keeps med/a running (its allocations, of r1, get
// an update) and does not mention old/x (stopped as forgotten).
func startPreemptUpdateStop() (*schema.Set, []drivers.Alloc, []policies.WorkspaceDecision) {
	ref := func(p, n string) schema.Ref { return schema.Ref{Project: p, Name: n} }
	a, b, c, gone := ref("hi", "eval"), ref("med", "a"), ref("med", "train"), ref("old", "x")
	set := withWorkspaces(workspace("hi", "eval", schema.DesiredRunning), workspace("med", "a", schema.DesiredRunning), workspace("med", "train", schema.DesiredRunning))
	set.Revision = "r2"
	alloc := func(r schema.Ref, replica int, gpu string) drivers.Alloc {
		return drivers.Alloc{Workspace: r, Replica: replica, Node: "n", GPUs: []string{gpu}, Phase: drivers.AllocRunning, Revision: "r1", SpecHash: "older"}
	}
	allocs := []drivers.Alloc{alloc(b, 0, "g0"), alloc(b, 1, "g1"), alloc(c, 0, "g2"), alloc(gone, 0, "g3")}
	decided := []policies.WorkspaceDecision{
		{Ref: a, Verdict: policies.VerdictStart, Placements: []drivers.Placement{{Node: "n", GPUs: []string{"g2"}}}, Preempts: []schema.Ref{c}},
		{Ref: b, Verdict: policies.VerdictRun},
		{Ref: c, Verdict: policies.VerdictPreempt, PreemptedBy: &a},
	}
	return set, allocs, decided
}

// TestNewAnyOrder: the plan of allocations and a decision out of order
// (New walks them together when both are sorted) is the plan of the
// same sorted.
func TestNewAnyOrder(t *testing.T) {
	set, sorted, decided := startPreemptUpdateStop()
	want := New(set, &drivers.Snapshot{Allocs: sorted}, policies.Decision{Workspaces: decided})
	if len(want.Actions) != 5 {
		t.Fatalf("sorted: %d actions, want 5 (preempt, stop, wait, start, update):\n%s", len(want.Actions), want.Text())
	}
	tests := map[string]struct {
		allocs    []drivers.Alloc
		decisions []policies.WorkspaceDecision
	}{
		"allocations out of order":                {allocs: []drivers.Alloc{sorted[2], sorted[0], sorted[3], sorted[1]}, decisions: decided},
		"allocations of a workspace apart":        {allocs: []drivers.Alloc{sorted[0], sorted[2], sorted[1], sorted[3]}, decisions: decided},
		"decision out of order":                   {allocs: sorted, decisions: []policies.WorkspaceDecision{decided[2], decided[0], decided[1]}},
		"both out of order":                       {allocs: []drivers.Alloc{sorted[3], sorted[0], sorted[2], sorted[1]}, decisions: []policies.WorkspaceDecision{decided[1], decided[2], decided[0]}},
		"decision out of order, forgetting first": {allocs: sorted, decisions: []policies.WorkspaceDecision{decided[2], decided[1]}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			w := want
			if len(tt.decisions) < len(decided) {
				w = New(set, &drivers.Snapshot{Allocs: sorted}, policies.Decision{Workspaces: []policies.WorkspaceDecision{decided[1], decided[2]}})
			}
			got := New(set, &drivers.Snapshot{Allocs: tt.allocs}, policies.Decision{Workspaces: tt.decisions})
			if diff := cmp.Diff(w.Text(), got.Text()); diff != "" {
				t.Errorf("plan (-sorted +out of order):\n%s", diff)
			}
		})
	}
}

// TestSettled: Options.Settled plans what New does for the workspaces
// the decision stops, preempts or starts, and checks nothing else.
func TestSettled(t *testing.T) {
	set, allocs, decided := startPreemptUpdateStop()
	snap := &drivers.Snapshot{Allocs: allocs}
	d := policies.Decision{Workspaces: decided}
	want := "preempt  med/train for hi/eval\nwait     hi/eval until med/train gone\nstart    hi/eval on n [g2]\n"
	if got := NewWith(set, snap, d, Options{Settled: true}).Text(); got != want {
		t.Errorf("settled: got\n%s\nwant\n%s", got, want)
	}
	// New plans the update of med/a and the stop of old/x besides.
	if got := New(set, snap, d); len(got.Actions) != 5 {
		t.Errorf("New: %d actions, want 5:\n%s", len(got.Actions), got.Text())
	}
}
