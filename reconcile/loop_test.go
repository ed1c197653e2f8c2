package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"testing/synctest"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/policies"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/schema/schematest"
	"github.com/berth-dev/berth/source"
	"github.com/berth-dev/berth/view"
	"github.com/google/go-cmp/cmp"
)

// fakeSource serves revisions by name; each is a Set built in the test
// or, when invalid, a list of problems.
type fakeSource struct {
	mu    sync.Mutex
	rev   string
	err   error
	clock sim.Clock // when each read came, for reads (nil: time.Now)
	reads []time.Time
}

func (s *fakeSource) set(rev string) {
	s.mu.Lock()
	s.rev = rev
	s.mu.Unlock()
}

func (s *fakeSource) Read(ctx context.Context) (source.Revision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.clock != nil {
		now = s.clock.Now()
	}
	s.reads = append(s.reads, now)
	if s.err != nil {
		return source.Revision{}, s.err
	}
	return source.Revision{ID: s.rev, FS: fstest.MapFS{"rev": {Data: []byte(s.rev)}}, Root: "."}, nil
}

func (s *fakeSource) readCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reads)
}

// testSets are the revisions the fake loader knows; a missing one is
// invalid.
type testSets map[string]*schema.Set

func (ts testSets) load(fsys fs.FS, root string) (*schema.Set, []string, error) {
	b, err := fs.ReadFile(fsys, "rev")
	if err != nil {
		return nil, nil, err
	}
	s, ok := ts[string(b)]
	if !ok {
		return nil, []string{fmt.Sprintf("workspaces.yaml:3:9: revision %s: spec.tier: no tier named \"hgih\"", b)}, nil
	}
	c := *s
	c.Revision = ""
	return &c, nil, nil
}

// The specs of the loop's tests (schematest): tiers high and medium,
// projects hi and med with one GPU of quota each.
var (
	tiersAndProjects = schematest.TiersAndProjects
	workspace        = schematest.Workspace
	withWorkspaces   = schematest.WithWorkspaces
)

// fifoDecide is a test double for the decision engine: workspaces that
// run keep running, stopped or unknown ones stop, the others start on the
// first free GPUs in name order or wait for capacity. No priorities.
func fifoDecide(in policies.Input) policies.Decision {
	d := policies.Decision{Now: in.Now}
	busy := map[string]bool{}
	running := map[schema.Ref]bool{}
	for _, a := range in.Snapshot.Allocs {
		running[a.Workspace] = true
		for _, g := range a.GPUs {
			busy[g] = true
		}
	}
	for _, w := range in.Specs.Workspaces {
		ref := w.Ref()
		wd := policies.WorkspaceDecision{Ref: ref}
		switch {
		case w.Spec.State == schema.DesiredStopped:
			wd.Verdict, wd.Reason = policies.VerdictStop, policies.Reason{Kind: policies.ReasonStopped, Message: "the specs want it stopped"}
		case running[ref]:
			wd.Verdict = policies.VerdictRun
		default:
			wd.Verdict, wd.Reason = policies.VerdictWait, policies.Reason{Kind: policies.ReasonCapacity, Message: "no free GPU"}
			for _, n := range in.Snapshot.Nodes {
				for _, g := range n.GPUs {
					if !busy[g.ID] && wd.Verdict == policies.VerdictWait {
						busy[g.ID] = true
						wd.Verdict, wd.Reason = policies.VerdictStart, policies.Reason{}
						wd.Placements = []drivers.Placement{{Node: n.Name, GPUs: []string{g.ID}}}
					}
				}
			}
		}
		d.Workspaces = append(d.Workspaces, wd)
	}
	for ref := range running {
		if in.Specs.Workspace(ref) == nil {
			d.Workspaces = append(d.Workspaces, policies.WorkspaceDecision{Ref: ref, Verdict: policies.VerdictStop,
				Reason: policies.Reason{Kind: policies.ReasonStopped, Message: "no longer in the specs"}})
		}
	}
	return d
}

const twoGPUs = schematest.TwoGPUs

type harness struct {
	loop    *Loop
	cluster *sim.Cluster
	source  *fakeSource
	clock   *sim.ManualClock // the loop's, the cluster's and the source's
}

