package reconcile

import (
	"strings"
	"testing"
	"testing/fstest"
	"testing/synctest"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/plan"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/schema/schematest"
	"github.com/berth-dev/berth/source"
	"github.com/berth-dev/berth/view"
	"github.com/google/go-cmp/cmp"
)

func fiveRunning() []schema.Workspace { return schematest.Running("med", "a", "b", "c", "d", "e") }

func TestMassPruneRefusedKeepsRevision(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sets := testSets{
			"r1": withWorkspaces(fiveRunning()...),
			"r2": withWorkspaces(workspace("med", "e", schema.DesiredRunning)),
		}
		h := newHarness(t, sets, "r1")
		ctx := t.Context()
		h.loop.Once(ctx)
		h.sleep(10 * time.Second)
		h.loop.Once(ctx)
		before := h.states()
		h.source.set("r2")
		res, err := h.loop.Once(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.Revision != "r1" || res.Refused == nil || res.Refused.ID != "r2" {
			t.Fatalf("revision %q refused %+v; want r1 in force and r2 refused", res.Revision, res.Refused)
		}
		for _, a := range res.Applied {
			if a.Kind == drivers.ActionStop {
				t.Errorf("stopped %s under a refused revision", a.Workspace)
			}
		}
		st := h.loop.Status()
		if st.Revision == nil || st.Revision.ID != "r1" || st.Attempted == nil || !strings.Contains(strings.Join(st.Attempted.Errors, ""), "mass prune refused") {
			t.Errorf("status revision %+v attempted %+v", st.Revision, st.Attempted)
		}
		// Still refused on the next cycle; nothing changes.
		h.sleep(time.Minute)
		h.loop.Once(ctx)
		if diff := cmp.Diff(before, h.states()); diff != "" {
			t.Errorf("states changed (-want +got):\n%s", diff)
		}
	})
}

func TestMassPruneAllowed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sets := testSets{
			"r1": withWorkspaces(fiveRunning()...),
			"r2": withWorkspaces(workspace("med", "e", schema.DesiredRunning)),
		}
		h := newHarness(t, sets, "r1")
		h.loop.cfg.AllowMassPrune = true
		ctx := t.Context()
		h.loop.Once(ctx)
		h.sleep(10 * time.Second)
		h.source.set("r2")
		res, err := h.loop.Once(ctx)
		if err != nil || res.Revision != "r2" {
			t.Fatalf("revision %q, err %v; want r2 applied", res.Revision, err)
		}
	})
}

func TestEmptyRevisionRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sets := testSets{"r1": withWorkspaces(workspace("med", "a", schema.DesiredRunning)), "empty": {Policy: schema.DefaultPolicy()}}
		h := newHarness(t, sets, "r1")
		ctx := t.Context()
		h.loop.Once(ctx)
		h.sleep(10 * time.Second)
		h.source.set("empty")
		res, _ := h.loop.Once(ctx)
		if res.Revision != "r1" || res.Refused == nil || !strings.Contains(res.Refused.Errors[0], "no specs at all") {
			t.Fatalf("revision %q refused %+v", res.Revision, res.Refused)
		}
		if got := h.states()["med/a"]; got != view.StateRunning {
			t.Errorf("med/a is %s, want Running", got)
		}
	})
}

