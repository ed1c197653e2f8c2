package sim

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

const oneGPU = `
apiVersion: berth.dev/v1
kind: Cluster
metadata: {name: one}
spec:
  startDelay: 5s
  checkpointTime: 10s
  nodes:
  - name: gpu-node
    cpu: 32
    memory: 256Gi
    gpus:
    - {model: H100, memory: 80Gi, domain: 0, numa: 0}
`

func newOne(t *testing.T) (*Cluster, *ManualClock) {
	t.Helper()
	spec, err := Parse([]byte(oneGPU))
	if err != nil {
		t.Fatal(err)
	}
	clock := NewManualClock(t0)
	return New(*spec, clock), clock
}

var ref = schema.Ref{Project: "medium", Name: "train"}

func startAction(c *Cluster, r schema.Ref, interval, grace time.Duration) drivers.Action {
	ws := &schema.Workspace{Meta: schema.Meta{Name: r.Name, Project: r.Project}}
	ws.Spec.Resources.GPUs = 1
	ws.Spec.Checkpoint = schema.Checkpoint{Signal: "SIGTERM", GracePeriod: grace, Interval: interval}
	return drivers.Action{Kind: drivers.ActionStart, Workspace: r, Spec: ws, Revision: "r1",
		Placements: []drivers.Placement{{Node: "gpu-node", GPUs: []string{c.spec.Nodes[0].GPUs[0].ID}}}}
}

func mustApply(t *testing.T, c *Cluster, a drivers.Action) {
	t.Helper()
	if err := c.Apply(context.Background(), a); err != nil {
		t.Fatal(err)
	}
}