// newHarness builds a loop over the simulator, both on one manual clock
// that the test moves with sleep. Call it in a synctest bubble.
func newHarness(t *testing.T, sets testSets, first string) *harness {
	t.Helper()
	spec, err := sim.Parse([]byte(twoGPUs))
	if err != nil {
		t.Fatal(err)
	}
	clk := sim.NewManualClock(time.Now())
	c := sim.New(*spec, clk)
	src := &fakeSource{rev: first, clock: clk}
	l, err := New(Config{Source: src, Cluster: c, Store: c, Load: sets.load, Decide: fifoDecide, Clock: clk,
		Interval: 30 * time.Second, Debounce: 500 * time.Millisecond, Settle: time.Second,
		BackoffMin: time.Second, BackoffMax: 8 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{loop: l, cluster: c, source: src, clock: clk}
}

// sleep moves the harness's clock on by d.
func (h *harness) sleep(d time.Duration) { sleep(h.clock, d) }

// sleep moves clk on by d as time would pass: to each of its timers due
// on the way in turn, letting the bubble's goroutines act on one
// (synctest.Wait) before it moves to the next. Call it in a synctest
// bubble.
func sleep(clk *sim.ManualClock, d time.Duration) {
	end := clk.Now().Add(d)
	for {
		synctest.Wait()
		next, ok := clk.Next()
		if !ok || next.After(end) {
			break
		}
		clk.Advance(next.Sub(clk.Now()))
	}
	clk.Advance(end.Sub(clk.Now()))
	synctest.Wait()
}

func (h *harness) states() map[string]view.State {
	out := map[string]view.State{}
	for _, w := range h.loop.Status().Workspaces {
		out[w.Project+"/"+w.Name] = w.State
	}
	return out
}

func TestDebounce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, testSets{"r1": withWorkspaces()}, "r1")
		ctx, cancel := context.WithCancel(t.Context())
		changes := make(chan struct{})
		done := make(chan error)
		go func() { done <- h.loop.Run(ctx, changes) }()
		synctest.Wait()
		if n := h.source.readCount(); n != 1 {
			t.Fatalf("%d cycles at start, want 1", n)
		}
		// A burst of changes 100ms apart is one cycle, 500ms after the last.
		for range 5 {
			changes <- struct{}{}
			h.sleep(100 * time.Millisecond)
		}
		h.sleep(399 * time.Millisecond)
		synctest.Wait()
		if n := h.source.readCount(); n != 1 {
			t.Fatalf("%d cycles before the files were quiet, want 1", n)
		}
		h.sleep(2 * time.Millisecond)
		synctest.Wait()
		if n := h.source.readCount(); n != 2 {
			t.Fatalf("%d cycles after the burst, want 2", n)
		}
		// Without changes, the interval.
		h.sleep(30 * time.Second)
		synctest.Wait()
		if n := h.source.readCount(); n != 3 {
			t.Fatalf("%d cycles after an interval, want 3", n)
		}
		// Files that never go quiet still get a cycle every interval.
		for range 310 {
			changes <- struct{}{}
			h.sleep(100 * time.Millisecond)
		}
		synctest.Wait()
		if n := h.source.readCount(); n != 4 {
			t.Fatalf("%d cycles after 31s of constant changes, want 4", n)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// TestDebounceDefaults: by default a change of the specs starts a cycle
// once they have been quiet for 200ms, one of the cluster (berth's own
// writes among them) once it has been quiet for 500ms; a change of the
// specs during the cluster's wait shortens it to 200ms after itself.
func TestDebounceDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		spec, err := sim.Parse([]byte(twoGPUs))
		if err != nil {
			t.Fatal(err)
		}
		clk := sim.NewManualClock(time.Now())
		c := sim.New(*spec, clk)
		src := &fakeSource{rev: "r1", clock: clk}
		cluster := make(chan struct{})
		l, err := New(Config{Source: src, Cluster: c, Store: c, Load: testSets{"r1": withWorkspaces()}.load, Decide: fifoDecide, ClusterChanges: cluster, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		changes := make(chan struct{})
		done := make(chan error)
		go func() { done <- l.Run(ctx, changes) }()
		synctest.Wait()
		cycleAfter := func(what string, signal chan struct{}, want time.Duration, then func()) {
			t.Helper()
			n := src.readCount()
			signal <- struct{}{}
			if then != nil {
				then()
			}
			sleep(clk, want-time.Millisecond)
			synctest.Wait()
			if got := src.readCount(); got != n {
				t.Fatalf("%s: a cycle before %s", what, want)
			}
			sleep(clk, 2*time.Millisecond)
			synctest.Wait()
			if got := src.readCount(); got != n+1 {
				t.Fatalf("%s: %d cycles %s after, want 1", what, got-n, want)
			}
			sleep(clk, time.Second) // the cycle's own cluster changes (none here) and settling
			synctest.Wait()
		}
		cycleAfter("a spec change", changes, 200*time.Millisecond, nil)
		cycleAfter("a cluster change", cluster, 500*time.Millisecond, nil)
		cycleAfter("a cluster change, then the specs 100ms later", cluster, 200*time.Millisecond, func() {
			sleep(clk, 100*time.Millisecond)
			changes <- struct{}{}
		})
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

func TestBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, testSets{"r1": withWorkspaces()}, "r1")
		h.source.err = errors.New("disk on fire")
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		start := h.clock.Now()
		go func() { done <- h.loop.Run(ctx, nil) }()
		h.sleep(40 * time.Second)
		synctest.Wait()
		var gaps []time.Duration
		prev := start
		for _, r := range h.source.reads {
			gaps = append(gaps, r.Sub(prev))
			prev = r
		}
		want := []time.Duration{0, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second, 8 * time.Second, 8 * time.Second}
		if diff := cmp.Diff(want, gaps); diff != "" {
			t.Errorf("waits between failed cycles (-want +got):\n%s", diff)
		}
		// Success resets the backoff: back to the interval.
		h.source.mu.Lock()
		h.source.err = nil
		h.source.mu.Unlock()
		h.sleep(8 * time.Second)
		synctest.Wait()
		n := h.source.readCount()
		h.sleep(28 * time.Second)
		synctest.Wait()
		if h.source.readCount() != n {
			t.Errorf("a cycle ran before the interval after a success")
		}
		if st := h.loop.Status(); st.LastReconcile == nil || st.LastReconcile.Error != "" {
			t.Errorf("last reconcile after recovery: %+v", st.LastReconcile)
		}
		cancel()
		<-done
	})
}

