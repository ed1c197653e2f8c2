package policies

import (
	"math"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestAdvanceUsage(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	hl := time.Hour
	ref := schema.Ref{Project: "ml", Name: "train"}
	tau := hl.Seconds() / math.Ln2
	tests := map[string]struct {
		h     drivers.History
		snap  drivers.Snapshot
		kinds []schema.GPUKind
		now   time.Time
		want  map[string]float64
		wantT time.Time
	}{
		"one half-life halves usage": {
			h:    drivers.History{UsageAt: t0, Usage: map[string]float64{"ml": 1000}},
			now:  t0.Add(hl),
			want: map[string]float64{"ml": 500}, wantT: t0.Add(hl),
		},
		"a running GPU adds its decayed seconds": {
			h:    drivers.History{UsageAt: t0},
			snap: drivers.Snapshot{Allocs: []drivers.Alloc{{Workspace: ref, GPUs: []string{"g0", "g1"}, StartedAt: t0.Add(-time.Hour)}}},
			now:  t0.Add(hl),
			// 2 GPUs over one half-life: 2·τ·(1−½).
			want: map[string]float64{"ml": 2 * tau * 0.5}, wantT: t0.Add(hl),
		},
		"an allocation started after UsageAt counts from its start": {
			h:    drivers.History{UsageAt: t0},
			snap: drivers.Snapshot{Allocs: []drivers.Alloc{{Workspace: ref, GPUs: []string{"g0"}, StartedAt: t0.Add(hl)}}},
			now:  t0.Add(2 * hl),
			want: map[string]float64{"ml": tau * 0.5}, wantT: t0.Add(2 * hl),
		},
		"a MIG instance counts its slices of a GPU, a kind its weight": {
			h: drivers.History{UsageAt: t0},
			snap: drivers.Snapshot{
				Nodes: []drivers.Node{{Name: "a", GPUs: []drivers.GPU{{ID: "m0", Model: "A100 MIG 3g.40gb"}, {ID: "l0", Model: "L40S"}}}},
				Allocs: []drivers.Alloc{
					{Workspace: ref, Node: "a", GPUs: []string{"m0"}, StartedAt: t0},
					{Workspace: schema.Ref{Project: "cv", Name: "serve"}, Node: "a", GPUs: []string{"l0"}, StartedAt: t0},
				}},
			kinds: []schema.GPUKind{{Meta: schema.Meta{Name: "l40s"}, Spec: schema.GPUKindSpec{Match: "L40S", Weight: 0.5}}},
			now:   t0.Add(hl),
			want:  map[string]float64{"ml": 3.0 / 7 * tau * 0.5, "cv": 0.5 * tau * 0.5}, wantT: t0.Add(hl),
		},
		"now before UsageAt changes nothing": {
			h:    drivers.History{UsageAt: t0, Usage: map[string]float64{"ml": 7}},
			now:  t0.Add(-time.Minute),
			want: map[string]float64{"ml": 7}, wantT: t0,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			before := mustJSON(t, tt.h)
			got := AdvanceUsage(tt.h, tt.snap, tt.now, hl, tt.kinds)
			if diff := cmp.Diff(tt.want, got.Usage, cmpopts.EquateApprox(1e-9, 1e-6)); diff != "" {
				t.Errorf("usage (-want +got):\n%s", diff)
			}
			if !got.UsageAt.Equal(tt.wantT) {
				t.Errorf("UsageAt = %s, want %s", got.UsageAt, tt.wantT)
			}
			if mustJSON(t, tt.h) != before {
				t.Errorf("AdvanceUsage changed its input")
			}
		})
	}
}

func TestRecordDecision(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	a, b, c, gone := schema.Ref{Project: "p", Name: "a"}, schema.Ref{Project: "p", Name: "b"}, schema.Ref{Project: "p", Name: "c"}, schema.Ref{Project: "p", Name: "gone"}
	e, f, g, s := schema.Ref{Project: "q", Name: "e"}, schema.Ref{Project: "q", Name: "f"}, schema.Ref{Project: "q", Name: "g"}, schema.Ref{Project: "q", Name: "s"}
	h := drivers.History{
		QueuedSince: map[schema.Ref]time.Time{a: t0.Add(-time.Hour), gone: t0.Add(-time.Hour)},
		Preempted:   map[schema.Ref]drivers.Preemption{b: {Victim: b, By: c, At: t0.Add(-time.Hour)}},
		// a (preempted now), f (waits), s (stopped) and gone lose their
		// label; b keeps its in-quota one, e is promoted, g borrows still.
		Borrowing: map[schema.Ref]bool{a: false, b: false, e: true, f: true, g: true, s: false, gone: true},
	}
	d := Decision{Now: t0, Workspaces: []WorkspaceDecision{
		{Ref: a, Verdict: VerdictPreempt, PreemptedBy: &c, Right: RightPriority, Reason: Reason{ReasonPreempted, "preempted by p/c"}},
		{Ref: b, Verdict: VerdictRun},
		{Ref: c, Verdict: VerdictStart, Borrowed: true},
		{Ref: e, Verdict: VerdictRun},
		{Ref: f, Verdict: VerdictWait},
		{Ref: g, Verdict: VerdictRun, Borrowed: true},
		{Ref: s, Verdict: VerdictStop},
	}}
	got := RecordDecision(h, nil, d)
	want := drivers.History{
		QueuedSince: map[schema.Ref]time.Time{a: t0.Add(-time.Hour), b: t0, c: t0, e: t0, f: t0, g: t0},
		Preempted:   map[schema.Ref]drivers.Preemption{a: {Victim: a, By: c, At: t0, Reason: "preempted by p/c"}},
		Borrowing:   map[schema.Ref]bool{b: false, c: true, e: false, g: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	if _, ok := h.Preempted[a]; ok || !h.Borrowing[e] {
		t.Errorf("RecordDecision changed its input")
	}
}

func TestDecideEmptyInput(t *testing.T) {
	d := Decide(Input{Now: time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)})
	if len(d.Workspaces) != 0 {
		t.Errorf("empty input decided %d workspaces", len(d.Workspaces))
	}
}
