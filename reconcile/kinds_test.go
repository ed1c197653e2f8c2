package reconcile

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// kindsFleet is a two-kind fleet (h100, l40s at weight 0.5) with a
// model no kind matches (an A10) and MIG instances of an A100 no kind
// matches either. Project ml's quota names both kinds (h100 with a
// borrow limit, l40s without) besides gpus; project plain's names none,
// so its workspace that asks for h100 counts against its gpus. On the
// cluster: ml's train holds 3 H100s (one beyond its kind's quota), its
// serve an L40S, its misc (no kind) the A10 and a MIG instance, and an
// allocation of ml/gone, which the specs no longer list, an H100: ml's
// gpus account holds 3; plain's big holds an H100.
func kindsFleet() (*schema.Set, *drivers.Snapshot) {
	set := &schema.Set{
		Kinds: []schema.GPUKind{
			{Meta: schema.Meta{Name: "l40s"}, Spec: schema.GPUKindSpec{Match: "NVIDIA L40S", Weight: 0.5}},
			{Meta: schema.Meta{Name: "h100"}, Spec: schema.GPUKindSpec{Match: "NVIDIA H100*"}},
		},
		Tiers: []schema.PriorityTier{{Meta: schema.Meta{Name: "medium"}, Spec: schema.TierSpec{Value: 50}}},
		Projects: []schema.Project{
			{Meta: schema.Meta{Name: "ml"}, Spec: schema.ProjectSpec{Tier: "medium",
				Quota:       schema.Resources{GPUs: 1, Kinds: map[string]int{"h100": 2, "l40s": 4}},
				BorrowLimit: schema.BorrowLimit{GPUs: 1, CPUMHz: schema.Unlimited, MemoryBytes: schema.Unlimited, Kinds: map[string]int{"h100": 1}}}},
			{Meta: schema.Meta{Name: "plain"}, Spec: schema.ProjectSpec{Tier: "medium",
				Quota:       schema.Resources{GPUs: 2},
				BorrowLimit: schema.BorrowLimit{GPUs: schema.Unlimited, CPUMHz: schema.Unlimited, MemoryBytes: schema.Unlimited}}},
		},
		Workspaces: []schema.Workspace{
			{Meta: schema.Meta{Name: "train", Project: "ml"}, Spec: schema.WorkspaceSpec{Resources: schema.WorkResources{GPUs: 3, GPUKind: "h100"}}},
			{Meta: schema.Meta{Name: "serve", Project: "ml"}, Spec: schema.WorkspaceSpec{Resources: schema.WorkResources{GPUs: 1, GPUKind: "l40s"}}},
			{Meta: schema.Meta{Name: "misc", Project: "ml"}, Spec: schema.WorkspaceSpec{Resources: schema.WorkResources{GPUs: 2}}},
			{Meta: schema.Meta{Name: "big", Project: "plain"}, Spec: schema.WorkspaceSpec{Resources: schema.WorkResources{GPUs: 1, GPUKind: "h100"}}},
		},
	}
	set.Sort()
	const h100, l40s, a10, mig = "NVIDIA H100 80GB HBM3", "NVIDIA L40S", "NVIDIA A10", "NVIDIA A100-SXM4-80GB MIG 2g.20gb"
	gpus := func(model string, ids ...string) []drivers.GPU {
		var out []drivers.GPU
		for i, id := range ids {
			out = append(out, drivers.GPU{ID: id, Index: i, Model: model, Healthy: true})
		}
		return out
	}
	snap := &drivers.Snapshot{
		Nodes: []drivers.Node{
			{Name: "dgx", Ready: true, Eligible: true, GPUs: gpus(h100, "h0", "h1", "h2", "h3", "h4", "h5")},
			{Name: "inf", Ready: true, Eligible: true, GPUs: append(gpus(l40s, "l0", "l1", "l2"), drivers.GPU{ID: "a0", Index: 3, Model: a10, Healthy: true})},
			{Name: "mig", Ready: true, Eligible: true, GPUs: gpus(mig, "m0", "m1", "m2")},
			// A drained node's GPUs are there, never free.
			{Name: "old", Ready: true, GPUs: gpus(l40s, "l3")},
		},
		Allocs: []drivers.Alloc{
			{Workspace: schema.Ref{Project: "ml", Name: "gone"}, Node: "dgx", GPUs: []string{"h5"}},
			{Workspace: schema.Ref{Project: "ml", Name: "misc"}, Node: "inf", GPUs: []string{"a0"}},
			{Workspace: schema.Ref{Project: "ml", Name: "misc"}, Node: "mig", Replica: 1, GPUs: []string{"m0"}},
			{Workspace: schema.Ref{Project: "ml", Name: "serve"}, Node: "inf", GPUs: []string{"l0"}},
			{Workspace: schema.Ref{Project: "ml", Name: "train"}, Node: "dgx", GPUs: []string{"h0", "h1", "h2"}},
			{Workspace: schema.Ref{Project: "plain", Name: "big"}, Node: "dgx", GPUs: []string{"h3"}},
		},
	}
	return set, snap
}