func TestInvalidRevisionKeepsLastGood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sets := testSets{"r1": withWorkspaces(workspace("med", "train", schema.DesiredRunning))}
		h := newHarness(t, sets, "r1")
		ctx := t.Context()
		if _, err := h.loop.Once(ctx); err != nil {
			t.Fatal(err)
		}
		h.sleep(10 * time.Second)
		h.source.set("r2-broken")
		res, err := h.loop.Once(ctx)
		if err != nil {
			t.Fatalf("an invalid revision with a good one in force is not an error: %v", err)
		}
		if res.Refused == nil || res.Refused.ID != "r2-broken" {
			t.Fatalf("refused %+v", res.Refused)
		}
		st := h.loop.Status()
		if st.Revision == nil || st.Revision.ID != "r1" {
			t.Fatalf("revision in force %+v, want r1", st.Revision)
		}
		wantErr := []string{`workspaces.yaml:3:9: revision r2-broken: spec.tier: no tier named "hgih"`}
		if st.Attempted == nil || !cmp.Equal(st.Attempted.Errors, wantErr) {
			t.Fatalf("attempted %+v, want the errors with file:line", st.Attempted)
		}
		if got := h.states()["med/train"]; got != view.StateRunning {
			t.Errorf("med/train %s under the last good revision, want Running", got)
		}
		// Fixing the specs brings the new revision in force.
		sets["r3"] = withWorkspaces(workspace("med", "train", schema.DesiredStopped))
		h.source.set("r3")
		if _, err := h.loop.Once(ctx); err != nil {
			t.Fatal(err)
		}
		st = h.loop.Status()
		if st.Revision.ID != "r3" || st.Attempted != nil {
			t.Errorf("after the fix: revision %+v attempted %+v", st.Revision, st.Attempted)
		}
		// The store remembers what was applied, for a restarted berth.
		hist, err := h.cluster.LoadHistory(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if hist.AppliedRevision != "r3" || hist.AppliedAt.IsZero() {
			t.Errorf("history applied %q at %v, want r3 at the cycle's time", hist.AppliedRevision, hist.AppliedAt)
		}
		if got := h.states()["med/train"]; got != view.StateStopped {
			t.Errorf("med/train %s, want Stopped", got)
		}
	})
}

func TestNoGoodRevisionStalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, testSets{}, "broken")
		_, err := h.loop.Once(t.Context())
		var stalled *StalledError
		if !errors.As(err, &stalled) {
			t.Fatalf("err %v, want a StalledError", err)
		}
		if len(h.cluster.Applied()) != 0 {
			t.Error("applied something without a valid revision")
		}
	})
}

func TestObserveFailureAppliesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, testSets{"r1": withWorkspaces(workspace("med", "train", schema.DesiredRunning))}, "r1")
		h.cluster.FailObserves(1)
		if _, err := h.loop.Once(t.Context()); !errors.Is(err, sim.ErrInjected) {
			t.Fatalf("err %v, want the injected observe failure", err)
		}
		if n := len(h.cluster.Applied()); n != 0 {
			t.Fatalf("applied %d actions after a failed observation", n)
		}
		if _, err := h.loop.Once(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := len(h.cluster.Applied()); n != 1 {
			t.Fatalf("applied %d actions on retry, want 1", n)
		}
	})
}

func TestApplyFailureMidwayRetriedWithoutDuplicates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sets := testSets{"r1": withWorkspaces(
			workspace("hi", "a", schema.DesiredRunning),
			workspace("med", "b", schema.DesiredRunning),
		)}
		h := newHarness(t, sets, "r1")
		failed := false
		h.cluster.InjectApplyFault(func(a drivers.Action) error {
			if a.Workspace.Name == "b" && !failed {
				failed = true
				return sim.ErrInjected
			}
			return nil
		})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- h.loop.Run(ctx, nil) }()
		synctest.Wait()
		if got := h.cluster.Applied(); len(got) != 1 || got[0].Workspace.Name != "a" {
			t.Fatalf("after the failure: applied %v, want only the start of a", got)
		}
		h.sleep(time.Second) // the first backoff
		synctest.Wait()
		var got []string
		for _, a := range h.cluster.Applied() {
			got = append(got, a.Kind.String()+" "+a.Workspace.String())
		}
		if diff := cmp.Diff([]string{"start hi/a", "start med/b"}, got); diff != "" {
			t.Errorf("applied (-want +got):\n%s", diff)
		}
		h.sleep(10 * time.Second)
		synctest.Wait()
		if diff := cmp.Diff(map[string]view.State{"hi/a": view.StateRunning, "med/b": view.StateRunning}, h.states()); diff != "" {
			t.Errorf("states (-want +got):\n%s", diff)
		}
		if n := len(h.cluster.Applied()); n != 2 {
			t.Errorf("%d actions applied in all, want 2", n)
		}
		cancel()
		<-done
	})
}

func TestStoppedAndRemovedWorkspacesStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sets := testSets{
			"r1": withWorkspaces(workspace("hi", "a", schema.DesiredRunning), workspace("med", "b", schema.DesiredRunning)),
			"r2": withWorkspaces(workspace("hi", "a", schema.DesiredStopped)),
		}
		h := newHarness(t, sets, "r1")
		ctx := t.Context()
		h.loop.Once(ctx)
		h.sleep(10 * time.Second)
		h.loop.Once(ctx)
		if diff := cmp.Diff(map[string]view.State{"hi/a": view.StateRunning, "med/b": view.StateRunning}, h.states()); diff != "" {
			t.Fatalf("states (-want +got):\n%s", diff)
		}
		h.source.set("r2")
		h.loop.Once(ctx)
		h.sleep(time.Minute)
		h.loop.Once(ctx)
		if diff := cmp.Diff(map[string]view.State{"hi/a": view.StateStopped, "med/b": view.StateStopped}, h.states()); diff != "" {
			t.Errorf("states (-want +got):\n%s", diff)
		}
		snap, _ := h.cluster.Observe(ctx)
		if len(snap.Allocs) != 0 {
			t.Errorf("still running: %+v", snap.Allocs)
		}
		d, _ := h.loop.Workspace(schema.Ref{Project: "med", Name: "b"})
		if !strings.HasPrefix(d.Workspace.Reason, "no longer in the specs") {
			t.Errorf("reason %q", d.Workspace.Reason)
		}
	})
}

