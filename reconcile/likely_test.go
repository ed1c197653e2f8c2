package reconcile

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/policies"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
	"github.com/google/go-cmp/cmp"
)

// TestLikelyStart: with no run known, a waiting workspace's likely start
// is unknown and says why; a run that completes is recorded in the
// history (its project, owner and size), predicts the next run of its
// kind and so when the queue behind it starts; an expectedDuration sets
// the median of its own prediction, and those behind it wait for it.
func TestLikelyStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		two := func(name string, stated time.Duration) schema.Workspace {
			w := workspace("med", name, schema.DesiredRunning)
			w.Spec.Owner, w.Spec.Resources.GPUs, w.Spec.ExpectedDuration = "ada", 2, stated
			return w
		}
		sets := testSets{
			"r1": withWorkspaces(two("a", 0), two("b", 0)),
			"r2": withWorkspaces(two("a", 0), two("b", 0), two("c", 0)),
			"r3": withWorkspaces(two("a", 0), two("b", 0), two("c", 4*time.Hour), two("d", 0)),
		}
		for _, s := range sets {
			s.Projects[1].Spec.Quota.GPUs = 2 // med
		}
		h := newHarness(t, sets, "r1")
		h.loop.cfg.Decide = policies.Decide
		ctx := t.Context()
		cycle := func() {
			t.Helper()
			if _, err := h.loop.Once(ctx); err != nil {
				t.Fatal(err)
			}
		}
		ws := func(name string) view.WorkspaceDetail {
			t.Helper()
			d, ok := h.loop.Workspace(schema.Ref{Project: "med", Name: name})
			if !ok {
				t.Fatalf("no med/%s", name)
			}
			return d
		}
		likely := func(name string) string {
			t.Helper()
			d := ws(name)
			if d.Workspace.LikelyStart == nil {
				t.Fatalf("med/%s (%s) has no likely start", name, d.Workspace.State)
			}
			return d.Workspace.LikelyStart.Text(h.loop.Status().LastReconcile.At)
		}
		explains := func(name, want string) {
			t.Helper()
			if got := strings.Join(ws(name).Explanation, " "); !strings.Contains(got, want) {
				t.Errorf("explain med/%s: %q, want it to say %q", name, got, want)
			}
		}

		// 1. a runs; nothing has completed: b's start is unknown.
		cycle()
		h.sleep(sim.DefaultStartDelay + time.Second)
		cycle()
		if got, want := likely("b"), "unknown: its project's quota holds it back, not free GPUs; no run time known for 1 running workspace; overdue in 72h"; got != want {
			t.Errorf("b: %q, want %q", got, want)
		}
		explains("b", "Likely start unknown: its project's quota holds it back, not free GPUs; no run time known for 1 running workspace.")
		if b := ws("b").Workspace.LikelyStart; !b.OverdueAt.Equal(h.loop.Status().LastReconcile.At.Add(72*time.Hour - sim.DefaultStartDelay - time.Second)) {
			t.Errorf("b is overdue at %v, want 72h (the default aging.maxWait) after it queued", b.OverdueAt)
		}
		explains("b", "The wait bound (aging.maxWait) makes it overdue at ")
		if ws("a").Workspace.RunTime != nil {
			t.Errorf("a has a run time with no history: %+v", ws("a").Workspace.RunTime)
		}

		// 2. a completes after an hour of work: its run is recorded, b
		// starts and is expected to run about as long.
		h.sleep(time.Hour)
		cycle()
		h.cluster.Exit(schema.Ref{Project: "med", Name: "a"}, 0)
		cycle()
		hist, err := h.cluster.LoadHistory(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := hist.RunTimes["med/ada/2"]
		if len(got) != 1 || got[0] < time.Hour-time.Minute || got[0] > time.Hour+time.Minute {
			t.Fatalf("recorded run times %v, want one of about 1h", hist.RunTimes)
		}
		for _, k := range []string{"med/ada", "med//2", "med"} {
			if diff := cmp.Diff(got, hist.RunTimes[k]); diff != "" {
				t.Errorf("RunTimes[%q] (-med/ada/2 +it):\n%s", k, diff)
			}
		}
		h.sleep(sim.DefaultStartDelay + time.Second)
		cycle()
		if st := ws("b").Workspace.State; st != view.StateRunning {
			t.Fatalf("b is %s, want Running", st)
		}
		if rt := ws("b").Workspace.RunTime; rt == nil || rt.PastRuns != 1 || rt.Basis != "its project's runs" {
			t.Fatalf("b's run time: %+v", rt)
		}

		// 3. Half an hour into b, c arrives: it is likely to start in
		// about half an hour, from the one past run.
		h.sleep(30 * time.Minute)
		h.source.set("r2")
		cycle()
		if got := likely("c"); got != "in 30m (from 1 past run), when its project's quota has room; overdue in 72h" {
			t.Errorf("c: %q", got)
		}
		explains("c", "Likely start: in 30m (from 1 past run), when its project's quota has room.")
		explains("b", "Expected run time: 1h, from its project's runs (1 past run).")

		// 4. c states 4h; d waits behind it: 30m for b, then 4h for c.
		h.source.set("r3")
		cycle()
		if rt := ws("c").Workspace.RunTime; rt == nil || rt.Median.D() != 4*time.Hour || rt.Stated.D() != 4*time.Hour {
			t.Errorf("c's run time: %+v, want a median of its stated 4h", rt)
		}
		if got := likely("d"); got != "in 4h30m (from 1 past run and 1 stated duration), when its project's quota has room; overdue in 72h" {
			t.Errorf("d: %q", got)
		}
		explains("c", "Expected run time: 4h: its expectedDuration, with the spread of its project's runs (1 past run).")

		// The dashboard's queue shows the same estimate.
		found := false
		for _, q := range h.loop.dashboard(nil).Queue {
			if q.Workspace == "med/d" {
				found = true
				if q.EstimatedStart == nil || !q.EstimatedStart.Equal(ws("d").Workspace.LikelyStart.Likely) ||
					!strings.HasPrefix(q.Estimate, "likely at ") || !strings.HasSuffix(q.Estimate, ", from 1 past run and 1 stated duration; overdue at "+ws("d").Workspace.LikelyStart.OverdueAt.Format("Jan 2 15:04")) {
					t.Errorf("dashboard queue: med/d estimated %v (%q), want its likely start", q.EstimatedStart, q.Estimate)
				}
			}
		}
		if !found {
			t.Errorf("med/d is not in the dashboard's queue")
		}
	})
}

