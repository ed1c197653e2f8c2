package view

import (
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/google/go-cmp/cmp"
)

// TestUseOf: a workspace's reading is over all its replicas' GPUs read:
// the busiest, the mean, how many, and the oldest time; none without a
// reading.
func TestUseOf(t *testing.T) {
	t1 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	t0 := t1.Add(-20 * time.Second)
	allocs := []drivers.Alloc{
		{Replica: 0, GPUs: []string{"g0", "g1"}, Use: &drivers.GPUUse{At: t1, Percent: []float64{0, 90}}},
		{Replica: 1, GPUs: []string{"g2", "g3"}, Use: &drivers.GPUUse{At: t0, Percent: []float64{30}}}, // g3 reports none
		{Replica: 2, GPUs: []string{"MIG-1"}},
	}
	want := &GPUUseStatus{At: t0, MaxPercent: 90, MeanPercent: 40, GPUs: 3}
	if d := cmp.Diff(want, UseOf(allocs)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if u := UseOf(allocs[2:]); u != nil {
		t.Errorf("no reading: %+v, want nil", u)
	}
	if u := UseOf([]drivers.Alloc{{GPUs: []string{"g"}, Use: &drivers.GPUUse{At: t0, Percent: []float64{0}}}}); u == nil || u.MaxPercent != 0 || u.MeanPercent != 0 {
		t.Errorf("one idle GPU: %+v, want 0%%", u)
	}
}

// TestExplainUse: explain says how busy the GPUs are, and how many
// report none.
func TestExplainUse(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ws := WorkspaceStatus{Project: "ml", Name: "nb", State: StateRunning, Since: at, Node: "n", GPUs: []string{"GPU-a", "GPU-b", "MIG-c"},
		GPUUse: &GPUUseStatus{At: at.Add(time.Minute), MaxPercent: 85, MeanPercent: 42.5, GPUs: 2}}
	want := []string{"ml/nb is running on n (GPUs GPU-a, GPU-b, MIG-c) since 12:00:00.",
		"GPU utilization: 85% at most over its 2 GPUs, 43% on average, read at 12:01:00 (1 of its GPUs report none)."}
	if d := cmp.Diff(want, Explain(ws, nil, at)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	ws.GPUs, ws.GPUUse = ws.GPUs[:1], &GPUUseStatus{At: at, MaxPercent: 0.2, MeanPercent: 0.2, GPUs: 1}
	if got := Explain(ws, nil, at)[1]; got != "GPU utilization: <1%, read at 12:00:00." {
		t.Errorf("got %q", got)
	}
}

// TestFeedUse: a new reading sends a workspace again only when its
// figures moved by a whole percent, not every sampling interval.
func TestFeedUse(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	w := WorkspaceStatus{Project: "ml", Name: "nb", State: StateRunning, GPUUse: &GPUUseStatus{At: at, MaxPercent: 40, MeanPercent: 40, GPUs: 1}}
	later := w
	later.GPUUse = &GPUUseStatus{At: at.Add(time.Minute), MaxPercent: 40.2, MeanPercent: 40.2, GPUs: 1}
	if !sameWorkspace(&w, &later) {
		t.Error("a reading a minute later with the same figure counts as a change")
	}
	busy := w
	busy.GPUUse = &GPUUseStatus{At: at, MaxPercent: 85, MeanPercent: 85, GPUs: 1}
	none := w
	none.GPUUse = nil
	if sameWorkspace(&w, &busy) || sameWorkspace(&w, &none) {
		t.Error("a changed figure, or a reading gone, counts as the same")
	}
}
