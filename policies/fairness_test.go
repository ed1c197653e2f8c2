package policies

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
)

// TestFairShareWeights runs two projects of the same tier, weights 2 and
// 1, no quotas, both always wanting more than the whole cluster, over
// three simulated days: a decision every 5 minutes, 1-GPU jobs that run
// 50–90 minutes, usage decayed with a 1-day half-life. Their GPU-time ends
// within 10% of 2:1.
func TestFairShareWeights(t *testing.T) {
	const (
		step    = 5 * time.Minute
		horizon = 3 * 24 * time.Hour
		backlog = 20 // workspaces each project keeps asking to run
	)
	now := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	tiers := []schema.PriorityTier{{Meta: schema.Meta{Name: "medium"}, Spec: schema.TierSpec{Value: 50, Preemptible: true, CanPreempt: true}}}
	projects := []schema.Project{
		{Meta: schema.Meta{Name: "a"}, Spec: schema.ProjectSpec{Tier: "medium", BorrowLimit: schema.BorrowLimit{GPUs: schema.Unlimited}, FairShare: schema.FairShare{Weight: 2}}},
		{Meta: schema.Meta{Name: "b"}, Spec: schema.ProjectSpec{Tier: "medium", BorrowLimit: schema.BorrowLimit{GPUs: schema.Unlimited}, FairShare: schema.FairShare{Weight: 1}}},
	}
	policy := schema.DefaultPolicy()
	policy.Spec.FairShare.HalfLife = 24 * time.Hour
	snap := &drivers.Snapshot{}
	for n := range 2 {
		node := drivers.Node{Name: fmt.Sprintf("n%d", n), Ready: true, Eligible: true}
		for g := range 8 {
			node.GPUs = append(node.GPUs, drivers.GPU{ID: fmt.Sprintf("g%d", g), Index: g, Model: "H100", Domain: g / 4, Healthy: true})
		}
		snap.Nodes = append(snap.Nodes, node)
	}
	active := map[string][]string{}
	next := 0
	newJob := func(p string) {
		active[p] = append(active[p], fmt.Sprintf("j%05d", next))
		next++
	}
	for range backlog {
		newJob("a")
		newJob("b")
	}
	duration := func(name string) time.Duration {
		var n int
		fmt.Sscanf(name, "j%05d", &n)
		return time.Duration(50+(n*7)%41) * time.Minute
	}
	hist := &drivers.History{UsageAt: now}
	used := map[string]float64{}
	for end := now.Add(horizon); now.Before(end); now = now.Add(step) {
		// Jobs that ran their time finish and leave the specs; each
		// project asks for a new one in its place.
		var allocs []drivers.Alloc
		for _, a := range snap.Allocs {
			if now.Sub(a.StartedAt) >= duration(a.Workspace.Name) {
				names := active[a.Workspace.Project]
				for i, n := range names {
					if n == a.Workspace.Name {
						active[a.Workspace.Project] = append(names[:i:i], names[i+1:]...)
					}
				}
				newJob(a.Workspace.Project)
				continue
			}
			allocs = append(allocs, a)
		}
		snap.Allocs = allocs
		set := &schema.Set{Revision: "fair", Tiers: tiers, Projects: projects, Policy: policy}
		for _, p := range []string{"a", "b"} {
			for _, n := range active[p] {
				set.Workspaces = append(set.Workspaces, schema.Workspace{Meta: schema.Meta{Name: n, Project: p}, Spec: schema.WorkspaceSpec{
					State: schema.DesiredRunning, Replicas: 1, Preemptible: true, Resources: schema.WorkResources{GPUs: 1},
				}})
			}
		}
		set.Sort()
		in := Input{Specs: set, Snapshot: snap, History: hist, Now: now}
		d := Decide(in)
		for _, w := range d.Workspaces {
			if w.Verdict == VerdictPreempt {
				t.Fatalf("%s: equal tiers preempted for fair share: %s", now, w.Ref)
			}
		}
		next := apply(in, d, now)
		snap, hist = next.Snapshot, next.History
		for _, a := range snap.Allocs {
			used[a.Workspace.Project] += float64(len(a.GPUs)) * step.Seconds()
		}
	}
	ratio := used["a"] / used["b"]
	t.Logf("GPU-hours over 3 days: a (weight 2) %.0f, b (weight 1) %.0f, ratio %.3f", used["a"]/3600, used["b"]/3600, ratio)
	if math.Abs(ratio-2)/2 > 0.10 {
		t.Errorf("GPU-time ratio %.3f, want within 10%% of 2", ratio)
	}
	if total := (used["a"] + used["b"]) / horizon.Seconds(); total < 15 {
		t.Errorf("the cluster ran %.1f GPUs on average, want it kept full (16)", total)
	}
}