// TestProjectStatusKinds: a project whose quota names kinds reports each
// kind's account (quota, borrow limit, used, borrowed), and its
// top-level figures are its gpus account's: the workspaces of no kind it
// names and an allocation of a workspace the specs no longer list. A
// project whose quota names no kind counts every GPU, its workspace's
// kind or not. The status's ClusterGPUs count each kind's devices (a
// model no kind matches stands for its own), and /metrics has a series
// per account, labelled with its kind.
func TestProjectStatusKinds(t *testing.T) {
	set, snap := kindsFleet()
	got := projectStatus(set, snap, &drivers.History{})
	one := 1
	want := []view.ProjectStatus{
		{Name: "ml", Tier: "medium", TierValue: 50, QuotaGPUs: 1, BorrowLimitGPUs: &one, UsedGPUs: 3, BorrowedGPUs: 2,
			Kinds: []view.KindQuotaStatus{
				{Kind: "h100", QuotaGPUs: 2, BorrowLimitGPUs: &one, UsedGPUs: 3, BorrowedGPUs: 1},
				{Kind: "l40s", QuotaGPUs: 4, UsedGPUs: 1},
			}},
		{Name: "plain", Tier: "medium", TierValue: 50, QuotaGPUs: 2, UsedGPUs: 1},
	}
	want[0].Share, want[1].Share = 7.0/9, 2.0/9 // weighed by quota: ml's 1+2+4 of 9
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("project status (-want +got):\n%s", diff)
	}

	caps := drivers.GPUsByKind(set, snap)
	wantCaps := []view.KindCapacity{
		{Kind: "h100", GPUs: 6, Free: 1, GPUEquivalents: 6, FreeGPUEquivalents: 1},
		{Kind: "l40s", GPUs: 4, Free: 2, GPUEquivalents: 2, FreeGPUEquivalents: 1},
		{Model: "NVIDIA A10", GPUs: 1, Free: 0, GPUEquivalents: 1},
		{Model: "NVIDIA A100-SXM4-80GB MIG 2g.20gb", GPUs: 3, Free: 2, GPUEquivalents: 0.857, FreeGPUEquivalents: 0.571},
	}
	if diff := cmp.Diff(wantCaps, caps); diff != "" {
		t.Errorf("cluster GPUs (-want +got):\n%s", diff)
	}
	set.Kinds = nil
	if c := drivers.GPUsByKind(set, snap); c != nil {
		t.Errorf("cluster GPUs of a fleet without kinds: %+v, want none", c)
	}

	m := view.NewMetrics()
	m.ObserveStatus(slices.Values([]*view.WorkspaceStatus(nil)), got, time.Time{})
	const series = `
# HELP berth_project_borrowed_gpus The GPUs a project holds beyond its quota, by quota account (kind: a GPU kind its quota names, or none).
# TYPE berth_project_borrowed_gpus gauge
berth_project_borrowed_gpus{kind="",project="ml",tier="medium"} 2
berth_project_borrowed_gpus{kind="",project="plain",tier="medium"} 0
berth_project_borrowed_gpus{kind="h100",project="ml",tier="medium"} 1
berth_project_borrowed_gpus{kind="l40s",project="ml",tier="medium"} 0
# HELP berth_project_quota_gpus The GPUs a project's quota guarantees it, by quota account: kind="" (no kind label) is quota.gpus, a GPU kind's name its quota.kinds.
# TYPE berth_project_quota_gpus gauge
berth_project_quota_gpus{kind="",project="ml",tier="medium"} 1
berth_project_quota_gpus{kind="",project="plain",tier="medium"} 2
berth_project_quota_gpus{kind="h100",project="ml",tier="medium"} 2
berth_project_quota_gpus{kind="l40s",project="ml",tier="medium"} 4
# HELP berth_project_used_gpus The GPUs a project's workspaces hold, by quota account (kind: a GPU kind its quota names, or none).
# TYPE berth_project_used_gpus gauge
berth_project_used_gpus{kind="",project="ml",tier="medium"} 3
berth_project_used_gpus{kind="",project="plain",tier="medium"} 1
berth_project_used_gpus{kind="h100",project="ml",tier="medium"} 3
berth_project_used_gpus{kind="l40s",project="ml",tier="medium"} 1
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(series),
		"berth_project_quota_gpus", "berth_project_used_gpus", "berth_project_borrowed_gpus"); err != nil {
		t.Error(err)
	}
}
