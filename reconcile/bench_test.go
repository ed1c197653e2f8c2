package reconcile

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/sim"
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
	spec := sim.Spec{Name: "bench", StartDelay: sim.DefaultStartDelay, CheckpointTime: sim.DefaultCheckpointTime}
	big, err := sim.Parse([]byte("apiVersion: berth.dev/v1\nkind: Cluster\nspec:\n  nodes:\n  - {name: dgx, count: 64, preset: dgx-h100}\n"))
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
	ctx := context.Background()
	for range 5 { // settle: start what fits
		if _, err := l.Once(ctx); err != nil {
			b.Fatal(err)
		}
		clock.Advance(time.Minute)
	}
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
