package reconcile

import (
	"encoding/json"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
)

// modelJSON is everything a reader can see of m: its status, every
// workspace's detail, and the dashboard's inputs the loop keeps moving
// (the history's queue places and preemptions).
func modelJSON(t *testing.T, m *view.Model) string {
	t.Helper()
	all := struct {
		Status  view.Status
		Details []view.WorkspaceDetail
		Queued  any
		Dash    view.Dashboard
	}{Status: m.Page(schema.Ref{}, 0)}
	for _, w := range m.Workspaces {
		d, _ := m.Workspace(w.Ref())
		all.Details = append(all.Details, d)
	}
	if h := m.Inputs.History; h != nil {
		all.Queued = []any{h.QueuedSince, h.Preempted, h.RunTimes}
	}
	all.Dash = view.NewDashboard(all.Status, m.Inputs, nil)
	b, err := json.Marshal(all)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPublishedModelIsImmutable: the model a cycle publishes stays as it
// was while the next cycles start, stop and preempt its workspaces and a
// new revision stops some; the loop publishes new ones instead.
func TestPublishedModelIsImmutable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sets := testSets{
			"r1": withWorkspaces(workspace("med", "a", schema.DesiredRunning), workspace("med", "b", schema.DesiredRunning), workspace("med", "c", schema.DesiredRunning)),
			"r2": withWorkspaces(workspace("med", "a", schema.DesiredStopped), workspace("med", "b", schema.DesiredRunning), workspace("med", "c", schema.DesiredRunning), workspace("hi", "d", schema.DesiredRunning)),
		}
		h := newHarness(t, sets, "r1")
		cycle := func() {
			t.Helper()
			if _, err := h.loop.Once(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		cycle()
		first := h.loop.Model()
		want := modelJSON(t, first)
		h.sleep(sim.DefaultStartDelay + time.Minute)
		cycle()
		h.source.mu.Lock()
		h.source.rev = "r2"
		h.source.mu.Unlock()
		for range 3 {
			cycle()
			h.sleep(time.Minute)
		}
		if got := modelJSON(t, first); got != want {
			t.Errorf("the first cycle's model changed after it was published:\nwas %s\nnow %s", want, got)
		}
		if last := h.loop.Model(); last == first || modelJSON(t, last) == want {
			t.Errorf("the loop published no new model: the test proves nothing")
		}
	})
}

// TestReadersDuringCycles: the status, a workspace, the health and the
// dashboard are read while cycles run, with no lock of the loop's (run
// with -race).
func TestReadersDuringCycles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sets := testSets{"r1": withWorkspaces(workspace("med", "a", schema.DesiredRunning), workspace("med", "b", schema.DesiredRunning), workspace("hi", "c", schema.DesiredRunning))}
		h := newHarness(t, sets, "r1")
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				_ = h.loop.Status()
				_, _ = h.loop.Workspace(schema.Ref{Project: "med", Name: "a"})
				_ = h.loop.Health()
				if sub, err := h.loop.Subscribe(t.Context()); err == nil {
					h.loop.Unsubscribe(sub)
				}
				time.Sleep(time.Millisecond) // the bubble's fake time: lets the cycles run
			}
		})
		for range 5 {
			if _, err := h.loop.Once(t.Context()); err != nil {
				t.Fatal(err)
			}
			h.sleep(30 * time.Second)
		}
		close(done)
		wg.Wait()
	})
}
