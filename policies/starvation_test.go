package policies

import (
	"fmt"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
)

// TestNoStarvation: one 8-GPU node kept busy by a stream of 1-GPU jobs of
// project small (a new one arrives whenever one finishes, each runs 20–60
// minutes); project big, same tier and with more past usage, asks for all
// 8 GPUs at once. Fair share alone would keep giving freed GPUs to the
// 1-GPU arrivals until big's usage decays (about 40 hours here); the
// starvation guard starts it once its aging is at the maximum and the GPUs
// it holds have freed, and the small jobs run again after it.
func TestNoStarvation(t *testing.T) {
	const step = 5 * time.Minute
	now := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	tiers := []schema.PriorityTier{{Meta: schema.Meta{Name: "medium"}, Spec: schema.TierSpec{Value: 50, Preemptible: true, CanPreempt: true}}}
	projects := []schema.Project{
		{Meta: schema.Meta{Name: "big"}, Spec: schema.ProjectSpec{Tier: "medium", BorrowLimit: schema.BorrowLimit{GPUs: schema.Unlimited}, FairShare: schema.FairShare{Weight: 1}}},
		{Meta: schema.Meta{Name: "small"}, Spec: schema.ProjectSpec{Tier: "medium", BorrowLimit: schema.BorrowLimit{GPUs: schema.Unlimited}, FairShare: schema.FairShare{Weight: 1}}},
	}
	policy := schema.DefaultPolicy()
	policy.Spec.FairShare.HalfLife = 24 * time.Hour
	node := drivers.Node{Name: "n1", Ready: true, Eligible: true}
	for g := range 8 {
		node.GPUs = append(node.GPUs, drivers.GPU{ID: fmt.Sprintf("g%d", g), Index: g, Model: "H100", Domain: g / 4, Healthy: true})
	}
	snap := &drivers.Snapshot{Nodes: []drivers.Node{node}}
	var small []string
	next := 0
	arrive := func() {
		small = append(small, fmt.Sprintf("s%05d", next))
		next++
	}
	duration := func(name string) time.Duration {
		var n int
		fmt.Sscanf(name, "s%05d", &n)
		return time.Duration(20+(n*13)%41) * time.Minute
	}
	// The node starts full of small jobs at staggered ages.
	for g := range 8 {
		arrive()
		snap.Allocs = append(snap.Allocs, drivers.Alloc{Workspace: schema.Ref{Project: "small", Name: small[g]}, Node: "n1", GPUs: []string{fmt.Sprintf("g%d", g)}, Phase: drivers.AllocRunning, StartedAt: now.Add(-time.Duration(g*5) * time.Minute)})
	}
	for range 4 {
		arrive()
	}
	hist := &drivers.History{UsageAt: now, Usage: map[string]float64{"big": 8 * 3600 * 10, "small": 0}}
	bigStarted, smallAfter := time.Time{}, false
	for end := now.Add(48 * time.Hour); now.Before(end); now = now.Add(step) {
		var allocs []drivers.Alloc
		for _, a := range snap.Allocs {
			if a.Workspace.Project == "small" && now.Sub(a.StartedAt) >= duration(a.Workspace.Name) {
				for i, n := range small {
					if n == a.Workspace.Name {
						small = append(small[:i:i], small[i+1:]...)
					}
				}
				arrive()
				continue
			}
			allocs = append(allocs, a)
		}
		snap.Allocs = allocs
		set := &schema.Set{Revision: "starve", Tiers: tiers, Projects: projects, Policy: policy}
		// The big job runs 2 hours, then leaves the specs.
		if bigStarted.IsZero() || now.Sub(bigStarted) < 2*time.Hour {
			set.Workspaces = append(set.Workspaces, schema.Workspace{Meta: schema.Meta{Name: "train", Project: "big"}, Spec: schema.WorkspaceSpec{
				State: schema.DesiredRunning, Replicas: 1, Preemptible: true, Resources: schema.WorkResources{GPUs: 8},
			}})
		}
		for _, n := range small {
			set.Workspaces = append(set.Workspaces, schema.Workspace{Meta: schema.Meta{Name: n, Project: "small"}, Spec: schema.WorkspaceSpec{
				State: schema.DesiredRunning, Replicas: 1, Preemptible: true, Resources: schema.WorkResources{GPUs: 1},
			}})
		}
		set.Sort()
		in := Input{Specs: set, Snapshot: snap, History: hist, Now: now}
		d := Decide(in)
		for _, w := range d.Workspaces {
			if w.Ref.Project == "big" && w.Verdict == VerdictStart && bigStarted.IsZero() {
				bigStarted = now
			}
			if w.Ref.Project == "small" && w.Verdict == VerdictStart && !bigStarted.IsZero() && now.After(bigStarted) {
				smallAfter = true
			}
		}
		nx := apply(in, d, now)
		snap, hist = nx.Snapshot, nx.History
		if smallAfter {
			break
		}
	}
	start := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	if bigStarted.IsZero() {
		t.Fatalf("the 8-GPU job never started in 48 hours while 1-GPU jobs kept arriving")
	}
	t.Logf("the 8-GPU job started after %s", bigStarted.Sub(start))
	// Aging saturates after 10 steps of 10 minutes; from then on the
	// starvation guard holds every GPU that frees, and the longest small
	// job runs 60 minutes.
	if bound := 100*time.Minute + 60*time.Minute + step; bigStarted.Sub(start) > bound {
		t.Errorf("the 8-GPU job waited %s, want at most %s", bigStarted.Sub(start), bound)
	}
	if !smallAfter {
		t.Errorf("no small job started after the big one")
	}
}