// classed is a driver error with a class, as package drivers makes them.
type classed struct{ invalid, conflict bool }

func (c classed) Error() string {
	return fmt.Sprintf("classed invalid=%v conflict=%v", c.invalid, c.conflict)
}
func (c classed) ErrorClass() drivers.Class {
	switch {
	case c.invalid:
		return drivers.ClassInvalid
	case c.conflict:
		return drivers.ClassConflict
	}
	return drivers.ClassTransient
}

func TestInvalidActionNotRetriedUntilTheSpecsChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sets := testSets{
			"r1": withWorkspaces(workspace("hi", "a", schema.DesiredRunning), workspace("med", "b", schema.DesiredRunning)),
		}
		sets["r2"] = withWorkspaces(workspace("hi", "a", schema.DesiredRunning), workspace("med", "b", schema.DesiredRunning))
		sets["r2"].Workspaces[1].Spec.Owner = "fixed"
		h := newHarness(t, sets, "r1")
		tries := 0
		h.cluster.InjectApplyFault(func(a drivers.Action) error {
			if a.Workspace.Name == "b" && a.Kind == drivers.ActionStart {
				tries++
				if tries == 1 {
					return classed{invalid: true}
				}
			}
			return nil
		})
		ctx := t.Context()
		if _, err := h.loop.Once(ctx); err != nil {
			t.Fatalf("an invalid action is reported against its workspace, not as a cycle error: %v", err)
		}
		h.sleep(10 * time.Second)
		h.loop.Once(ctx)
		if tries != 1 {
			t.Errorf("the refused start was tried %d times under the same revision, want 1", tries)
		}
		d, _ := h.loop.Workspace(schema.Ref{Project: "med", Name: "b"})
		if d.Workspace.State != view.StateFailed || !strings.Contains(d.Workspace.Reason, "the cluster refused it") {
			t.Errorf("med/b %s %q, want Failed with the refusal", d.Workspace.State, d.Workspace.Reason)
		}
		if got := h.states()["hi/a"]; got != view.StateRunning {
			t.Errorf("hi/a %s: the rest of the plan must go on", got)
		}
		h.source.set("r2")
		h.loop.Once(ctx)
		if tries != 2 || h.states()["med/b"] != view.StateStarting {
			t.Errorf("after a new revision: %d tries, med/b %s", tries, h.states()["med/b"])
		}
	})
}

func TestRepeatedConflictBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, testSets{"r1": withWorkspaces(workspace("med", "b", schema.DesiredRunning))}, "r1")
		var at []time.Time
		h.cluster.InjectApplyFault(func(a drivers.Action) error {
			at = append(at, h.clock.Now())
			if len(at) <= 4 {
				return classed{conflict: true}
			}
			return nil
		})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- h.loop.Run(ctx, nil) }()
		h.sleep(20 * time.Second)
		synctest.Wait()
		cancel()
		<-done
		var gaps []time.Duration
		for i := 1; i < len(at); i++ {
			gaps = append(gaps, at[i].Sub(at[i-1]))
		}
		// The first conflict is tried again on the next cycle; repeats back off.
		if diff := cmp.Diff([]time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}, gaps); diff != "" {
			t.Errorf("waits after conflicts (-want +got):\n%s", diff)
		}
	})
}

func TestFailureLosesWorkSinceCheckpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, testSets{"r1": withWorkspaces(workspace("med", "b", schema.DesiredRunning))}, "r1")
		ref := schema.Ref{Project: "med", Name: "b"}
		ctx := t.Context()
		h.loop.Once(ctx)
		h.sleep(sim.DefaultStartDelay + 150*time.Second) // checkpoints every minute: the last at 2m
		h.loop.Once(ctx)
		h.cluster.Crash(ref)
		h.loop.Once(ctx) // gone without a stop: Failed, started again
		h.sleep(10 * time.Second)
		h.loop.Once(ctx)
		wantCrashResumed(t, h.loop, ref)
	})
}

// unplaceable is a driver error of class unplaceable, as package drivers
// makes them.
type unplaceable struct{}

func (unplaceable) Error() string {
	return "Nomad could not place it: Dimension \"memory\" exhausted on 2 nodes"
}
func (unplaceable) ErrorClass() drivers.Class { return drivers.ClassUnplaceable }

func TestPlanGoesOnPastFailedStarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ws := []schema.Workspace{
			workspace("hi", "a-big", schema.DesiredRunning),
			workspace("hi", "b-bad", schema.DesiredRunning),
			workspace("hi", "c-flaky", schema.DesiredRunning),
			workspace("med", "d-small", schema.DesiredRunning),
		}
		for i := range ws {
			ws[i].Spec.Resources.GPUs = 0 // fifoDecide still places them: one per GPU
		}
		h := newHarness(t, testSets{"r1": withWorkspaces(ws...)}, "r1")
		// fifoDecide gives each a GPU: four.
		spec, _ := sim.Parse([]byte(strings.ReplaceAll(twoGPUs, "    - {model: H100, memory: 80Gi}\n    - {model: H100, memory: 80Gi}\n",
			strings.Repeat("    - {model: H100, memory: 80Gi}\n", 4))))
		h.cluster = sim.New(*spec, h.clock)
		h.loop.cfg.Cluster, h.loop.cfg.Store = h.cluster, h.cluster
		h.cluster.InjectApplyFault(func(a drivers.Action) error {
			switch a.Workspace.Name {
			case "a-big":
				return unplaceable{}
			case "b-bad":
				return classed{invalid: true}
			case "c-flaky":
				return errors.New("EOF")
			}
			return nil
		})
		res, err := h.loop.Once(t.Context())
		if err != nil {
			t.Fatalf("failures of single workspaces are not a cycle error: %v", err)
		}
		var applied, failed []string
		for _, a := range res.Applied {
			applied = append(applied, a.Kind.String()+" "+a.Workspace.String())
		}
		for _, f := range res.Failed {
			failed = append(failed, f.Action.Workspace.String()+" "+f.Class)
		}
		if diff := cmp.Diff([]string{"start med/d-small"}, applied); diff != "" {
			t.Errorf("applied (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"hi/a-big unplaceable", "hi/b-bad invalid", "hi/c-flaky transient"}, failed); diff != "" {
			t.Errorf("failed, in plan order (-want +got):\n%s", diff)
		}
		if want := h.clock.Now().Add(time.Second); !res.RetryAt.Equal(want) {
			t.Errorf("retry at %v, want %v (BackoffMin after the failure)", res.RetryAt, want)
		}
		d, _ := h.loop.Workspace(schema.Ref{Project: "hi", Name: "a-big"})
		if d.Workspace.State != view.StatePending || d.Workspace.ReasonKind != ReasonKindUnplaceable ||
			!strings.Contains(d.Workspace.Reason, `Dimension "memory" exhausted`) {
			t.Errorf("hi/a-big: %s %s %q; want Pending, unplaceable, with the cluster's reason", d.Workspace.State, d.Workspace.ReasonKind, d.Workspace.Reason)
		}
		if n := len(d.History); n == 0 || !strings.Contains(d.History[n-1].Reason, "exhausted") {
			t.Errorf("hi/a-big's transition into Pending does not say why: %+v", d.History)
		}
		if got := h.states()["hi/b-bad"]; got != view.StateFailed {
			t.Errorf("hi/b-bad %s, want Failed (refused until the specs change)", got)
		}
	})
}

// countingCluster delays each Apply (longer for earlier workspaces, so
// calls return out of plan order) and records how many were in flight.
type countingCluster struct {
	*sim.Cluster
	mu                 sync.Mutex
	inFlight, most     int
	stopsDone, started []string
}

func (c *countingCluster) Apply(ctx context.Context, a drivers.Action) error {
	c.mu.Lock()
	c.inFlight++
	c.most = max(c.most, c.inFlight)
	if a.Kind == drivers.ActionStart {
		c.started = append(c.started, fmt.Sprintf("%s after %d stops", a.Workspace.Name, len(c.stopsDone)))
	}
	c.mu.Unlock()
	n := 0
	fmt.Sscanf(a.Workspace.Name, "w%d", &n)
	time.Sleep(time.Duration(100-n) * time.Millisecond) // the cluster's latency, not the loop's clock
	err := c.Cluster.Apply(ctx, a)
	c.mu.Lock()
	c.inFlight--
	if a.Kind == drivers.ActionStop {
		c.stopsDone = append(c.stopsDone, a.Workspace.Name)
	}
	c.mu.Unlock()
	return err
}