// TestLikelyStartQuotaBound: a workspace its project's quota holds back
// while the GPUs it needs are free is not "now" (as a count of GPUs
// alone said): it starts when its project's own work leaves room, which
// no run time known says when.
func TestLikelyStartQuotaBound(t *testing.T) {
	one := func(name string) schema.Workspace {
		w := workspace("med", name, schema.DesiredRunning)
		w.Spec.Owner, w.Spec.Resources.GPUs = "ada", 1
		return w
	}
	sets := testSets{"r1": withWorkspaces(one("a"), one("b"))}
	sets["r1"].Projects[1].Spec.Quota.GPUs = 1
	sets["r1"].Projects[1].Spec.BorrowLimit.GPUs = 0
	h := newHarness(t, sets, "r1")
	h.loop.cfg.Decide = policies.Decide
	for range 2 {
		if _, err := h.loop.Once(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	d, ok := h.loop.Workspace(schema.Ref{Project: "med", Name: "b"})
	if !ok || d.Workspace.LikelyStart == nil {
		t.Fatalf("med/b: %+v", d.Workspace)
	}
	if d.Workspace.ReasonKind != policies.ReasonQuota.String() {
		t.Fatalf("med/b waits: %s (%s), want its quota", d.Workspace.Reason, d.Workspace.ReasonKind)
	}
	got := d.Workspace.LikelyStart.Text(h.loop.Status().LastReconcile.At)
	if want := "unknown: its project's quota holds it back, not free GPUs; no run time known for 1 running workspace; overdue in 72h"; got != want {
		t.Errorf("med/b: %q, want %q", got, want)
	}
}
