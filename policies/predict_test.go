package policies

import (
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
	"github.com/google/go-cmp/cmp"
)

func hours(hs ...float64) []time.Duration {
	out := make([]time.Duration, len(hs))
	for i, h := range hs {
		out[i] = time.Duration(h * float64(time.Hour))
	}
	return out
}

func predictWS(project, owner string, gpus, replicas int, stated time.Duration) *schema.Workspace {
	return &schema.Workspace{Meta: schema.Meta{Name: "w", Project: project},
		Spec: schema.WorkspaceSpec{Owner: owner, Replicas: replicas, ExpectedDuration: stated, Resources: schema.WorkResources{GPUs: gpus}}}
}

// TestRecordRuns: a completed run counts under its owner and size, its
// owner, its project's size and its project; each key keeps the last
// RunTimeSamples; the input history is not changed.
func TestRecordRuns(t *testing.T) {
	h := drivers.History{RunTimes: map[string][]time.Duration{"ml": hours(1)}}
	got := RecordRuns(h, []Run{{Project: "ml", Owner: "ada", GPUs: 8, Took: 2 * time.Hour}, {Project: "ml", GPUs: 1, Took: time.Hour}})
	want := map[string][]time.Duration{
		"ml/ada/8": hours(2), "ml/ada": hours(2), "ml//8": hours(2), "ml": hours(1, 2, 1), "ml//1": hours(1),
	}
	if diff := cmp.Diff(want, got.RunTimes); diff != "" {
		t.Errorf("RunTimes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(hours(1), h.RunTimes["ml"]); diff != "" {
		t.Errorf("input changed (-want +got):\n%s", diff)
	}
	for i := range 2 * RunTimeSamples {
		got = RecordRuns(got, []Run{{Project: "ml", GPUs: 1, Took: time.Duration(i+1) * time.Minute}})
	}
	s := got.RunTimes["ml//1"]
	if len(s) != RunTimeSamples || s[len(s)-1] != 2*RunTimeSamples*time.Minute || s[0] != (RunTimeSamples+1)*time.Minute {
		t.Errorf("ml//1 keeps %d samples from %s to %s; want the last %d", len(s), s[0], s[len(s)-1], RunTimeSamples)
	}
}

// TestPredict: the most specific history with enough runs is used, else
// the broadest that has any; a stated expectedDuration sets the median
// and the history its spread; nothing known is not Known.
func TestPredict(t *testing.T) {
	h := &drivers.History{RunTimes: map[string][]time.Duration{
		"ml/ada/8": hours(4, 2),             // too few for the owner and size
		"ml/ada":   hours(3, 1, 2),          // enough: the owner's runs
		"ml//8":    hours(10, 10, 10, 10),   // the size, any owner
		"ml":       hours(1, 2, 3, 4, 5, 6), // every run
		"cv":       hours(5),                // one run only
	}}
	type want struct {
		basis             string
		low, median, high time.Duration
		known             bool
	}
	tests := map[string]struct {
		ws   *schema.Workspace
		want want
	}{
		"owner":                {predictWS("ml", "ada", 4, 2, 0), want{"its owner's runs", time.Hour, 2 * time.Hour, 3 * time.Hour, true}},
		"no owner: size":       {predictWS("ml", "", 8, 1, 0), want{"its project's runs of its size", 10 * time.Hour, 10 * time.Hour, 10 * time.Hour, true}},
		"no owner, other size": {predictWS("ml", "", 2, 1, 0), want{"its project's runs", time.Hour, 3 * time.Hour, 5 * time.Hour, true}},
		"one run":              {predictWS("cv", "bob", 1, 1, 0), want{"its project's runs", 5 * time.Hour, 5 * time.Hour, 5 * time.Hour, true}},
		"no history":           {predictWS("nlp", "ada", 1, 1, 0), want{"", 0, 0, 0, false}},
		"stated, no history":   {predictWS("nlp", "ada", 1, 1, 6*time.Hour), want{"", 6 * time.Hour, 6 * time.Hour, 6 * time.Hour, true}},
		// The owner's runs (1h, 2h, 3h) scaled to a stated 4h: 2h, 4h, 6h.
		"stated with history": {predictWS("ml", "ada", 4, 2, 4*time.Hour), want{"its owner's runs", 2 * time.Hour, 4 * time.Hour, 6 * time.Hour, true}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			r := Predict(h, tt.ws)
			got := want{r.Basis, r.Quantile(0.1), r.Quantile(0.5), r.Quantile(0.9), r.Known()}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("prediction (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRemaining: what is left of a running workspace is measured among
// the run times longer than what it has run; past all of them, up to as
// long again.
func TestRemaining(t *testing.T) {
	r := RunTime{Samples: hours(1, 2, 3, 4, 10)}
	tests := map[string]struct {
		elapsed time.Duration
		q       float64
		want    time.Duration
	}{
		"fresh median":         {0, 0.5, 3 * time.Hour},
		"after 2.5h, median":   {150 * time.Minute, 0.5, 90 * time.Minute}, // among 3h, 4h, 10h: 4h
		"after 2.5h, low":      {150 * time.Minute, 0.1, 30 * time.Minute},
		"after 2.5h, high":     {150 * time.Minute, 0.9, 450 * time.Minute},
		"past every run, high": {12 * time.Hour, 0.9, 648 * time.Minute},
		"past every run, low":  {12 * time.Hour, 0.1, 72 * time.Minute},
	}
	for name, tt := range tests {
		if got := r.Remaining(tt.elapsed, tt.q); got != tt.want {
			t.Errorf("%s: Remaining(%s, %v) = %s, want %s", name, tt.elapsed, tt.q, got, tt.want)
		}
	}
	stated := RunTime{Stated: 6 * time.Hour}
	if got := stated.Remaining(2*time.Hour, 0.5); got != 4*time.Hour {
		t.Errorf("stated 6h after 2h: %s left, want 4h", got)
	}
	if got := (RunTime{}).Remaining(time.Hour, 0.5); got != 0 {
		t.Errorf("nothing known: %s left, want 0", got)
	}
}

// TestLikelyStarts: the queue's likely start, from what runs and what is
// ahead.
func TestLikelyStarts(t *testing.T) {
	ref := func(n string) schema.Ref { return schema.Ref{Project: "ml", Name: n} }
	known := func(hs ...float64) RunTime { return RunTime{Samples: hours(hs...)} }
	stated := func(h float64) RunTime { return RunTime{Stated: time.Duration(h * float64(time.Hour))} }
	tests := map[string]struct {
		free    int
		holders []Holder
		queue   []Waiter
		want    []string
	}{
		"no history: unknown": {
			free:    0,
			holders: []Holder{{GPUs: 4}, {GPUs: 4}, {GPUs: 2}},
			queue:   []Waiter{{ref("a"), 1, RunTime{}}},
			want:    []string{"unknown: no run time known for 3 running workspaces"},
		},
		"free now": {
			free:  2,
			queue: []Waiter{{ref("a"), 2, RunTime{}}},
			want:  []string{"now: the GPUs it needs are free"},
		},
		"expectedDuration given: used": {
			free:    0,
			holders: []Holder{{GPUs: 4, Elapsed: 30 * time.Minute, Run: stated(2)}},
			queue:   []Waiter{{ref("a"), 4, stated(1)}, {ref("b"), 4, RunTime{}}},
			want:    []string{"in 1h30m (from 1 stated duration)", "in 2h30m (from 2 stated durations)"},
		},
		"gang waiting for several GPUs": {
			// 2 free; 2 more in about an hour, 4 in about three: the
			// 2×4 gang starts when all are free, the single after it
			// when the gang is done.
			free: 2,
			holders: []Holder{
				{GPUs: 2, Run: known(0.5, 1, 1.5)},
				{GPUs: 4, Elapsed: time.Hour, Run: known(2, 4, 6)},
			},
			queue: []Waiter{{ref("gang"), 8, known(10)}, {ref("one"), 1, known(1)}},
			want: []string{
				"in 1h–5h (most likely 3h; from 6 past runs)",
				"in 11h–15h (most likely 13h; from 7 past runs)",
			},
		},
		"leaving holder frees at once": {
			free:    0,
			holders: []Holder{{GPUs: 2, Leaving: true}},
			queue:   []Waiter{{ref("a"), 2, RunTime{}}},
			want:    []string{"now: the GPUs it needs are free"},
		},
		"unknown ahead": {
			free:    1,
			holders: []Holder{{GPUs: 1, Run: known(1)}},
			queue:   []Waiter{{ref("a"), 1, RunTime{}}, {ref("b"), 2, known(1)}},
			want:    []string{"now: the GPUs it needs are free", "unknown: no run time known for 1 workspace ahead of it in the queue"},
		},
		"too big": {
			free:  4,
			queue: []Waiter{{ref("a"), 8, known(1)}, {ref("b"), 2, known(1)}},
			want:  []string{"unknown: it needs more GPUs than the cluster has", "now: the GPUs it needs are free"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			starts := LikelyStarts(tt.free, tt.holders, tt.queue)
			var got []string
			for i, s := range starts {
				if s.Ref != tt.queue[i].Ref {
					t.Errorf("start %d is %s, want %s", i, s.Ref, tt.queue[i].Ref)
				}
				got = append(got, s.String())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("likely starts (-want +got):\n%s", diff)
			}
		})
	}
}