func TestApplyConcurrentBoundedAndInPlanOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ws, half []schema.Workspace
		for i := range 40 {
			w := workspace("med", fmt.Sprintf("w%02d", i), schema.DesiredRunning)
			w.Spec.Resources.GPUs = 0
			ws = append(ws, w)
			if i%2 == 0 {
				half = append(half, w)
			}
		}
		spec, err := sim.Parse([]byte(twoGPUs + strings.Repeat("    - {model: H100, memory: 80Gi}\n", 58)))
		if err != nil {
			t.Fatal(err)
		}
		clk := sim.NewManualClock(time.Now())
		sc := sim.New(*spec, clk)
		c := &countingCluster{Cluster: sc}
		src := &fakeSource{rev: "r1", clock: clk}
		sets := testSets{"r1": withWorkspaces(ws...), "r2": withWorkspaces(half...)}
		l, err := New(Config{Source: src, Cluster: c, Store: sc, Load: sets.load, Decide: fifoDecide, Parallelism: 4, AllowMassPrune: true, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		res, err := l.Once(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if c.most != 4 {
			t.Errorf("at most %d actions in flight, want Parallelism 4", c.most)
		}
		var got []string
		for _, a := range res.Applied {
			got = append(got, a.Workspace.Name)
		}
		var want []string
		for _, w := range ws {
			want = append(want, w.Meta.Name)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("applied, in plan order (-want +got):\n%s", diff)
		}
		var trans []string
		for _, tr := range res.Transitions {
			trans = append(trans, tr.Workspace.Name)
		}
		if diff := cmp.Diff(want, trans); diff != "" {
			t.Errorf("transitions, in name order (-want +got):\n%s", diff)
		}
		// Half of them stop and new ones start in the same plan: every
		// start waits for every stop of the plan to return.
		sleep(clk, time.Minute)
		l.Once(t.Context())
		src.set("r2")
		more := append(slices.Clone(half), workspace("med", "x99", schema.DesiredRunning))
		more[len(more)-1].Spec.Resources.GPUs = 0
		sets["r2"] = withWorkspaces(more...)
		c.mu.Lock()
		c.started = nil
		c.mu.Unlock()
		res, err = l.Once(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"x99 after 20 stops"}, c.started); diff != "" {
			t.Errorf("the start ran before the plan's stops returned (-want +got):\n%s", diff)
		}
	})
}

func TestFailedStartBacksOffPerWorkspace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sets := testSets{"r1": withWorkspaces(workspace("hi", "big", schema.DesiredRunning), workspace("med", "small", schema.DesiredRunning))}
		h := newHarness(t, sets, "r1")
		var at []time.Time
		h.cluster.InjectApplyFault(func(a drivers.Action) error {
			if a.Workspace.Name == "big" {
				at = append(at, h.clock.Now())
				return unplaceable{}
			}
			return nil
		})
		// The cluster's watch fires all the time (berth's own writes):
		// it must not cut the workspace's backoff short.
		watch := make(chan struct{}, 1)
		h.loop.cfg.ClusterChanges = watch
		ctx, cancel := context.WithCancel(t.Context())
		firing := make(chan struct{})
		go func() {
			defer close(firing)
			for ctx.Err() == nil {
				select {
				case watch <- struct{}{}:
				default:
				}
				select {
				case <-h.clock.After(100 * time.Millisecond):
				case <-ctx.Done():
				}
			}
		}()
		done := make(chan error)
		go func() { done <- h.loop.Run(ctx, nil) }()
		h.sleep(40 * time.Second)
		synctest.Wait()
		cancel()
		<-done
		<-firing
		var gaps []time.Duration
		for i := 1; i < len(at); i++ {
			gaps = append(gaps, at[i].Sub(at[i-1]).Round(100*time.Millisecond))
		}
		// BackoffMin 1s doubling to BackoffMax 8s.
		want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second, 8 * time.Second, 8 * time.Second}
		if diff := cmp.Diff(want, gaps); diff != "" {
			t.Errorf("waits between tries of the unplaceable start (-want +got):\n%s", diff)
		}
		if got := h.states()["med/small"]; got != view.StateRunning {
			t.Errorf("med/small %s: the unplaceable start must not hold it back", got)
		}
	})
}

func TestFreedCapacityRetriesEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sets := testSets{
			"r1": withWorkspaces(workspace("hi", "big", schema.DesiredRunning), workspace("med", "other", schema.DesiredRunning)),
			"r2": withWorkspaces(workspace("hi", "big", schema.DesiredRunning), workspace("med", "other", schema.DesiredStopped)),
		}
		h := newHarness(t, sets, "r1")
		h.loop.cfg.BackoffMax = time.Hour
		var at []time.Time
		h.cluster.InjectApplyFault(func(a drivers.Action) error {
			if a.Workspace.Name == "big" && a.Kind == drivers.ActionStart {
				at = append(at, h.clock.Now())
				return unplaceable{}
			}
			return nil
		})
		ctx := t.Context()
		for range 9 { // tries at 0, 1s, 3s, 7s, …, 255s; the next after 256s
			h.loop.Once(ctx)
			h.sleep(h.loop.retry.byRef[schema.Ref{Project: "hi", Name: "big"}].retryAt.Sub(h.clock.Now()))
		}
		h.loop.Once(ctx)
		n := len(at)
		h.sleep(time.Second)
		h.loop.Once(ctx) // still backing off: nothing freed
		if len(at) != n {
			t.Fatalf("tried again without anything freed")
		}
		h.source.set("r2") // other stops: when it is gone, big is tried at once
		h.loop.Once(ctx)
		h.sleep(time.Minute)
		h.loop.Once(ctx)
		if len(at) != n+1 {
			t.Errorf("%d tries after capacity was freed, want one more than %d", len(at), n)
		}
	})
}

// TestClusterRefusingEverythingStopsThePlan: when every action fails
// alike (an overloaded cluster), the loop does not try all the others:
// it stops after as many failures in a row as actions in flight and
// backs off as for a failed cycle.
func TestClusterRefusingEverythingStopsThePlan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ws []schema.Workspace
		for i := range 40 {
			w := workspace("med", fmt.Sprintf("w%02d", i), schema.DesiredRunning)
			w.Spec.Resources.GPUs = 0
			ws = append(ws, w)
		}
		h := newHarness(t, testSets{"r1": withWorkspaces(ws...)}, "r1")
		spec, err := sim.Parse([]byte(twoGPUs + strings.Repeat("    - {model: H100, memory: 80Gi}\n", 38)))
		if err != nil {
			t.Fatal(err)
		}
		h.cluster = sim.New(*spec, h.clock)
		h.loop.cfg.Cluster, h.loop.cfg.Store = h.cluster, h.cluster
		h.loop.cfg.Parallelism = 4
		tries := 0
		h.cluster.InjectApplyFault(func(a drivers.Action) error {
			tries++
			return errors.New("429 Your IP is issuing too many concurrent connections")
		})
		res, err := h.loop.Once(t.Context())
		if err == nil || !strings.Contains(err.Error(), "in a row") {
			t.Fatalf("err %v, want the cycle to fail after failures in a row", err)
		}
		if tries > 8 {
			t.Errorf("%d actions tried, want at most 2×Parallelism", tries)
		}
		if len(res.Applied) != 0 || len(res.Failed) != tries {
			t.Errorf("applied %d, failed %d; want 0 and the %d tried", len(res.Applied), len(res.Failed), tries)
		}
	})
}

// wantCrashResumed checks workspace ref after its task crashed at 2m30s
// of progress (last checkpoint at 2m) and was started again: the path
// Starting, Running, Failed, Starting, Running, 30s of work lost, and a
// resume reason that says so.
func wantCrashResumed(t *testing.T, l *Loop, ref schema.Ref) {
	t.Helper()
	d, _ := l.Workspace(ref)
	var path []string
	for _, tr := range d.History {
		path = append(path, string(tr.To))
	}
	if diff := cmp.Diff([]string{"Starting", "Running", "Failed", "Starting", "Running"}, path); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	if d.Workspace.WorkLost.D() != 30*time.Second {
		t.Errorf("work lost %s, want the 30s since the checkpoint at 2m", d.Workspace.WorkLost)
	}
	if last := d.History[len(d.History)-1]; !strings.Contains(last.Reason, "resumed from its checkpoint at 2m0s of progress; 30s of work lost") {
		t.Errorf("resume reason %q", last.Reason)
	}
}
