package reconcile

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
	"pgregory.net/rapid"
)

// TestLoopConvergesProperty: on any small cluster and any set of
// workspaces, with the real decision engine, the loop (1) never has an
// action refused by the cluster (no GPU overcommit, no start on a GPU
// still held), (2) never starts a workspace that is already running or
// stops one twice, and (3) settles: once nothing is starting or stopping,
// a further cycle plans nothing.
func TestLoopConvergesProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var nodes []string
		for i := range rapid.IntRange(1, 3).Draw(t, "nodes") {
			preset := rapid.SampledFrom([]string{"dgx-h100", "single-h100"}).Draw(t, "preset")
			nodes = append(nodes, fmt.Sprintf("  - {name: n%d, preset: %s}", i, preset))
		}
		spec, err := sim.Parse([]byte("apiVersion: berth.dev/v1\nkind: Cluster\nspec:\n  nodes:\n" + joinLines(nodes)))
		if err != nil {
			t.Fatal(err)
		}
		set := tiersAndProjects()
		set.Projects[0].Spec.BorrowLimit.GPUs = schema.Unlimited
		set.Projects[1].Spec.BorrowLimit.GPUs = schema.Unlimited
		for i := range rapid.IntRange(1, 8).Draw(t, "workspaces") {
			project := rapid.SampledFrom([]string{"hi", "med"}).Draw(t, "project")
			desired := schema.DesiredRunning
			if rapid.IntRange(0, 4).Draw(t, "stopped") == 0 {
				desired = schema.DesiredStopped
			}
			w := workspace(project, fmt.Sprintf("w%d", i), desired)
			w.Spec.Resources.GPUs = rapid.SampledFrom([]int{1, 2, 4}).Draw(t, "gpus")
			set.Workspaces = append(set.Workspaces, w)
		}
		set.Sort()
		clock := sim.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		c := sim.New(*spec, clock)
		l, err := New(Config{Source: &fakeSource{rev: "r1"}, Cluster: c, Store: c, Load: testSets{"r1": set}.load})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		settled := false
		for cycle := 0; cycle < 30 && !settled; cycle++ {
			res, err := l.Once(ctx)
			if err != nil {
				t.Fatalf("cycle %d: %v", cycle, err)
			}
			settled = !res.Settling && res.Plan.Empty()
			clock.Advance(15 * time.Second)
		}
		if !settled {
			t.Fatalf("not settled after 30 cycles: %+v", l.Status().Workspaces)
		}
		live := map[schema.Ref]bool{}
		for _, a := range c.Applied() {
			switch a.Kind {
			case drivers.ActionStart:
				if live[a.Workspace] {
					t.Fatalf("started %s while it was running", a.Workspace)
				}
				live[a.Workspace] = true
			case drivers.ActionStop, drivers.ActionPreempt:
				if !live[a.Workspace] {
					t.Fatalf("%s of %s, which was not running", a.Kind, a.Workspace)
				}
				live[a.Workspace] = false
			}
		}
		for _, w := range l.Status().Workspaces {
			want := view.StateRunning
			if d := set.Workspace(w.Ref()); d != nil && d.Spec.State == schema.DesiredStopped {
				want = view.StateStopped
			}
			if w.State != want && w.State != view.StatePending && w.State != view.StatePreempted {
				t.Fatalf("%s settled in %s", w.Ref(), w.State)
			}
		}
	})
}

func joinLines(lines []string) string {
	out := ""
	for _, l := range lines {
		out += l + "\n"
	}
	return out
}
