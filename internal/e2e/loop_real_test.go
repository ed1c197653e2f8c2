package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/berth-dev/berth/plan"
	"github.com/berth-dev/berth/reconcile"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/source"
	"github.com/berth-dev/berth/view"
	"github.com/hashicorp/nomad/api"
)

// Regression tests for issue 12 on a real Nomad (NOMAD_ADDR), through
// the loop a user runs: reconcile.Loop over a directory of specs and the
// Nomad driver.

const realTiers = `apiVersion: berth.dev/v1
kind: PriorityTier
metadata: {name: medium}
spec: {value: 50, preemptible: true, canPreempt: true}
---
apiVersion: berth.dev/v1
kind: Project
metadata: {name: berth-real}
spec:
  tier: medium
  quota: {gpus: 8}
`

func realWorkspace(name string, gpus int, script string) string {
	return fmt.Sprintf(`apiVersion: berth.dev/v1
kind: Workspace
metadata: {name: %s, project: berth-real}
spec:
  state: Running
  task: {driver: raw_exec, command: /bin/sh, args: ["-c", %q]}
  resources: {gpus: %d, memory: 32Mi}
  checkpoint: {signal: SIGTERM, gracePeriod: 2s}
`, name, script, gpus)
}

type realLoop struct {
	t    *testing.T
	c    *api.Client
	d    *nomad.Driver
	loop *reconcile.Loop
	dir  string
	// saved is the file a bad day's task writes when it checkpoints.
	saved string
}

func newRealLoop(t *testing.T) *realLoop {
	c := realnomad.Client(t)
	d := realnomad.NewDriver(t, nomad.ConfigFromEnv(""))
	dir := t.TempDir()
	l, err := reconcile.New(reconcile.Config{Source: source.DirSource{Dir: dir}, Cluster: d, Store: d})
	if err != nil {
		t.Fatal(err)
	}
	return &realLoop{t: t, c: c, d: d, loop: l, dir: dir}
}

