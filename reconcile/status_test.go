package reconcile

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/leader"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
	"github.com/google/go-cmp/cmp"
)

// TestStatusJSON keeps the status document's JSON (berth status -o json,
// /api/v1/status) as testdata/status-v2.json shows it: durations in
// seconds, an unlimited borrow limit absent, empty lists [], never null.
// It round-trips. BERTH_UPDATE=1 rewrites the file.
func TestStatusJSON(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	four := 4
	memLimit := int64(64 << 30)
	s := view.Status{
		Version: view.APIVersion, Berth: "v1.0.0", Cluster: "sim four", Clock: "cluster",
		Revision:      &view.RevisionStatus{ID: "20304850e2ce", LoadedAt: t0},
		Attempted:     &view.RevisionStatus{ID: "d5c4cedd60f5", LoadedAt: t0.Add(time.Minute), Errors: []string{"projects.yaml:7:3: there is no PriorityTier \"meduim\""}},
		Leader:        &leader.Status{Self: "berth-1", Leader: "berth-1", Leading: true, Term: 3},
		LastReconcile: &view.CycleStatus{At: t0.Add(2 * time.Minute), Duration: view.Seconds(1500 * time.Millisecond), Actions: 2},
		Projects: []view.ProjectStatus{
			{Name: "research", Tier: "low", TierValue: 20, QuotaGPUs: 4, UsedGPUs: 6, BorrowedGPUs: 2, DecayedUsage: 1200, Share: 0.5, UsageShare: 0.75},
			{Name: "vision", Tier: "medium", TierValue: 50, QuotaGPUs: 4, BorrowLimitGPUs: &four, UsedGPUs: 2, DecayedUsage: 400, Share: 0.5, UsageShare: 0.25,
				QuotaCPUMHz: 32000, UsedCPUMHz: 40000, BorrowedCPUMHz: 8000,
				QuotaMemoryBytes: 256 << 30, BorrowLimitMemoryBytes: &memLimit, UsedMemoryBytes: 200 << 30},
		},
		Workspaces: []view.WorkspaceStatus{
			{Project: "research", Name: "train", State: view.StateRunning, Node: "gpu-node", GPUs: []string{"GPU-0", "GPU-1"},
				Since: t0, Progress: view.Seconds(19*time.Minute + 500*time.Millisecond), WorkLost: view.Seconds(30 * time.Second), Revision: "20304850e2ce", Decision: "run",
				RunTime: &view.RunTimeStatus{Median: view.Seconds(3 * time.Hour), Low: view.Seconds(time.Hour), High: view.Seconds(5 * time.Hour), PastRuns: 14, Basis: "its owner's runs"}},
			{Project: "vision", Name: "sweep", State: view.StatePreempted, ReasonKind: "preempted", Reason: "preempted by research/train",
				PreemptedBy: &schema.Ref{Project: "research", Name: "train"}, Since: t0,
				RunTime:     &view.RunTimeStatus{Median: view.Seconds(6 * time.Hour), Low: view.Seconds(6 * time.Hour), High: view.Seconds(6 * time.Hour), Stated: view.Seconds(6 * time.Hour)},
				LikelyStart: &view.LikelyStart{Known: true, Earliest: t0.Add(time.Hour), Likely: t0.Add(3 * time.Hour), Latest: t0.Add(5 * time.Hour), PastRuns: 14}},
			{Project: "vision", Name: "tune", State: view.StatePending, ReasonKind: "capacity", Reason: "capacity: no node has 8 free GPUs", Since: t0,
				LikelyStart: &view.LikelyStart{UnknownRunning: 3}},
		},
		Next: "vision/sweep",
		Summary: &view.StatusSummary{Workspaces: 3, States: map[view.State]int{view.StateRunning: 1, view.StatePreempted: 1, view.StatePending: 1}, Projects: []view.ProjectCount{
			{Name: "research", Workspaces: 1, States: map[view.State]int{view.StateRunning: 1}},
			{Name: "vision", Workspaces: 2, States: map[view.State]int{view.StatePreempted: 1, view.StatePending: 1}},
		}},
	}
	got, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if bytes.Contains(got, []byte("null")) {
		t.Errorf("the status has a null:\n%s", got)
	}
	const golden = "testdata/status-v2.json"
	if os.Getenv("BERTH_UPDATE") != "" {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (BERTH_UPDATE=1 writes it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("the status JSON changed (-%s +now); a change needs a new APIVersion\n%s", golden, diff)
	}
	var back view.Status
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s, back); diff != "" {
		t.Errorf("round trip (-sent +read)\n%s", diff)
	}
	// A loop's status before its first cycle has no null either.
	h := newHarness(t, testSets{"r1": withWorkspaces()}, "r1")
	b, err := json.Marshal(h.loop.Status())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("null")) {
		t.Errorf("a status before the first cycle has a null: %s", b)
	}
}

