package reconcile

import (
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/policies"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
)

// twoNodes is a simulated cluster of two nodes of two GPUs each.
const twoNodes = `
apiVersion: berth.dev/v1
kind: Cluster
metadata: {name: two-nodes}
spec:
  nodes:
  - name: node-1
    gpus:
    - {model: H100, memory: 80Gi}
    - {model: H100, memory: 80Gi}
  - name: node-2
    gpus:
    - {model: H100, memory: 80Gi}
    - {model: H100, memory: 80Gi}
`

// newFaultHarness is a loop with berth's own decision over twoNodes,
// running one 2-GPU workspace med/train; it returns once that runs, and
// the node it runs on.
func newFaultHarness(t *testing.T) (*harness, schema.Ref, string) {
	t.Helper()
	return newEditedHarness(t, func(*schema.Workspace) {})
}

// newEditedHarness is newFaultHarness with med/train's spec edited first.
func newEditedHarness(t *testing.T, edit func(*schema.Workspace)) (*harness, schema.Ref, string) {
	t.Helper()
	spec, err := sim.Parse([]byte(twoNodes))
	if err != nil {
		t.Fatal(err)
	}
	clk := sim.NewManualClock(time.Now())
	c := sim.New(*spec, clk)
	w := workspace("med", "train", schema.DesiredRunning)
	w.Spec.Resources.GPUs = 2
	edit(&w)
	src := &fakeSource{rev: "r1", clock: clk}
	set := withWorkspaces(w)
	for i := range set.Projects {
		set.Projects[i].Spec.Quota.GPUs = 4
	}
	l, err := New(Config{Source: src, Cluster: c, Store: c, Load: testSets{"r1": set}.load, Decide: policies.Decide, Clock: clk,
		Interval: 30 * time.Second, Debounce: 500 * time.Millisecond, Settle: time.Second,
		BackoffMin: time.Second, BackoffMax: 8 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{loop: l, cluster: c, source: src, clock: clk}
	ref := w.Ref()
	h.loop.Once(t.Context())
	h.sleep(sim.DefaultStartDelay + time.Second)
	h.loop.Once(t.Context())
	st := h.status(t, ref)
	if st.State != view.StateRunning {
		t.Fatalf("%s is %s (%s), want Running", ref, st.State, st.Reason)
	}
	return h, ref, st.Node
}

func (h *harness) status(t *testing.T, ref schema.Ref) view.WorkspaceStatus {
	t.Helper()
	for _, w := range h.loop.Status().Workspaces {
		if w.Ref() == ref {
			return w
		}
	}
	t.Fatalf("no status for %s", ref)
	return view.WorkspaceStatus{}
}

// runUntil runs cycles a second apart until ref is Running on another
// node than from, and returns the states it went through (each once, in
// order) and how long it took.
func (h *harness) runUntil(t *testing.T, ref schema.Ref, from string) ([]view.State, time.Duration) {
	t.Helper()
	start := h.clock.Now()
	var seen []view.State
	for range 300 {
		h.loop.Once(t.Context())
		st := h.status(t, ref)
		if len(seen) == 0 || seen[len(seen)-1] != st.State {
			seen = append(seen, st.State)
		}
		if st.State == view.StateRunning && st.Node != from {
			return seen, h.clock.Now().Sub(start)
		}
		h.sleep(time.Second)
	}
	t.Fatalf("%s never ran elsewhere than %s; states %v", ref, from, seen)
	return nil, 0
}

func other(node string) string {
	if node == "node-1" {
		return "node-2"
	}
	return "node-1"
}

// TestDrainMovesWithItsGrace: a drain moves the workspace as a
// preemption would (its checkpoint signal, its grace), it says why, it is
// never Failed, and it runs on the other node within its grace plus one
// start.
func TestDrainMovesWithItsGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, ref, from := newFaultHarness(t)
		if err := h.cluster.SetNodeDraining(from, true, h.clock.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		h.loop.Once(t.Context())
		st := h.status(t, ref)
		if st.State != view.StateMoving || st.ReasonKind != "moving" || st.Reason != "moving: node "+from+" is draining" {
			t.Fatalf("after the drain began: %s (%s) %q; want Moving, saying the node drains", st.State, st.ReasonKind, st.Reason)
		}
		applied := h.cluster.Applied()
		if last := applied[len(applied)-1]; last.Kind != drivers.ActionPreempt || last.Workspace != ref || last.By != (schema.Ref{}) {
			t.Fatalf("last action %+v; want a preemption of %s by no one", last, ref)
		}
		states, took := h.runUntil(t, ref, from)
		for _, s := range states {
			if s == view.StateFailed {
				t.Fatalf("states %v: a drain is no failure", states)
			}
		}
		grace := 30 * time.Second
		if max := grace + sim.DefaultStartDelay + 5*time.Second; took > max {
			t.Errorf("running elsewhere %s after the move; want within its grace plus one start (%s)", took, max)
		}
		detail, _ := h.loop.Workspace(ref)
		said := false
		for _, tr := range detail.History {
			said = said || (tr.To == view.StateStarting && tr.Reason == "moved: node "+from+" is draining")
		}
		if !said {
			t.Errorf("no Starting transition said it moved off the draining node: %+v", detail.History)
		}
		if got := failures(h.loop, "node-fault"); got != 0 {
			t.Errorf("berth_workspace_failures_total{class=node-fault} = %v; a move berth made is no failure", got)
		}
	})
}

