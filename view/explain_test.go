package view

import (
	"testing"
	"time"

	"github.com/berth-dev/berth/schema"
	"github.com/google/go-cmp/cmp"
)

func TestExplain(t *testing.T) {
	at := func(m int) time.Time { return time.Date(2026, 3, 2, 10, m, 0, 0, time.UTC) }
	by := &schema.Ref{Project: "hi", Name: "eval"}
	preempted := []Transition{
		{At: at(0), To: StateStarting},
		{At: at(1), From: StateStarting, To: StateRunning},
		{At: at(20), From: StateRunning, To: StatePreempting, PreemptedBy: by, Reason: "tier high (80) outranks tier medium (50)", Progress: Seconds(19 * time.Minute)},
		{At: at(21), From: StatePreempting, To: StatePreempted, PreemptedBy: by, Progress: Seconds(19 * time.Minute)},
	}
	resumed := append(preempted[:len(preempted):len(preempted)],
		Transition{At: at(40), From: StatePreempted, To: StateStarting, Progress: Seconds(19 * time.Minute)},
		Transition{At: at(41), From: StateStarting, To: StateRunning, Progress: Seconds(19 * time.Minute)})
	tests := map[string]struct {
		ws      WorkspaceStatus
		history []Transition
		want    []string
	}{
		"pending on quota": {
			ws:   WorkspaceStatus{Project: "med", Name: "train", State: StatePending, Since: at(5), ReasonKind: "quota", Reason: "project med uses 8 of its 8 GPUs; needs 2"},
			want: []string{"med/train is pending since 10:05:00: project med uses 8 of its 8 GPUs; needs 2."},
		},
		"starting, its task held for a secret": {
			ws: WorkspaceStatus{Project: "ml", Name: "train", State: StateStarting, Since: at(5), Node: "dgx-1", GPUs: []string{"gpu-0"},
				ReasonKind: ReasonWaiting, Reason: "its task waits for its secrets: Nomad Variable ml/hf (namespace ml) does not exist: write it"},
			want: []string{"ml/train is starting on dgx-1 (GPUs gpu-0) since 10:05:00, and its task waits for its secrets: Nomad Variable ml/hf (namespace ml) does not exist: write it."},
		},
		"starting": {
			ws:   WorkspaceStatus{Project: "ml", Name: "train", State: StateStarting, Since: at(5), Node: "dgx-1", GPUs: []string{"gpu-0"}, Reason: "placed"},
			want: []string{"ml/train is starting on dgx-1 (GPUs gpu-0) since 10:05:00."},
		},
		"waiting for its victims": {
			ws: WorkspaceStatus{Project: "hi", Name: "eval", State: StatePending, Since: at(20), ReasonKind: "preempting", Reason: "starts after preempting med/train"},
			want: []string{"hi/eval is pending since 10:20:00: starts after preempting med/train.",
				"It has preempted lower-tier workspaces and starts once they have checkpointed and released their GPUs."},
		},
		"preempted": {
			ws:      WorkspaceStatus{Project: "med", Name: "train", State: StatePreempted, Since: at(21), PreemptedBy: by, Reason: "tier high (80) outranks tier medium (50)", Progress: Seconds(19 * time.Minute)},
			history: preempted,
			want: []string{"med/train was preempted by hi/eval at 10:21:00: tier high (80) outranks tier medium (50).",
				"It keeps its place in the queue and resumes on its own, from its last checkpoint, when capacity returns.",
				"Progress so far: 19m0s; no work lost."},
		},
		"resumed": {
			ws:      WorkspaceStatus{Project: "med", Name: "train", State: StateRunning, Since: at(41), Node: "gpu-1", GPUs: []string{"GPU-0123456789ab-cdef"}, Progress: Seconds(20 * time.Minute), WorkLost: Seconds(30 * time.Second)},
			history: resumed,
			want: []string{"med/train is running on gpu-1 (GPUs GPU-01234567) since 10:41:00.",
				"It was preempted by hi/eval at 10:20:00 (tier high (80) outranks tier medium (50)) and resumed at 10:40:00 from 19m0s of progress.",
				"Progress so far: 20m0s; work lost to preemptions and failures: 30s."},
		},
		"of a kind": {
			ws: WorkspaceStatus{Project: "ml", Name: "train", State: StatePending, Since: at(5), GPUKind: "h100", ReasonKind: "quota", Reason: "project ml uses 8 of its 8 GPUs of kind h100; needs 2"},
			want: []string{"ml/train is pending since 10:05:00: project ml uses 8 of its 8 GPUs of kind h100; needs 2.",
				"It asks for GPUs of kind h100."},
		},
		"a gang with ports": {
			ws: WorkspaceStatus{Project: "ml", Name: "nb", State: StateRunning, Since: at(1), Node: "a,b", Endpoints: []Endpoint{
				{Replica: 0, Label: "http", Address: "http://10.0.0.5:20000/"}, {Replica: 1, Label: "http", Address: "http://10.0.0.6:20000/"}}},
			want: []string{"ml/nb is running on a,b since 10:01:00.",
				"Connect: replica 0 http at http://10.0.0.5:20000/; replica 1 http at http://10.0.0.6:20000/."},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Explain(tt.ws, tt.history, time.Time{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
