package baseline

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/policies"
	"github.com/berth-dev/berth/schema"
)

// benchInput is a busy cluster: 64 nodes of 8 GPUs (512), 12 projects in
// three tiers each (like the Philly replay), the GPUs nearly all held by
// running workspaces, and queued workspaces waiting behind them: the
// steady state of a replay, where most calls start little.
func benchInput(queued int) policies.Input {
	rng := rand.New(rand.NewPCG(1, 2))
	set := &schema.Set{Policy: schema.DefaultPolicy()}
	tiers := []struct {
		name  string
		value int
	}{{"high", 80}, {"low", 20}, {"medium", 50}}
	for _, t := range tiers {
		set.Tiers = append(set.Tiers, schema.PriorityTier{Meta: schema.Meta{Name: t.name}, Spec: schema.TierSpec{Value: t.value, Preemptible: true, CanPreempt: true}})
	}
	var projects []string
	for p := range 12 {
		for _, t := range tiers {
			name := fmt.Sprintf("vc%02d-%s", p, t.name)
			projects = append(projects, name)
			set.Projects = append(set.Projects, schema.Project{Meta: schema.Meta{Name: name}, Spec: schema.ProjectSpec{Tier: t.name, Quota: schema.Resources{GPUs: 14}, BorrowLimit: schema.BorrowLimit{GPUs: schema.Unlimited}}})
		}
	}
	snap := &drivers.Snapshot{ObservedAt: t0}
	for n := range 64 {
		node := drivers.Node{Name: fmt.Sprintf("node-%02d", n), Ready: true, Eligible: true}
		node.ID = node.Name
		for g := range 8 {
			node.GPUs = append(node.GPUs, drivers.GPU{ID: fmt.Sprintf("n%02d-g%d", n, g), Index: g, Model: "H100", Domain: g / 4, Healthy: true})
		}
		snap.Nodes = append(snap.Nodes, node)
	}
	hist := &drivers.History{QueuedSince: map[schema.Ref]time.Time{}}
	sizes := []int{1, 1, 1, 2, 4, 8}
	job := 0
	add := func(tier, gpus int, queued time.Time) *schema.Workspace {
		p := projects[rng.IntN(12)*len(tiers)+tier]
		w := schema.Workspace{Meta: schema.Meta{Name: fmt.Sprintf("job-%06d", job), Project: p}}
		job++
		w.Spec.State = schema.DesiredRunning
		w.Spec.Resources.GPUs = gpus
		w.Spec.Replicas = 1
		w.Spec.Preemptible = true
		set.Workspaces = append(set.Workspaces, w)
		hist.QueuedSince[w.Ref()] = queued
		return &set.Workspaces[len(set.Workspaces)-1]
	}
	// Running: fill each node with workspaces of 1 to 8 GPUs, leaving a
	// GPU free on one node in eight.
	for n := range 64 {
		free := 8
		if n%8 == 0 {
			free--
		}
		for g := 0; free > 0; {
			k := min(sizes[rng.IntN(len(sizes))], free)
			w := add(rng.IntN(len(tiers)), k, t0.Add(-time.Duration(rng.IntN(1000))*time.Minute))
			a := drivers.Alloc{Workspace: w.Ref(), Node: snap.Nodes[n].Name, Phase: drivers.AllocRunning, StartedAt: t0.Add(-time.Duration(rng.IntN(600)) * time.Minute)}
			for range k {
				a.GPUs = append(a.GPUs, snap.Nodes[n].GPUs[g].ID)
				g++
			}
			snap.Allocs = append(snap.Allocs, a)
			free -= k
		}
	}
	// Queued, in submit order (so each project's names are in queue
	// order, as in a replay): mostly low (which preempts nothing), one in
	// a hundred medium (which may preempt low).
	for i := range queued {
		tier := 1
		if rng.IntN(100) == 0 {
			tier = 2
		}
		add(tier, sizes[rng.IntN(len(sizes))], t0.Add(-time.Duration(queued-i)*7*time.Second))
	}
	set.Sort()
	sortAllocs(snap.Allocs)
	return policies.Input{Specs: set, Snapshot: snap, History: hist, Now: t0}
}

func sortAllocs(as []drivers.Alloc) {
	for i := 1; i < len(as); i++ {
		for j := i; j > 0 && as[j].Workspace.Less(as[j-1].Workspace); j-- {
			as[j], as[j-1] = as[j-1], as[j]
		}
	}
}

func benchPolicy(b *testing.B, decide func(policies.Input) policies.Decision) {
	in := benchInput(4000)
	b.ReportAllocs()
	for b.Loop() {
		decide(in)
	}
}

func BenchmarkFIFO(b *testing.B)  { benchPolicy(b, FIFO) }
func BenchmarkNomad(b *testing.B) { benchPolicy(b, Nomad) }
func BenchmarkQuota(b *testing.B) { benchPolicy(b, Quota) }
