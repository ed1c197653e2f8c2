package reconcile

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/plan"
	"github.com/berth-dev/berth/policies"
	"github.com/berth-dev/berth/schema"
)

// BenchmarkOnce measures one reconcile cycle (load skipped: the revision
// is unchanged) with the real decision engine on a simulated cluster of
// 64 DGX H100 nodes (512 GPUs) and 600 workspaces in 12 projects, once
// the cluster has settled.
func BenchmarkOnce(b *testing.B) {
	s := tiersAndProjects()
	s.Projects = nil
	for p := range 12 {
		tier := []string{"medium", "high"}[p%2]
		s.Projects = append(s.Projects, schema.Project{Meta: schema.Meta{Name: fmt.Sprintf("team-%02d", p)},
			Spec: schema.ProjectSpec{Tier: tier, Quota: schema.Resources{GPUs: 40}, BorrowLimit: schema.BorrowLimit{GPUs: schema.Unlimited}, FairShare: schema.FairShare{Weight: 1}}})
	}
	for i := range 600 {
		w := workspace(fmt.Sprintf("team-%02d", i%12), fmt.Sprintf("ws-%03d", i), schema.DesiredRunning)
		w.Spec.Resources.GPUs = []int{1, 2, 4, 8}[i%4]
		s.Workspaces = append(s.Workspaces, w)
	}
	s.Sort()
	l, c, clock := settledLoop(b, s, 64, 5)
	ctx := context.Background()
	snap, _ := c.Observe(ctx)
	running := 0
	for _, a := range snap.Allocs {
		if a.Phase == drivers.AllocRunning {
			running += len(a.GPUs)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		clock.Advance(time.Second)
		if _, err := l.Once(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(running), "gpus-busy")
}

// BenchmarkOnceFleet measures one idle cycle at fleet size (issue 25):
// 10,000 workspaces in 20 projects (300 with one or two GPUs, the rest
// CPU only) on 51 simulated DGX H100 nodes, once everything that fits
// runs; nothing changes between cycles. Profile it with -cpuprofile.
func BenchmarkOnceFleet(b *testing.B) {
	s := fleetSpecs()
	l, c, clock := settledLoop(b, s, 51, 4)
	ctx := context.Background()
	snap, _ := c.Observe(ctx)
	if len(snap.Allocs) < 9000 {
		b.Fatalf("%d allocations after settling, want most of 10,000", len(snap.Allocs))
	}
	if p := os.Getenv("BERTH_CYCLE_PROFILE"); p != "" {
		// The idle cycles alone, without the settling before them.
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	b.ResetTimer()
	for b.Loop() {
		clock.Advance(time.Second)
		if _, err := l.Once(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(snap.Allocs)), "allocs")
}

// BenchmarkDryRunFleet measures berth plan's cycle at fleet size: DryRun
// (a fresh loop's whole cycle, run dry) on the settled 10,000-workspace
// fleet of BenchmarkOnceFleet, beside what berth plan computed before it
// ran the loop's cycle (the decision and the plan alone).
func BenchmarkDryRunFleet(b *testing.B) {
	s := fleetSpecs()
	_, c, _ := settledLoop(b, s, 51, 4)
	ctx := context.Background()
	snap, _ := c.Observe(ctx)
	hist, _ := c.LoadHistory(ctx)
	b.Run("dry-run", func(b *testing.B) {
		for b.Loop() {
			if _, err := DryRun(ctx, DryRunInput{Set: s, Snapshot: snap, History: hist}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decide+plan", func(b *testing.B) {
		for b.Loop() {
			d := policies.Decide(policies.Input{Specs: s, Snapshot: &snap, History: &hist, Now: snap.ObservedAt})
			plan.New(s, &snap, d)
		}
	})
}

// fleetSpecs is the fleet of BenchmarkOnceFleet: 10,000 workspaces in 20
// projects, 300 with one or two GPUs, the rest CPU only.
func fleetSpecs() *schema.Set {
	s := tiersAndProjects()
	s.Projects = nil
	for p := range 20 {
		s.Projects = append(s.Projects, schema.Project{Meta: schema.Meta{Name: fmt.Sprintf("team-%02d", p)},
			Spec: schema.ProjectSpec{Tier: []string{"medium", "high"}[p%2], Quota: schema.Resources{GPUs: 20}, BorrowLimit: schema.BorrowLimit{GPUs: schema.Unlimited, CPUMHz: schema.Unlimited, MemoryBytes: schema.Unlimited}, FairShare: schema.FairShare{Weight: 1}}})
	}
	for i := range 10000 {
		w := workspace(fmt.Sprintf("team-%02d", i%20), fmt.Sprintf("ws-%05d", i), schema.DesiredRunning)
		w.Spec.Resources.GPUs = 0
		if i%33 == 0 {
			w.Spec.Resources.GPUs = 1 + i%2
		}
		w.Spec.Resources.CPUMHz = 100
		w.Spec.Resources.MemoryBytes = 128 << 20
		s.Workspaces = append(s.Workspaces, w)
	}
	s.Sort()
	return s
}

// settledLoop is a loop over s on a simulated cluster of nodes DGX H100
// nodes, run for cycles cycles a minute apart so that what fits starts.
func settledLoop(b *testing.B, s *schema.Set, nodes, cycles int) (*Loop, *sim.Cluster, *sim.ManualClock) {
	b.Helper()
	spec := sim.Spec{Name: "bench", StartDelay: sim.DefaultStartDelay, CheckpointTime: sim.DefaultCheckpointTime}
	big, err := sim.Parse(fmt.Appendf(nil, "apiVersion: berth.dev/v1\nkind: Cluster\nspec:\n  nodes:\n  - {name: dgx, count: %d, preset: dgx-h100}\n", nodes))
	if err != nil {
		b.Fatal(err)
	}
	spec.Nodes = big.Nodes
	clock := sim.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := sim.New(spec, clock)
	l, err := New(Config{Source: &fakeSource{rev: "r1"}, Cluster: c, Store: c, Load: testSets{"r1": s}.load})
	if err != nil {
		b.Fatal(err)
	}
	for range cycles {
		if _, err := l.Once(context.Background()); err != nil {
			b.Fatal(err)
		}
		clock.Advance(time.Minute)
	}
	return l, c, clock
}