// TestProjectStatusCPUMemory: a project whose quota names CPU and memory
// reports its use of them as the decision counts it (the spec's per
// allocation, an exclusive core as 1000m), what is beyond the quota and
// the borrow limit; a project with a GPU quota alone reports none of it.
func TestProjectStatusCPUMemory(t *testing.T) {
	set := &schema.Set{
		Projects: []schema.Project{
			{Meta: schema.Meta{Name: "gpu-only"}, Spec: schema.ProjectSpec{Quota: schema.Resources{GPUs: 2}, BorrowLimit: schema.BorrowLimit{GPUs: schema.Unlimited, CPUMHz: schema.Unlimited, MemoryBytes: schema.Unlimited}}},
			{Meta: schema.Meta{Name: "ml"}, Spec: schema.ProjectSpec{Quota: schema.Resources{GPUs: 4, CPUMHz: 8000, MemoryBytes: 64 << 30}, BorrowLimit: schema.BorrowLimit{GPUs: schema.Unlimited, CPUMHz: schema.Unlimited, MemoryBytes: 16 << 30}}},
		},
		Workspaces: []schema.Workspace{
			{Meta: schema.Meta{Name: "a", Project: "gpu-only"}, Spec: schema.WorkspaceSpec{Resources: schema.WorkResources{GPUs: 1, CPUMHz: 4000, MemoryBytes: 8 << 30}}},
			{Meta: schema.Meta{Name: "pinned", Project: "ml"}, Spec: schema.WorkspaceSpec{Resources: schema.WorkResources{GPUs: 1, ExclusiveCores: 4, MemoryBytes: 48 << 30}}},
			{Meta: schema.Meta{Name: "share", Project: "ml"}, Spec: schema.WorkspaceSpec{Resources: schema.WorkResources{GPUs: 1, CPUMHz: 6000, MemoryBytes: 8 << 30}}},
		},
	}
	set.Sort()
	snap := &drivers.Snapshot{Allocs: []drivers.Alloc{
		{Workspace: schema.Ref{Project: "gpu-only", Name: "a"}, GPUs: []string{"g0"}, CPUMHz: 4000, MemoryBytes: 8 << 30},
		// Nomad holds the cores' MHz; the quota counts a core as 1000m.
		{Workspace: schema.Ref{Project: "ml", Name: "pinned"}, GPUs: []string{"g1"}, CPUMHz: 4 * 2400, Cores: 4, MemoryBytes: 48 << 30},
		{Workspace: schema.Ref{Project: "ml", Name: "share"}, Replica: 0, GPUs: []string{"g2"}, CPUMHz: 6000, MemoryBytes: 8 << 30},
		{Workspace: schema.Ref{Project: "ml", Name: "share"}, Replica: 1, GPUs: []string{"g3"}, CPUMHz: 6000, MemoryBytes: 8 << 30},
	}}
	got := projectStatus(set, snap, &drivers.History{})
	limit := int64(16 << 30)
	want := []view.ProjectStatus{
		{Name: "gpu-only", QuotaGPUs: 2, UsedGPUs: 1, Share: 1.0 / 3}, // weighed by quota: 2 of 6
		{Name: "ml", QuotaGPUs: 4, UsedGPUs: 3, Share: 2.0 / 3,
			QuotaCPUMHz: 8000, UsedCPUMHz: 16000, BorrowedCPUMHz: 8000,
			QuotaMemoryBytes: 64 << 30, BorrowLimitMemoryBytes: &limit, UsedMemoryBytes: 64 << 30},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("project status (-want +got):\n%s", diff)
	}
}