// A workspace removed from the specs is stopped at once, purged only
// after PruneDelay; a revert before then resumes it from what it saved.
func TestPruneDelayAndRevert(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := schema.Ref{Project: "med", Name: "a"}
		sets := testSets{
			"r1": withWorkspaces(workspace("med", "a", schema.DesiredRunning), workspace("hi", "b", schema.DesiredRunning)),
			"r2": withWorkspaces(workspace("hi", "b", schema.DesiredRunning)),
		}
		h := newHarness(t, sets, "r1")
		h.loop.cfg.PruneDelay = time.Hour
		ctx := t.Context()
		h.loop.Once(ctx)
		h.sleep(10 * time.Minute)
		h.loop.Once(ctx)
		// 1. Removed: stopped, not purged.
		h.source.set("r2")
		h.loop.Once(ctx)
		h.sleep(time.Minute)
		h.loop.Once(ctx)
		if got := h.states()["med/a"]; got != view.StateStopped {
			t.Fatalf("med/a is %s, want Stopped", got)
		}
		d, _ := h.loop.Workspace(a)
		if !strings.Contains(d.Workspace.Reason, "purged at") {
			t.Errorf("reason %q does not say when it is purged", d.Workspace.Reason)
		}
		kept := h.cluster.Stats().Workspaces[a].Progress
		if kept < 9*time.Minute {
			t.Fatalf("kept %s of progress, want about 10m", kept)
		}
		if n := countKind(h.cluster.Applied(), drivers.ActionPurge); n != 0 {
			t.Fatalf("purged %d times before the delay", n)
		}
		// 2. Reverted before the delay: it resumes from what it saved.
		h.source.set("r1")
		h.loop.Once(ctx)
		h.sleep(10 * time.Second)
		h.loop.Once(ctx)
		snap, _ := h.cluster.Observe(ctx)
		var resumed time.Duration = -1
		for _, al := range snap.Allocs {
			if al.Workspace == a {
				resumed = al.ResumedFrom
			}
		}
		if resumed != kept {
			t.Fatalf("resumed from %s, want %s", resumed, kept)
		}
		// 3. Removed again and left out past the delay: purged once.
		h.source.set("r2")
		h.loop.Once(ctx)
		for range 70 {
			h.sleep(time.Minute)
			h.loop.Once(ctx)
		}
		if n := countKind(h.cluster.Applied(), drivers.ActionPurge); n != 1 {
			t.Fatalf("purged %d times, want 1", n)
		}
		if _, ok := h.cluster.Stats().Workspaces[a]; ok {
			t.Errorf("the simulator still keeps med/a's progress after the purge")
		}
		d, _ = h.loop.Workspace(a)
		if d.Workspace.Reason != "no longer in the specs; purged" {
			t.Errorf("reason %q", d.Workspace.Reason)
		}
	})
}

// Renaming a file is invisible: workspaces are named by project and
// name, not by file.
func TestRenameDoesNotStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sets := testSets{
			"r1": withWorkspaces(workspace("med", "a", schema.DesiredRunning)),
			"r2": withWorkspaces(workspace("med", "a", schema.DesiredRunning)),
		}
		sets["r2"].Workspaces[0].Meta.Source = schema.Pos{File: "renamed.yaml", Line: 1}
		h := newHarness(t, sets, "r1")
		ctx := t.Context()
		h.loop.Once(ctx)
		h.sleep(10 * time.Second)
		h.source.set("r2")
		res, _ := h.loop.Once(ctx)
		for _, a := range res.Applied {
			if a.Kind == drivers.ActionStop || a.Kind == drivers.ActionPreempt {
				t.Errorf("renaming stopped %s", a.Workspace)
			}
		}
	})
}

func countKind(as []drivers.Action, k drivers.ActionKind) int {
	n := 0
	for _, a := range as {
		if a.Kind == k {
			n++
		}
	}
	return n
}

// The annotation is read from the SchedulingPolicy as the loader gives it.
func TestMassPruneAnnotationFromYAML(t *testing.T) {
	fsys := fstest.MapFS{"specs.yaml": {Data: []byte(`apiVersion: berth.dev/v1
kind: PriorityTier
metadata: {name: medium}
spec: {value: 50}
---
apiVersion: berth.dev/v1
kind: SchedulingPolicy
metadata:
  name: default
  annotations:
    berth.dev/allow-mass-prune: "true"
spec: {}
`)}}
	set, problems, err := source.LoadSpecs(fsys, ".")
	if err != nil || set == nil {
		t.Fatalf("%v %v", problems, err)
	}
	m := plan.CheckMassPrune(withWorkspaces(fiveRunning()...), set, nil, plan.PruneGuard{})
	if !m.Mass() || m.Refused() {
		t.Errorf("%+v: want a mass prune, allowed by the annotation", m)
	}
}