// TestUnhealthyGPUMoves: a GPU the workspace holds turns unhealthy; it
// moves, the reason names the GPU, and the GPU is offered to no one.
func TestUnhealthyGPUMoves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, ref, from := newFaultHarness(t)
		gpu := h.status(t, ref).GPUs[0]
		if err := h.cluster.SetGPUHealthy(from, gpu, false); err != nil {
			t.Fatal(err)
		}
		h.loop.Once(t.Context())
		st := h.status(t, ref)
		if want := "moving: GPU " + gpu + " on node " + from + " is unhealthy"; st.State != view.StateMoving || st.Reason != want {
			t.Fatalf("%s %q; want Moving %q", st.State, st.Reason, want)
		}
		h.runUntil(t, ref, from)
	})
}

// TestNodeLossIsRetriedNotFailed: the node goes down under a running
// workspace; the run is the node's fault (counted as such), the workspace
// is never Failed, and it starts again on the other node at once.
func TestNodeLossIsRetriedNotFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, ref, from := newFaultHarness(t)
		if err := h.cluster.SetNodeReady(from, false); err != nil {
			t.Fatal(err)
		}
		h.loop.Once(t.Context())
		st := h.status(t, ref)
		if st.State != view.StateStarting || st.Node != other(from) || !strings.Contains(st.Reason, "node "+from) ||
			!strings.Contains(st.Reason, "attempt 1 of 5") {
			t.Fatalf("after the node went down: %s on %s, %q; want Starting on %s, naming the node and the attempt", st.State, st.Node, st.Reason, other(from))
		}
		if st.LastEnd == nil || st.LastEnd.Class != "node-fault" || st.LastEnd.Node != from {
			t.Errorf("last end %+v; want the node's fault on %s", st.LastEnd, from)
		}
		detail, _ := h.loop.Workspace(ref)
		for _, tr := range detail.History {
			if tr.To == view.StateFailed {
				t.Fatalf("transition %+v: a lost node is no failure of the workspace", tr)
			}
		}
		if got := failures(h.loop, "node-fault"); got != 1 {
			t.Errorf("berth_workspace_failures_total{class=node-fault} = %v, want 1", got)
		}
		h.runUntil(t, ref, from)
	})
}