func (r *realLoop) write(name, text string) {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.dir, name), []byte(text), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// until runs cycles until ok holds (at most within); it returns the
// results of every cycle.
func (r *realLoop) until(within time.Duration, what string, ok func() bool) []reconcile.Result {
	r.t.Helper()
	var out []reconcile.Result
	deadline := time.Now().Add(within)
	for {
		res, err := r.loop.Once(ctx)
		out = append(out, res)
		if err != nil && drivers.ClassOf(err) != drivers.ClassConflict {
			r.t.Logf("cycle: %v", err)
		}
		if ok() {
			return out
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s: not within %s; status %+v", what, within, r.loop.Status().Workspaces)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func (r *realLoop) state(name string) view.WorkspaceStatus {
	w, _ := r.loop.Workspace(r.ref(name))
	return w.Workspace
}

func (r *realLoop) ref(name string) schema.Ref { return schema.Ref{Project: "berth-real", Name: name} }

func (r *realLoop) running(names ...string) func() bool {
	return func() bool {
		for _, n := range names {
			if r.state(n).State != view.StateRunning {
				return false
			}
		}
		return true
	}
}

// allocs returns the live allocation IDs and the job version of name.
func (r *realLoop) job(name string) (allocs []string, version uint64) {
	r.t.Helper()
	j, _, err := r.c.Jobs().Info(name, &api.QueryOptions{Namespace: "berth-real"})
	if err != nil {
		r.t.Fatalf("job %s: %v", name, err)
	}
	stubs, _, err := r.c.Jobs().Allocations(name, false, &api.QueryOptions{Namespace: "berth-real"})
	if err != nil {
		r.t.Fatal(err)
	}
	for _, s := range stubs {
		if s.DesiredStatus == "run" && s.ClientStatus != "complete" && s.ClientStatus != "failed" {
			allocs = append(allocs, s.ID)
		}
	}
	return allocs, *j.Version
}

func countUpdates(res []reconcile.Result) (n int) {
	for _, r := range res {
		for _, a := range r.Applied {
			if a.Kind == drivers.ActionUpdate {
				n++
			}
		}
	}
	return n
}

// TestRealRevisionRestartsOnlyWhatChanged: a comment-only revision
// registers nothing and keeps every allocation; a changed task restarts
// exactly that workspace, and the plan said "restarts" for it alone.
func TestRealRevisionRestartsOnlyWhatChanged(t *testing.T) {
	r := newRealLoop(t)
	r.write("tiers.yaml", realTiers)
	r.write("a.yaml", realWorkspace("a", 1, "sleep 3600"))
	r.write("b.yaml", realWorkspace("b", 0, "sleep 3600"))
	r.until(30*time.Second, "both running", r.running("a", "b"))
	a0, va := r.job("a")
	b0, vb := r.job("b")

	// 1. A comment: a new revision that changes nothing a task sees.
	base := mustLoad(t, r.dir)
	r.write("a.yaml", "# a comment\n"+realWorkspace("a", 1, "sleep 3600"))
	head := mustLoad(t, r.dir)
	snap, err := r.d.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep := r.plan(base, head, snap); rep.Summary.Update != 0 {
		t.Errorf("plan for a comment: %s", rep.Text())
	}
	res := r.until(10*time.Second, "the new revision in force", func() bool { return true })
	res = append(res, r.until(10*time.Second, "still running", r.running("a", "b"))...)
	if n := countUpdates(res); n != 0 {
		t.Errorf("a comment-only revision applied %d updates", n)
	}
	a1, va1 := r.job("a")
	b1, vb1 := r.job("b")
	if fmt.Sprint(a0, va) != fmt.Sprint(a1, va1) || fmt.Sprint(b0, vb) != fmt.Sprint(b1, vb1) {
		t.Errorf("a comment-only revision touched the jobs: a %v v%d → %v v%d; b %v v%d → %v v%d", a0, va, a1, va1, b0, vb, b1, vb1)
	}

	// 2. b's task changes (a 0-GPU workspace: issue item 5): plan says it
	// restarts, apply restarts it alone, with the new args.
	base = head
	r.write("b.yaml", realWorkspace("b", 0, "sleep 3601"))
	head = mustLoad(t, r.dir)
	snap, _ = r.d.Observe(ctx)
	rep := r.plan(base, head, snap)
	if rep.Summary.Update != 1 || !strings.Contains(rep.Text(), "update  berth-real/b") || !strings.Contains(rep.Text(), "restarts: ") {
		t.Errorf("plan for b's new args:\n%s", rep.Text())
	}
	if md := strings.Join(rep.Markdown(0), ""); !strings.Contains(md, "restarts: ") {
		t.Errorf("the PR comment does not say b restarts:\n%s", md)
	}
	res = r.until(20*time.Second, "b restarted", func() bool {
		b, _ := r.job("b")
		return r.running("a", "b")() && len(b) == 1 && b[0] != b0[0]
	})
	if n := countUpdates(res); n != 1 {
		t.Errorf("apply made %d updates, the plan said 1", n)
	}
	a2, va2 := r.job("a")
	if fmt.Sprint(a0, va) != fmt.Sprint(a2, va2) {
		t.Errorf("b's change touched a: %v v%d → %v v%d", a0, va, a2, va2)
	}
	j, _, _ := r.c.Jobs().Info("b", &api.QueryOptions{Namespace: "berth-real"})
	if args := fmt.Sprint(j.TaskGroups[0].Tasks[0].Config["args"]); !strings.Contains(args, "3601") {
		t.Errorf("b's job still runs %s", args)
	}
}

// TestRealExitIsNotLooped: exit 0 is Completed, exit 3 is Failed with its
// code, and neither is registered again while its spec is unchanged.
func TestRealExitIsNotLooped(t *testing.T) {
	r := newRealLoop(t)
	r.write("tiers.yaml", realTiers)
	r.write("ok.yaml", realWorkspace("ok", 0, "sleep 1; exit 0"))
	r.write("bad.yaml", realWorkspace("bad", 1, "sleep 1; exit 3"))
	r.until(30*time.Second, "both ended", func() bool {
		return r.state("ok").State == view.StateCompleted && r.state("bad").State == view.StateFailed
	})
	if why := r.state("bad").Reason; !strings.Contains(why, "code 3") {
		t.Errorf("Failed without its exit code: %q", why)
	}
	_, vOK := r.job("ok")
	_, vBad := r.job("bad")
	var starts int
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(300 * time.Millisecond) {
		res, _ := r.loop.Once(ctx)
		for _, a := range res.Applied {
			if a.Kind == drivers.ActionStart {
				starts++
			}
		}
	}
	_, vOK2 := r.job("ok")
	_, vBad2 := r.job("bad")
	if starts != 0 || vOK != vOK2 || vBad != vBad2 {
		t.Errorf("over 10s: %d starts; job versions ok %d → %d, bad %d → %d", starts, vOK, vOK2, vBad, vBad2)
	}
	if st := r.state("ok").State; st != view.StateCompleted {
		t.Errorf("ok is %s", st)
	}
	// A changed spec runs it again, as a new allocation.
	r.write("ok.yaml", realWorkspace("ok", 0, "sleep 3600"))
	r.until(20*time.Second, "ok runs again", r.running("ok"))
}

// driftRunning reports whether workspace name runs with drift reported.
func driftRunning(name string) func(drivers.Snapshot) bool {
	return func(s drivers.Snapshot) bool {
		for _, a := range s.Allocs {
			if a.Workspace.Name == name && a.Drift != "" && a.Phase == drivers.AllocRunning {
				return true
			}
		}
		return false
	}
}

func mustLoad(t *testing.T, dir string) *schema.Set {
	t.Helper()
	set, problems, err := source.LoadSpecs(os.DirFS(dir), ".")
	if err != nil || set == nil {
		t.Fatalf("load %s: %v %v", dir, problems, err)
	}
	return set
}

// TestRealDriftIsPutBack: a job edited outside berth (its task changed,
// berth's meta kept) is reported as drift and registered again as berth
// renders it.
func TestRealDriftIsPutBack(t *testing.T) {
	r := newRealLoop(t)
	r.write("tiers.yaml", realTiers)
	r.write("d.yaml", realWorkspace("d", 1, "sleep 3600"))
	r.until(30*time.Second, "running", r.running("d"))
	q := &api.QueryOptions{Namespace: "berth-real"}
	j, _, err := r.c.Jobs().Info("d", q)
	if err != nil {
		t.Fatal(err)
	}
	j.TaskGroups[0].Tasks[0].Config["args"] = []any{"-c", "sleep 7777"}
	if _, _, err := r.c.Jobs().Register(j, &api.WriteOptions{Namespace: "berth-real"}); err != nil {
		t.Fatal(err)
	}
	if err := realnomad.WaitFor(ctx, r.d, 20*time.Second, driftRunning("d")); err != nil {
		t.Fatalf("the edited job is not reported as drift: %v", err)
	}
	res := r.until(20*time.Second, "put back", func() bool {
		j, _, err := r.c.Jobs().Info("d", q)
		return err == nil && strings.Contains(fmt.Sprint(j.TaskGroups[0].Tasks[0].Config["args"]), "sleep 3600") && r.running("d")()
	})
	drift := false
	for _, rs := range res {
		for _, a := range rs.Applied {
			drift = drift || a.Kind == drivers.ActionUpdate && a.Restarts && strings.Contains(a.Reason, "drift")
		}
	}
	if !drift {
		t.Errorf("no Update for the drift was applied: %+v", res)
	}
	snap, _ := r.d.Observe(ctx)
	for _, a := range snap.Allocs {
		if a.Drift != "" && a.Phase != drivers.AllocStopping {
			t.Errorf("still drift after putting it back: %+v", a)
		}
	}

	// 2. Pinned to another GPU outside berth: drift too. berth registers
	// its own job again where the workspace now runs (its decision counts
	// the GPUs Nomad really gave it), so the job and the GPUs agree.
	j, _, err = r.c.Jobs().Info("d", q)
	if err != nil {
		t.Fatal(err)
	}
	dev := j.TaskGroups[0].Tasks[0].Resources.Devices[0]
	var other string
	for _, n := range snap.Nodes {
		for _, g := range n.GPUs {
			if n.Name == j.TaskGroups[0].Meta[nomad.MetaNode] && g.ID != dev.Constraints[0].RTarget && other == "" {
				other = g.ID
			}
		}
	}
	dev.Constraints[0].RTarget = other
	if _, _, err := r.c.Jobs().Register(j, &api.WriteOptions{Namespace: "berth-real"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		jj, _, _ := r.c.Jobs().Info("d", q)
		stubs, _, _ := r.c.Jobs().Allocations("d", true, q)
		for _, s := range stubs {
			if jj == nil || s.CreateIndex < *jj.CreateIndex {
				continue
			}
			a, _, _ := r.c.Allocations().Info(s.ID, q)
			var ids []string
			for _, d := range a.AllocatedResources.Tasks[nomad.TaskName].Devices {
				ids = append(ids, d.DeviceIDs...)
			}
			t.Logf("alloc %s v%d %s/%s devices %v", s.ID, s.JobVersion, s.DesiredStatus, s.ClientStatus, ids)
		}
		if jj != nil {
			t.Logf("job v%d meta %v pin %s", *jj.Version, jj.TaskGroups[0].Meta, jj.TaskGroups[0].Tasks[0].Resources.Devices[0].Constraints[0].RTarget)
		}
		evals, _, _ := r.c.Jobs().Evaluations("d", q)
		for _, e := range evals {
			t.Logf("eval %s %s %s failed %v", e.ID, e.TriggeredBy, e.Status, e.FailedTGAllocs)
		}
		t.Logf("re-pinned to %s", other)
	})
	if err := realnomad.WaitFor(ctx, r.d, 20*time.Second, driftRunning("d")); err != nil {
		t.Fatalf("the re-pinned job is not reported as drift: %v", err)
	}
	// berth then owns it again: its own rendering, pinned where berth
	// placed it (verify stops an allocation on GPUs other than berth's
	// pin; the next start places it afresh), and no drift left.
	r.until(20*time.Second, "the re-pinned job is berth's again", func() bool {
		s, err := r.d.Observe(ctx)
		if err != nil {
			return false
		}
		for _, a := range s.Allocs {
			if a.Workspace.Name == "d" && a.Phase == drivers.AllocRunning && a.Drift == "" && len(a.GPUs) == 1 {
				j, _, err := r.c.Jobs().Info("d", q)
				return err == nil && j.TaskGroups[0].Meta[nomad.MetaGPUs] == a.GPUs[0] &&
					j.TaskGroups[0].Tasks[0].Resources.Devices[0].Constraints[0].RTarget == a.GPUs[0]
			}
		}
		return false
	})
}

// TestRealRestartOnFailureIsBounded: with restartOnFailure a failing task
// is restarted in place by Nomad's restart block (same allocation, so the
// same node and GPUs) schema.LegacyRestart.Attempts times, then the workspace is
// Failed, and berth does not start it again.
func TestRealRestartOnFailureIsBounded(t *testing.T) {
	c := realnomad.Client(t)
	cfg := nomad.ConfigFromEnv("")
	cfg.RestartDelay = time.Second
	d := realnomad.NewDriver(t, cfg)
	dir := t.TempDir()
	l, err := reconcile.New(reconcile.Config{Source: source.DirSource{Dir: dir}, Cluster: d, Store: d})
	if err != nil {
		t.Fatal(err)
	}
	r := &realLoop{t: t, c: c, d: d, loop: l, dir: dir}
	r.write("tiers.yaml", realTiers)
	r.write("flaky.yaml", strings.Replace(realWorkspace("flaky", 1, "sleep 0.5; exit 5"), "  state: Running\n", "  state: Running\n  restartOnFailure: true\n", 1))
	r.until(25*time.Second, "failed after its restarts", func() bool { return r.state("flaky").State == view.StateFailed })
	st := r.state("flaky")
	if !strings.Contains(st.Reason, "code 5") || !strings.Contains(st.Reason, fmt.Sprintf("after %d restart(s)", schema.LegacyRestart.Attempts)) {
		t.Errorf("reason %q, want exit code 5 after %d restarts", st.Reason, schema.LegacyRestart.Attempts)
	}
	// Allocations of this job (a purged job of the same name from an
	// earlier run may still be listed until Nomad collects it).
	j, _, err := c.Jobs().Info("flaky", &api.QueryOptions{Namespace: "berth-real"})
	if err != nil {
		t.Fatal(err)
	}
	stubs, _, err := c.Jobs().Allocations("flaky", true, &api.QueryOptions{Namespace: "berth-real"})
	var mine []string
	for _, s := range stubs {
		if s.CreateIndex >= *j.CreateIndex {
			mine = append(mine, fmt.Sprintf("%s v%d %s/%s", s.ID, s.JobVersion, s.DesiredStatus, s.ClientStatus))
		}
	}
	if err != nil || len(mine) != 1 {
		t.Errorf("allocations %v, want 1 (restarted in place, never rescheduled): %v", mine, err)
	}
	_, v := r.job("flaky")
	for range 5 {
		if res, _ := r.loop.Once(ctx); len(res.Applied) != 0 {
			t.Errorf("applied %v to a failed workspace", res.Applied)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if _, v2 := r.job("flaky"); v2 != v {
		t.Errorf("job version %d → %d", v, v2)
	}
}

// plan is berth plan's report of base → head on snap: the loop's cycle
// run dry on the history the loop saved.
func (r *realLoop) plan(base, head *schema.Set, snap drivers.Snapshot) plan.Report {
	r.t.Helper()
	hist, err := r.d.LoadHistory(ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	dry, err := reconcile.DryRun(ctx, reconcile.DryRunInput{Set: head, Snapshot: snap, History: hist})
	if err != nil {
		r.t.Fatal(err)
	}
	return plan.NewReport(plan.PlanInput{Base: base, Head: head, BaseName: "base", HeadName: "head", Snapshot: &snap,
		Decision: dry.Decision, Plan: dry.Result.Plan})
}
