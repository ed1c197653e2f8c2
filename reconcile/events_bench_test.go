package reconcile

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/schema"
)

// BenchmarkOnceDashboard measures one reconcile cycle on 512 DGX H100
// nodes (4096 GPUs) with 1000 workspaces, with 0, 1 and 100 browsers
// subscribed to the event feed (each drained as fast as it comes): what
// the dashboard adds to the loop is the difference.
func BenchmarkOnceDashboard(b *testing.B) {
	for _, browsers := range []int{0, 1, 100} {
		b.Run(fmt.Sprintf("browsers=%d", browsers), func(b *testing.B) {
			s := tiersAndProjects()
			s.Projects = nil
			for p := range 16 {
				tier := []string{"medium", "high"}[p%2]
				s.Projects = append(s.Projects, schema.Project{Meta: schema.Meta{Name: fmt.Sprintf("team-%02d", p)},
					Spec: schema.ProjectSpec{Tier: tier, Quota: schema.Resources{GPUs: 240}, BorrowLimit: schema.BorrowLimit{GPUs: schema.Unlimited}, FairShare: schema.FairShare{Weight: 1}}})
			}
			for i := range 1000 {
				w := workspace(fmt.Sprintf("team-%02d", i%16), fmt.Sprintf("ws-%04d", i), schema.DesiredRunning)
				w.Spec.Resources.GPUs = []int{1, 2, 4, 8}[i%4]
				s.Workspaces = append(s.Workspaces, w)
			}
			s.Sort()
			big, err := sim.Parse([]byte("apiVersion: berth.dev/v1\nkind: Cluster\nspec:\n  nodes:\n  - {name: dgx, count: 512, preset: dgx-h100}\n"))
			if err != nil {
				b.Fatal(err)
			}
			clock := sim.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			c := sim.New(*big, clock)
			l, err := New(Config{Source: &fakeSource{rev: "r1"}, Cluster: c, Store: c, Load: testSets{"r1": s}.load})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			for range 5 { // settle
				if _, err := l.Once(ctx); err != nil {
					b.Fatal(err)
				}
				clock.Advance(time.Minute)
			}
			var bytes int
			for range browsers {
				sub, err := l.Subscribe(ctx)
				if err != nil {
					b.Fatal(err)
				}
				bytes = len(<-sub.ch)
				go func() {
					for {
						select {
						case <-sub.ch:
						case <-sub.ctx.Done():
							return
						}
					}
				}()
			}
			b.ResetTimer()
			for b.Loop() {
				clock.Advance(time.Second)
				if _, err := l.Once(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if got := l.FeedStats().Dropped; got != 0 {
				b.Fatalf("%d browsers dropped", got)
			}
			if browsers > 0 {
				b.ReportMetric(float64(bytes), "state-bytes")
			}
		})
	}
}
