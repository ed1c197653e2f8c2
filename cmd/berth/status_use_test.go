package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/view"
)

// TestPrintGPUUse: the workspaces table has a GPU USE column when one
// has a reading: the busiest GPU's, with the mean when they differ; a
// dash for the others. Without any reading the table is as before.
func TestPrintGPUUse(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ws := []view.WorkspaceStatus{
		{Project: "ml", Name: "idle", State: view.StateRunning, Node: "n1", GPUs: []string{"g0"}, GPUUse: &view.GPUUseStatus{At: at, GPUs: 1}},
		{Project: "ml", Name: "train", State: view.StateRunning, Node: "n1", GPUs: []string{"g1", "g2"}, GPUUse: &view.GPUUseStatus{At: at, MaxPercent: 85, MeanPercent: 42.5, GPUs: 2}},
		{Project: "ml", Name: "wait", State: view.StatePending, Reason: "capacity"},
	}
	var b bytes.Buffer
	printWorkspaces(&b, ws, false)
	want := `WORKSPACE  STATE    NODE  GPUS  GPU USE         REASON
ml/idle    Running  n1    1     0%              -
ml/train   Running  n1    2     85% (mean 43%)  -
ml/wait    Pending  -     0     -               capacity
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	for i := range ws {
		ws[i].GPUUse = nil
	}
	printWorkspaces(&b, ws, false)
	if strings.Contains(b.String(), "GPU USE") {
		t.Errorf("a GPU USE column without any reading:\n%s", b.String())
	}
}
