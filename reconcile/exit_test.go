package reconcile

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
)

// TestEndedRunsAreNotStartedAgain: a task that exits 0 is Completed and a
// task that exits 3 is Failed with its code; neither is started again
// while its spec is unchanged; a changed task, or Stopped then Running,
// runs it again.
func TestEndedRunsAreNotStartedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ws := workspace("med", "train", schema.DesiredRunning)
		changed := ws
		changed.Spec.Task.Args = []string{"--epochs=4"}
		stopped := changed
		stopped.Spec.State = schema.DesiredStopped
		h := newHarness(t, testSets{
			"r1": withWorkspaces(ws), "r1-comment": withWorkspaces(ws), "r2": withWorkspaces(changed),
			"r3": withWorkspaces(stopped), "r4": withWorkspaces(changed),
		}, "r1")
		ref := ws.Ref()
		ctx := t.Context()
		starts := func(res Result) (n int) {
			for _, a := range res.Applied {
				if a.Kind == drivers.ActionStart {
					n++
				}
			}
			return n
		}
		cycle := func() Result {
			t.Helper()
			res, err := h.loop.Once(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		want := func(st view.State, reason string) {
			t.Helper()
			d, _ := h.loop.Workspace(ref)
			if d.Workspace.State != st || !strings.Contains(d.Workspace.Reason, reason) {
				t.Fatalf("%s (%q), want %s (%q)", d.Workspace.State, d.Workspace.Reason, st, reason)
			}
		}
		cycle()
		h.sleep(sim.DefaultStartDelay + time.Second)
		cycle()
		want(view.StateRunning, "")

		// 1. Exit 0: Completed, and it stays so (a new revision that
		// leaves its task alone changes nothing).
		h.cluster.Exit(ref, 0)
		if n := starts(cycle()); n != 0 {
			t.Errorf("started again at once after exit 0")
		}
		want(view.StateCompleted, "exited 0")
		h.source.set("r1-comment")
		for range 3 {
			h.sleep(time.Second)
			if n := starts(cycle()); n != 0 {
				t.Fatalf("a completed workspace was started again")
			}
		}
		want(view.StateCompleted, "exited 0")

		// 2. Its task changes: it runs again; then it exits 3: Failed.
		h.source.set("r2")
		if n := starts(cycle()); n != 1 {
			t.Fatalf("a changed task was not started again")
		}
		h.sleep(sim.DefaultStartDelay + time.Second)
		cycle()
		want(view.StateRunning, "")
		h.cluster.Exit(ref, 3)
		cycle()
		want(view.StateFailed, "code 3")
		for range 3 {
			h.sleep(time.Second)
			if n := starts(cycle()); n != 0 {
				t.Fatalf("a failed workspace was started again")
			}
		}
		d, _ := h.loop.Workspace(ref)
		if got := view.Explain(d.Workspace, d.History, time.Time{}); !strings.Contains(strings.Join(got, " "), "code 3") {
			t.Errorf("explain: %q", got)
		}

		// 3. Stopped, then Running: it runs again.
		h.source.set("r3")
		res := cycle()
		if len(res.Applied) != 1 || res.Applied[0].Kind != drivers.ActionStop {
			t.Errorf("Stopped after a failure applied %v, want one stop that clears the ended run", res.Applied)
		}
		want(view.StateStopped, "")
		h.source.set("r4")
		if n := starts(cycle()); n != 1 {
			t.Fatalf("Stopped → Running did not start it again")
		}
	})
}

func TestShortGPUsAreUnique(t *testing.T) {
	for name, tt := range map[string]struct{ in, want []string }{
		"random UUIDs: first group": {
			[]string{"GPU-8a1f6c2e-1111-4000-8000-000000000000", "GPU-9c0c05dc-2222-4000-8000-000000000000"},
			[]string{"GPU-8a1f6c2e", "GPU-9c0c05dc"}},
		"same first group: a tail tells them apart": {
			[]string{"GPU-00000000-0000-0000-0000-000000000001", "GPU-00000000-0000-0000-0000-000000000002"},
			[]string{"GPU-00000000…0001", "GPU-00000000…0002"}},
		"other IDs whole": {[]string{"g0", "g1"}, []string{"g0", "g1"}},
	} {
		got := drivers.ShortGPUs(tt.in)
		if strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("%s: %q, want %q", name, got, tt.want)
		}
	}
}
