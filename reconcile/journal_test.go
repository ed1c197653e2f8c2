package reconcile

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/schema"
)

// restart replaces the harness's loop with a new one on the same cluster
// and store, as a restarted berth process would start.
func (h *harness) restart(t *testing.T) {
	t.Helper()
	cfg := h.loop.cfg
	cfg.Metrics = nil
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.loop = l
}

// A berth restarted between a crash and its resume still sees the
// failure, measures the work lost against what it knew before the
// restart, and explains the whole story.
func TestJournalSurvivesRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, testSets{"r1": withWorkspaces(workspace("med", "b", schema.DesiredRunning))}, "r1")
		ref := schema.Ref{Project: "med", Name: "b"}
		ctx := t.Context()
		h.loop.Once(ctx)
		h.sleep(sim.DefaultStartDelay + 150*time.Second) // checkpoints every minute: the last at 2m
		h.loop.Once(ctx)
		h.cluster.Crash(ref)
		h.restart(t)
		h.loop.Once(ctx) // gone without a stop: Failed, started again
		h.restart(t)
		h.sleep(10 * time.Second)
		h.loop.Once(ctx)
		wantCrashResumed(t, h.loop, ref)
		// The dashboard's timeline of a restarted berth starts with them.
		h.restart(t)
		h.loop.Once(ctx)
		if n := len(h.loop.feed.events); n != 5 {
			t.Errorf("the restarted timeline has %d events, want the 5 transitions", n)
		}
	})
}

// A restart in the middle of the prune delay does not start it over: the
// purge comes when it was due.
func TestPruneDelaySurvivesRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sets := testSets{
			"r1": withWorkspaces(workspace("med", "a", schema.DesiredRunning), workspace("hi", "b", schema.DesiredRunning)),
			"r2": withWorkspaces(workspace("hi", "b", schema.DesiredRunning)),
		}
		h := newHarness(t, sets, "r1")
		h.loop.cfg.PruneDelay = time.Hour
		ctx := t.Context()
		h.loop.Once(ctx)
		h.sleep(time.Minute)
		h.loop.Once(ctx)
		h.source.set("r2")
		h.loop.Once(ctx)
		removed := h.cluster.Now()
		for range 40 {
			h.sleep(time.Minute)
			h.loop.Once(ctx)
		}
		h.restart(t)
		h.loop.Once(ctx)
		d, _ := h.loop.Workspace(schema.Ref{Project: "med", Name: "a"})
		if want := "purged at " + removed.Add(time.Hour).UTC().Format(time.RFC3339); !strings.Contains(d.Workspace.Reason, want) {
			t.Errorf("after the restart the reason is %q, want it to say %q", d.Workspace.Reason, want)
		}
		for range 21 {
			h.sleep(time.Minute)
			h.loop.Once(ctx)
		}
		if n := countKind(h.cluster.Applied(), drivers.ActionPurge); n != 1 {
			t.Fatalf("61 minutes after the removal, across a restart at 40: purged %d times, want 1", n)
		}
	})
}