func observe(t *testing.T, c *Cluster) drivers.Snapshot {
	t.Helper()
	s, err := c.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestParse(t *testing.T) {
	tests := map[string]struct {
		in      string
		nodes   []string
		gpus    int
		domains map[int]int // domain -> GPUs on the first node
		err     string
	}{
		"one gpu": {in: oneGPU, nodes: []string{"gpu-node"}, gpus: 1, domains: map[int]int{0: 1}},
		"preset with count": {in: `
apiVersion: berth.dev/v1
kind: Cluster
metadata: {name: big}
spec:
  nodes:
  - {name: dgx, count: 3, preset: dgx-h100}
`, nodes: []string{"dgx-1", "dgx-2", "dgx-3"}, gpus: 8, domains: map[int]int{0: 4, 1: 4}},
		"unknown preset": {in: `
apiVersion: berth.dev/v1
kind: Cluster
spec:
  nodes: [{name: x, preset: nope}]
`, err: `spec.nodes[0]: preset "nope": known presets are dgx-a100, dgx-h100, single-h100`},
		"wrong kind":    {in: "apiVersion: berth.dev/v1\nkind: Project\n", err: `kind "Project": want "Cluster"`},
		"no nodes":      {in: "apiVersion: berth.dev/v1\nkind: Cluster\n", err: "spec.nodes: a cluster needs at least one node"},
		"unknown field": {in: "apiVersion: berth.dev/v1\nkind: Cluster\nspec: {nodez: []}\n", err: `unknown field "nodez"`},
		"bad memory": {in: `
apiVersion: berth.dev/v1
kind: Cluster
spec:
  nodes: [{name: x, memory: lots}]
`, err: `spec.nodes[0]: memory: quantity "lots": not a non-negative number; write a number with a unit such as 16Gi or 512Mi`},
		"duplicate": {in: `
apiVersion: berth.dev/v1
kind: Cluster
spec:
  nodes: [{name: x}, {name: x}]
`, err: `spec.nodes[1]: node name "x" is used twice`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			spec, err := Parse([]byte(tt.in))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, n := range spec.Nodes {
				names = append(names, n.Name)
				if len(n.GPUs) != tt.gpus {
					t.Errorf("%s: %d GPUs, want %d", n.Name, len(n.GPUs), tt.gpus)
				}
			}
			if diff := cmp.Diff(tt.nodes, names); diff != "" {
				t.Errorf("nodes (-want +got):\n%s", diff)
			}
			doms := map[int]int{}
			for _, g := range spec.Nodes[0].GPUs {
				doms[g.Domain]++
			}
			if diff := cmp.Diff(tt.domains, doms); diff != "" {
				t.Errorf("domains (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseQuantities(t *testing.T) {
	spec, err := Parse([]byte(oneGPU))
	if err != nil {
		t.Fatal(err)
	}
	n := spec.Nodes[0]
	if n.CPUMHz != 32000 || n.MemoryBytes != 256<<30 || n.GPUs[0].MemoryBytes != 80<<30 {
		t.Errorf("cpu %d memory %d gpu memory %d", n.CPUMHz, n.MemoryBytes, n.GPUs[0].MemoryBytes)
	}
	if !strings.HasPrefix(n.GPUs[0].ID, "GPU-") || len(n.GPUs[0].ID) != 40 {
		t.Errorf("GPU ID %q is not UUID-shaped", n.GPUs[0].ID)
	}
}

func TestProgressAndCheckpoints(t *testing.T) {
	c, clock := newOne(t)
	mustApply(t, c, startAction(c, ref, 5*time.Minute, 30*time.Second))
	if a := observe(t, c).Allocs[0]; a.Phase != drivers.AllocStarting || a.Progress != 0 {
		t.Fatalf("just started: phase %s progress %s, want starting 0s", a.Phase, a.Progress)
	}
	clock.Advance(5*time.Second + 12*time.Minute)
	a := observe(t, c).Allocs[0]
	if a.Phase != drivers.AllocRunning || a.Progress != 12*time.Minute {
		t.Errorf("after 12m running: phase %s progress %s", a.Phase, a.Progress)
	}
	if want := t0.Add(5*time.Second + 10*time.Minute); !a.LastCheckpoint.Equal(want) {
		t.Errorf("last checkpoint %s, want %s", a.LastCheckpoint, want)
	}
}

func TestPreemptionGrace(t *testing.T) {
	tests := map[string]struct {
		grace    time.Duration
		kept     time.Duration
		lost     time.Duration
		goneFrom time.Duration // after the signal
	}{
		"grace covers the checkpoint": {grace: 30 * time.Second, kept: 12 * time.Minute, goneFrom: 10 * time.Second},
		"grace too short":             {grace: 2 * time.Second, kept: 10 * time.Minute, lost: 2 * time.Minute, goneFrom: 2 * time.Second},
		"no grace":                    {grace: 0, kept: 10 * time.Minute, lost: 2 * time.Minute},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c, clock := newOne(t)
			mustApply(t, c, startAction(c, ref, 5*time.Minute, tt.grace))
			clock.Advance(5*time.Second + 12*time.Minute)
			mustApply(t, c, drivers.Action{Kind: drivers.ActionPreempt, Workspace: ref})
			if tt.goneFrom > 0 {
				s := observe(t, c)
				if len(s.Allocs) != 1 || s.Allocs[0].Phase != drivers.AllocStopping {
					t.Fatalf("right after the signal: %+v, want one stopping alloc holding its GPU", s.Allocs)
				}
				clock.Advance(tt.goneFrom - time.Nanosecond)
				if len(observe(t, c).Allocs) != 1 {
					t.Fatalf("gone before the checkpoint or grace ended")
				}
				clock.Advance(time.Nanosecond)
			}
			if s := observe(t, c); len(s.Allocs) != 0 {
				t.Fatalf("still there after the grace: %+v", s.Allocs)
			}
			st := c.Stats()
			if got := st.Workspaces[ref]; got.Progress != tt.kept || got.Lost != tt.lost {
				t.Errorf("kept %s lost %s, want %s and %s", got.Progress, got.Lost, tt.kept, tt.lost)
			}
			if st.GPUSecondsLost != tt.lost.Seconds() || st.GPUSecondsDelivered != (12*time.Minute).Seconds() {
				t.Errorf("GPU-seconds delivered %v lost %v", st.GPUSecondsDelivered, st.GPUSecondsLost)
			}

			// Resuming continues from what was kept.
			mustApply(t, c, startAction(c, ref, 5*time.Minute, tt.grace))
			clock.Advance(5*time.Second + time.Minute)
			if a := observe(t, c).Allocs[0]; a.Progress != tt.kept+time.Minute || a.ResumedFrom != tt.kept {
				t.Errorf("resumed from %s, progress %s; want from %s, progress %s", a.ResumedFrom, a.Progress, tt.kept, tt.kept+time.Minute)
			}
		})
	}
}

func TestApplyIsIdempotent(t *testing.T) {
	c, clock := newOne(t)
	start := startAction(c, ref, time.Minute, 30*time.Second)
	mustApply(t, c, start)
	clock.Advance(time.Minute)
	mustApply(t, c, start)
	if s := observe(t, c); len(s.Allocs) != 1 || !s.Allocs[0].StartedAt.Equal(t0) {
		t.Fatalf("second start changed the run: %+v", s.Allocs)
	}
	stop := drivers.Action{Kind: drivers.ActionStop, Workspace: ref}
	mustApply(t, c, stop)
	clock.Advance(time.Second)
	mustApply(t, c, stop)
	clock.Advance(9 * time.Second)
	if s := observe(t, c); len(s.Allocs) != 0 {
		t.Fatalf("second stop delayed the end: %+v", s.Allocs)
	}
	mustApply(t, c, stop) // gone: nothing to do
	if n := len(c.Applied()); n != 5 {
		t.Errorf("recorded %d actions, want 5", n)
	}
}

// TestKeepApplied: with KeepApplied off, Apply still applies but keeps
// no record, and what was recorded is dropped.
func TestKeepApplied(t *testing.T) {
	c, clock := newOne(t)
	mustApply(t, c, startAction(c, ref, time.Minute, 30*time.Second))
	c.KeepApplied(false)
	if n := len(c.Applied()); n != 0 {
		t.Errorf("%d actions recorded after KeepApplied(false), want none", n)
	}
	clock.Advance(time.Minute)
	mustApply(t, c, drivers.Action{Kind: drivers.ActionPreempt, Workspace: ref})
	if s := observe(t, c); len(s.Allocs) != 1 || s.Allocs[0].Phase != drivers.AllocStopping {
		t.Fatalf("the preemption was not applied: %+v", s.Allocs)
	}
	if n := len(c.Applied()); n != 0 {
		t.Errorf("%d actions recorded with KeepApplied off, want none", n)
	}
	c.KeepApplied(true)
	clock.Advance(time.Minute)
	mustApply(t, c, startAction(c, ref, time.Minute, 30*time.Second))
	if n := len(c.Applied()); n != 1 {
		t.Errorf("%d actions recorded with KeepApplied on again, want 1", n)
	}
}

func TestStartRefusesBusyGPU(t *testing.T) {
	c, clock := newOne(t)
	mustApply(t, c, startAction(c, ref, time.Minute, 30*time.Second))
	clock.Advance(time.Minute)
	mustApply(t, c, drivers.Action{Kind: drivers.ActionPreempt, Workspace: ref})
	other := schema.Ref{Project: "high", Name: "eval"}
	err := c.Apply(context.Background(), startAction(c, other, 0, 0))
	if err == nil || !strings.Contains(err.Error(), "is held by medium/train") {
		t.Fatalf("start on a GPU a stopping workspace holds: %v", err)
	}
	if err := c.Apply(context.Background(), startAction(c, ref, time.Minute, 0)); err == nil || !strings.Contains(err.Error(), "still stopping") {
		t.Fatalf("restart while stopping: %v", err)
	}
	clock.Advance(10 * time.Second)
	mustApply(t, c, startAction(c, other, 0, 0))
}

func TestFaults(t *testing.T) {
	c, _ := newOne(t)
	c.FailObserves(1)
	if _, err := c.Observe(context.Background()); !errors.Is(err, ErrInjected) {
		t.Fatalf("observe: %v, want injected fault", err)
	}
	observe(t, c)
	c.FailApplies(1)
	if err := c.Apply(context.Background(), startAction(c, ref, 0, 0)); !errors.Is(err, ErrInjected) {
		t.Fatalf("apply: %v, want injected fault", err)
	}
	if s := observe(t, c); len(s.Allocs) != 0 || len(c.Applied()) != 0 {
		t.Fatalf("a failed apply had an effect: %+v", s.Allocs)
	}
	c.InjectApplyFault(func(a drivers.Action) error {
		if a.Kind == drivers.ActionStart {
			return ErrInjected
		}
		return nil
	})
	if err := c.Apply(context.Background(), startAction(c, ref, 0, 0)); !errors.Is(err, ErrInjected) {
		t.Fatalf("apply with fault: %v", err)
	}
	c.InjectApplyFault(nil)
	mustApply(t, c, startAction(c, ref, 0, 0))
	if err := c.Apply(context.Background(), drivers.Action{Kind: drivers.ActionWait}); err == nil {
		t.Fatal("a driver applied a wait")
	}
}

func TestCrashAndNodeDown(t *testing.T) {
	c, clock := newOne(t)
	mustApply(t, c, startAction(c, ref, 5*time.Minute, 30*time.Second))
	clock.Advance(5*time.Second + 7*time.Minute)
	if err := c.SetNodeReady("gpu-node", false); err != nil {
		t.Fatal(err)
	}
	s := observe(t, c)
	if len(s.Allocs) != 0 || s.Nodes[0].Ready {
		t.Fatalf("node down: allocs %+v ready %v", s.Allocs, s.Nodes[0].Ready)
	}
	if got := c.Stats().Workspaces[ref]; got.Progress != 5*time.Minute || got.Lost != 2*time.Minute {
		t.Errorf("after crash: %+v", got)
	}
	if err := c.Apply(context.Background(), startAction(c, ref, 0, 0)); err == nil {
		t.Error("started on a node that is down")
	}
}

func TestHistoryStore(t *testing.T) {
	c, _ := newOne(t)
	ctx := context.Background()
	h, err := c.LoadHistory(ctx)
	if err != nil || len(h.Usage) != 0 {
		t.Fatalf("empty store: %+v %v", h, err)
	}
	h.UsageAt = t0
	h.Usage = map[string]float64{"medium": 3}
	h.QueuedSince = map[schema.Ref]time.Time{ref: t0}
	h.Borrowing = map[schema.Ref]bool{ref: false, {Project: "medium", Name: "extra"}: true}
	if err := c.SaveHistory(ctx, h); err != nil {
		t.Fatal(err)
	}
	h.Usage["medium"] = 99 // the store holds a copy
	got, err := c.LoadHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := drivers.History{UsageAt: t0, Usage: map[string]float64{"medium": 3}, QueuedSince: map[schema.Ref]time.Time{ref: t0},
		Borrowing: map[schema.Ref]bool{ref: false, {Project: "medium", Name: "extra"}: true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestScaledClock(t *testing.T) {
	c := NewScaledClock(60)
	real := c.start
	c.real = func() time.Time { return real.Add(2 * time.Second) }
	if got := c.Now().Sub(c.origin); got != 2*time.Minute {
		t.Errorf("2 real seconds at 60x: %s, want 2m", got)
	}
}

func TestFinishKeepsAllWork(t *testing.T) {
	c, clock := newOne(t)
	mustApply(t, c, startAction(c, ref, 5*time.Minute, 0))
	clock.Advance(5*time.Second + 7*time.Minute)
	c.Finish(ref)
	if s := observe(t, c); len(s.Allocs) != 0 {
		t.Fatalf("finished but still holds GPUs: %+v", s.Allocs)
	}
	st := c.Stats()
	if got := st.Workspaces[ref]; got.Progress != 7*time.Minute || got.Lost != 0 {
		t.Errorf("kept %s lost %s, want 7m0s and 0s", got.Progress, got.Lost)
	}
	if st.GPUSecondsDelivered != (7*time.Minute).Seconds() || st.GPUSecondsLost != 0 {
		t.Errorf("GPU-seconds delivered %v lost %v, want 420 and 0", st.GPUSecondsDelivered, st.GPUSecondsLost)
	}
	c.Finish(ref) // not running: nothing happens
	if st2 := c.Stats(); st2.GPUSecondsDelivered != st.GPUSecondsDelivered {
		t.Errorf("finishing twice delivered more: %v", st2.GPUSecondsDelivered)
	}
}

// TestStartCountsReservations: a start is refused the memory that other
// runs on the node reserve, a stopping one included until it is gone,
// and gets it once they are.
func TestStartCountsReservations(t *testing.T) {
	c, clock := newOne(t)
	cpuOnly := func(r schema.Ref, mem int64) drivers.Action {
		a := startAction(c, r, 0, 30*time.Second)
		a.Spec.Spec.Resources.GPUs = 0
		a.Spec.Spec.Resources.MemoryBytes = mem
		a.Placements[0].GPUs = nil
		return a
	}
	const gi = int64(1) << 30
	a, b, d := schema.Ref{Project: "p", Name: "a"}, schema.Ref{Project: "p", Name: "b"}, schema.Ref{Project: "p", Name: "d"}
	mustApply(t, c, cpuOnly(a, 100*gi))
	mustApply(t, c, cpuOnly(b, 100*gi))
	if err := c.Apply(context.Background(), cpuOnly(d, 100*gi)); err == nil || !strings.Contains(err.Error(), "memory") {
		t.Fatalf("a third 100 GiB on 256 GiB: %v, want refused for memory", err)
	}
	clock.Advance(time.Minute)
	mustApply(t, c, drivers.Action{Kind: drivers.ActionPreempt, Workspace: a})
	if err := c.Apply(context.Background(), cpuOnly(d, 100*gi)); err == nil {
		t.Fatalf("start beside a run still stopping that holds its memory: accepted")
	}
	clock.Advance(time.Minute)
	mustApply(t, c, cpuOnly(d, 100*gi))
	c.Finish(b)
	mustApply(t, c, cpuOnly(a, 150*gi))
}

// A node may mix models, MIG instances among them: the simulator reports
// each GPU's model as the file gives it (the device group's name, as the
// NVIDIA plugin names a MIG instance's), and keeps the file's kinds.
func TestMixedModels(t *testing.T) {
	spec, err := Parse([]byte(`
apiVersion: berth.dev/v1
kind: Cluster
spec:
  nodes:
  - name: mixed
    gpus:
    - {model: NVIDIA H100 80GB HBM3, count: 2}
    - {model: NVIDIA A100-SXM4-80GB, domain: 1}
    - {model: NVIDIA A100-SXM4-80GB MIG 1g.10gb, domain: 1, count: 7}
  kinds:
  - {name: mig, match: "* MIG 1g.10gb"}
  - {name: h100, match: "NVIDIA H100*"}
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Kinds) != 2 || spec.Kinds[0].Meta.Name != "h100" || spec.Kinds[1].Meta.Name != "mig" {
		t.Errorf("kinds %+v: want h100 and mig, by name", spec.Kinds)
	}
	snap := observe(t, New(*spec, NewManualClock(t0)))
	count := map[string]int{}
	mig := 0
	for _, g := range snap.Nodes[0].GPUs {
		count[g.Model]++
		if g.IsMIG() {
			mig++
		}
	}
	want := map[string]int{"NVIDIA H100 80GB HBM3": 2, "NVIDIA A100-SXM4-80GB": 1, "NVIDIA A100-SXM4-80GB MIG 1g.10gb": 7}
	if diff := cmp.Diff(want, count); diff != "" || mig != 7 {
		t.Errorf("models observed (-want +got):\n%s\n%d MIG instances, want 7", diff, mig)
	}
}

// TestSecretsAccepted: a workspace with secrets starts and runs on the
// simulated cluster, which has no Variables and renders nothing; its run
// carries the spec's fingerprint, references included, so a change of
// a reference is a change of its task here as on Nomad.
func TestSecretsAccepted(t *testing.T) {
	c, clock := newOne(t)
	start := startAction(c, ref, time.Minute, 30*time.Second)
	start.Spec.Spec.Task = schema.Task{Driver: "docker", Image: "pytorch:2.4",
		Secrets: []schema.Secret{{Variable: "medium/hf", Key: "token", Env: "HF_TOKEN", ChangeMode: schema.SecretNoop}}}
	mustApply(t, c, start)
	clock.Advance(10 * time.Second)
	s := observe(t, c)
	if len(s.Allocs) != 1 || s.Allocs[0].Phase != drivers.AllocRunning || s.Allocs[0].Waiting != "" {
		t.Fatalf("allocations %+v; want one running", s.Allocs)
	}
	if got, want := s.Allocs[0].SpecHash, drivers.Fingerprint(&start.Spec.Spec); got != want {
		t.Errorf("its run carries fingerprint %s, want the spec's %s", got, want)
	}
}

// TestSetUse: a running workspace's allocations carry the utilization
// SetUse gave (At the sim's clock at each Observe), none while starting
// or stopping, none before SetUse or after SetUse with no value, and a
// new run starts without one; a wrong call is an error.
func TestSetUse(t *testing.T) {
	c, clock := newOne(t)
	if err := c.SetUse(ref, 0); err == nil {
		t.Error("SetUse of a workspace that does not run: no error")
	}
	mustApply(t, c, startAction(c, ref, 0, time.Minute))
	if err := c.SetUse(ref, 50); err != nil {
		t.Fatal(err)
	}
	if u := observe(t, c).Allocs[0].Use; u != nil {
		t.Errorf("a starting allocation has a reading: %+v", u)
	}
	clock.Advance(time.Minute)
	a := observe(t, c).Allocs[0]
	if a.Use == nil || !a.Use.At.Equal(clock.Now()) || a.Use.Max() != 50 || len(a.Use.Percent) != 1 {
		t.Fatalf("Use %+v, want [50] at %s", a.Use, clock.Now())
	}
	for _, bad := range [][]float64{{101}, {-1}, {1, 2}} {
		if err := c.SetUse(ref, bad...); err == nil {
			t.Errorf("SetUse(%v): no error", bad)
		}
	}
	if err := c.SetUse(ref); err != nil {
		t.Fatal(err)
	}
	if u := observe(t, c).Allocs[0].Use; u != nil {
		t.Errorf("after SetUse with no value: %+v, want nil", u)
	}
	if err := c.SetUse(ref, 0); err != nil {
		t.Fatal(err)
	}
	mustApply(t, c, drivers.Action{Kind: drivers.ActionStop, Workspace: ref})
	if u := observe(t, c).Allocs[0].Use; u != nil {
		t.Errorf("a stopping allocation has a reading: %+v", u)
	}
	clock.Advance(time.Hour)
	mustApply(t, c, startAction(c, ref, 0, time.Minute))
	clock.Advance(time.Minute)
	if u := observe(t, c).Allocs[0].Use; u != nil {
		t.Errorf("a new run has the last run's reading: %+v", u)
	}
}