// TestNodeFaultsBackOffThenFail: ends of the node's fault in a row are
// retried after a backoff that doubles, then, past NodeFaultAttempts,
// the workspace is Failed with the last one; a task's own failure is
// Failed at once.
func TestNodeFaultsBackOffThenFail(t *testing.T) {
	c := sim.New(sim.Spec{}, sim.NewScaledClock(1))
	l, err := New(Config{Source: &fakeSource{rev: "r1"}, Cluster: c, Store: c, Load: testSets{}.load, Decide: policies.Decide})
	if err != nil {
		t.Fatal(err)
	}
	w := workspace("med", "train", schema.DesiredRunning)
	set := withWorkspaces(w)
	at := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	end := func(i int) *drivers.Snapshot {
		return &drivers.Snapshot{Exits: []drivers.Exit{{Workspace: w.Ref(), Failed: true, Class: drivers.EndNodeFault, Node: "n",
			Message: "failed to reserve device", At: at.Add(time.Duration(i) * time.Minute), SpecHash: drivers.Fingerprint(&w.Spec)}}}
	}
	held := &drivers.Snapshot{Allocs: []drivers.Alloc{{Workspace: w.Ref(), Node: "n", Phase: drivers.AllocStarting}}}
	var waits []time.Duration
	for i := range drivers.NodeFaultAttempts {
		snap := end(i)
		o := l.settleEnds(set, snap, snap.Exits[0].At)
		o2 := l.settleEnds(set, snap, snap.Exits[0].At) // seen twice, counted once
		r, ok := o.retrying[w.Ref()]
		if !ok || len(o.finished) != 0 || o2.retrying[w.Ref()].attempt != r.attempt || r.attempt != i+1 {
			t.Fatalf("end %d: %+v, again %+v; want retried once as attempt %d", i+1, o, o2, i+1)
		}
		wait := time.Duration(0)
		if !r.until.IsZero() {
			wait = r.until.Sub(snap.Exits[0].At)
		}
		waits = append(waits, wait)
		l.settleEnds(set, held, at) // started again: its next end is another
	}
	want := []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second}
	if !slices.Equal(waits, want) {
		t.Errorf("backoffs %v, want %v", waits, want)
	}
	snap := end(9)
	o := l.settleEnds(set, snap, snap.Exits[0].At)
	if _, ok := o.finished[w.Ref()]; !ok || len(o.retrying) != 0 {
		t.Fatalf("after %d ends of the node's fault in a row: %+v; want it finished", drivers.NodeFaultAttempts+1, o)
	}
	if got := failures(l, "node-fault"); got != float64(drivers.NodeFaultAttempts+1) {
		t.Errorf("node-fault failures counted %v, want %d", got, drivers.NodeFaultAttempts+1)
	}
	// Running again resets the count.
	l.settleEnds(set, &drivers.Snapshot{Allocs: []drivers.Alloc{{Workspace: w.Ref(), Node: "n", Phase: drivers.AllocRunning}}}, at)
	snap = end(20)
	if o := l.settleEnds(set, snap, snap.Exits[0].At); o.retrying[w.Ref()].attempt != 1 {
		t.Errorf("after running again: %+v; want attempt 1", o)
	}
	// A task's own failure is final at once.
	snap = &drivers.Snapshot{Exits: []drivers.Exit{{Workspace: w.Ref(), Failed: true, Class: drivers.EndTaskFailed, ExitCode: 3, SpecHash: drivers.Fingerprint(&w.Spec)}}}
	if o := l.settleEnds(set, snap, at); len(o.retrying) != 0 || o.finished[w.Ref()].ExitCode != 3 {
		t.Errorf("task failure: %+v; want finished", o)
	}
}

// failures reads berth_workspace_failures_total{class}.
func failures(l *Loop, class string) float64 {
	mfs, _ := l.cfg.Metrics.Registry.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "berth_workspace_failures_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "class" && lp.GetValue() == class {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestNodeFaultCountsWorkSinceCheckpoint: where the driver reports no
// progress (Nomad), a run its node ended loses what it did since its last
// periodic checkpoint, all of its run without one; the reason says so.
func TestNodeFaultCountsWorkSinceCheckpoint(t *testing.T) {
	for _, tt := range []struct {
		interval, want time.Duration
	}{{0, 10 * time.Minute}, {3 * time.Minute, time.Minute}} {
		c := sim.New(sim.Spec{}, sim.NewScaledClock(1))
		l, err := New(Config{Source: &fakeSource{rev: "r1"}, Cluster: c, Store: c, Load: testSets{}.load})
		if err != nil {
			t.Fatal(err)
		}
		w := workspace("med", "train", schema.DesiredRunning)
		w.Spec.Checkpoint.Interval = tt.interval
		set := withWorkspaces(w)
		at := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
		l.records[w.Ref()] = &record{status: view.WorkspaceStatus{Project: "med", Name: "train", State: view.StateRunning, Since: at}, held: true}
		snap := &drivers.Snapshot{
			Nodes: []drivers.Node{{Name: "n", Status: "down"}},
			Exits: []drivers.Exit{{Workspace: w.Ref(), Failed: true, Class: drivers.EndNodeFault, Node: "n",
				Message: "alloc is lost since its node is down", At: at.Add(10 * time.Minute), SpecHash: drivers.Fingerprint(&w.Spec)}}}
		o := l.settleEnds(set, snap, at.Add(10*time.Minute))
		if got := l.records[w.Ref()].status.WorkLost.D(); got != tt.want {
			t.Errorf("interval %s: work lost %s, want %s", tt.interval, got, tt.want)
		}
		want := "moving: node n is down (alloc is lost since its node is down); it had run 10m0s, and what it did since its last checkpoint is lost;"
		if got := retryReason(o.retrying[w.Ref()]); !strings.HasPrefix(got, want) {
			t.Errorf("reason %q, want it to start %q", got, want)
		}
	}
}
