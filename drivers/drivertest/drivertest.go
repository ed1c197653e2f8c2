package drivertest

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// Harness is one driver over one fresh cluster.
type Harness struct {
	Cluster drivers.Cluster
	// Settle lets the cluster catch up as time would: placed allocations
	// start, stopping ones finish. A fake advances its clock; a real
	// cluster polls until nothing is starting or stopping.
	Settle func(ctx context.Context) error
	// Exact: the cluster is exactly the nodes the factory was given, and
	// the suite checks the observation against them. False for a real
	// cluster, where the suite works with what it observes.
	Exact bool
	// Task overrides the task the suite's workspaces run (default
	// raw_exec /bin/sleep 3600).
	Task *schema.Task
	// Exit makes the running tasks of a workspace exit on their own with
	// code, as a finished or crashed program does; nil skips the exit
	// cases.
	Exit func(ctx context.Context, ref schema.Ref, code int) error
	// Unplaceable is resources that no node of the cluster can give one
	// replica (more memory than any node has), for the unplaceable case;
	// the zero value skips it.
	Unplaceable schema.WorkResources
	// SetUse makes the GPUs of a workspace's running allocations report
	// the utilization percent (one per GPU, by replica, then in the
	// order of Alloc.GPUs) and returns once the driver has read it, so
	// that the next Observe carries it (drivers.Alloc.Use); nil skips
	// the reading's cases (the shape of any Use is checked all the same).
	SetUse func(ctx context.Context, ref schema.Ref, percent []float64) error
}

// Factory builds a driver over a new cluster holding nodes. It registers
// its own cleanup with t.
type Factory func(t *testing.T, nodes []drivers.Node) Harness

// Nodes is the cluster the suite asks for: two nodes with 8 GPUs each in
// two 4-GPU NVLink domains on two NUMA nodes (DGX-like), and a node with
// 2 GPUs. Names sort in this order.
func Nodes() []drivers.Node {
	var out []drivers.Node
	for n, name := range []string{"gpu-a", "gpu-b", "gpu-c"} {
		count := 8
		if name == "gpu-c" {
			count = 2
		}
		node := drivers.Node{Name: name, ID: name, Pool: "default", Ready: true, Eligible: true}
		for i := 0; i < count; i++ {
			node.GPUs = append(node.GPUs, drivers.GPU{
				ID:    fmt.Sprintf("GPU-%d%d-0000-4000-8000-%012d", n, i, n*100+i),
				Index: i, Model: "H100-fake", Domain: i / 4, NUMA: i / 4, Healthy: true,
			})
		}
		out = append(out, node)
	}
	return out
}

// Run runs the conformance suite: every driver must pass it.
func Run(t *testing.T, factory Factory) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s *suite)
	}{
		{"ObserveComplete", testObserveComplete},
		{"StartPlacesOnChosenGPUs", testStart},
		{"ApplyIsIdempotent", testIdempotent},
		{"StopThenGone", testStop},
		{"PreemptFreesGPUsForPreemptor", testPreempt},
		{"UpdateKeepsPlacement", testUpdate},
		{"GangPlacesEveryReplica", testGang},
		{"ErrorsAreClassified", testErrors},
		{"ExitIsReportedNotRestarted", testExit},
		{"UnplaceableStartIsClassified", testUnplaceable},
		{"GPUUseIsRead", testUse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := factory(t, Nodes())
			s := &suite{t: t, h: h, ctx: context.Background()}
			s.tier = &schema.PriorityTier{Meta: schema.Meta{Name: "medium"}, Spec: schema.TierSpec{Value: 50, Preemptible: true, CanPreempt: true}}
			s.project = &schema.Project{Meta: schema.Meta{Name: "berth-conformance"}, Spec: schema.ProjectSpec{Tier: "medium"}}
			t.Cleanup(s.cleanup)
			tt.fn(t, s)
		})
	}
}

type suite struct {
	t       *testing.T
	h       Harness
	ctx     context.Context
	tier    *schema.PriorityTier
	project *schema.Project
	started []schema.Ref
}

func (s *suite) observe() drivers.Snapshot {
	s.t.Helper()
	snap, err := s.h.Cluster.Observe(s.ctx)
	if err != nil {
		s.t.Fatalf("Observe: %v", err)
	}
	return snap
}

func (s *suite) settle() {
	s.t.Helper()
	if err := s.h.Settle(s.ctx); err != nil {
		s.t.Fatalf("Settle: %v", err)
	}
}

func (s *suite) ref(name string) schema.Ref {
	return schema.Ref{Project: s.project.Meta.Name, Name: name}
}

func (s *suite) workspace(name string, gpus, replicas int) *schema.Workspace {
	task := schema.Task{Driver: "raw_exec", Command: "/bin/sleep", Args: []string{"3600"}}
	if s.h.Task != nil {
		task = *s.h.Task
	}
	return &schema.Workspace{
		Meta: schema.Meta{Name: name, Project: s.project.Meta.Name},
		Spec: schema.WorkspaceSpec{
			State: schema.DesiredRunning, Task: task, Replicas: replicas, Preemptible: true,
			Resources:  schema.WorkResources{GPUs: gpus, MemoryBytes: 64 << 20},
			Checkpoint: schema.Checkpoint{Signal: "SIGTERM", GracePeriod: 5 * time.Second},
		},
	}
}

// start returns a Start action for a workspace at the given placements.
func (s *suite) start(name, revision string, pl ...drivers.Placement) drivers.Action {
	gpus := 0
	if len(pl) > 0 {
		gpus = len(pl[0].GPUs)
	}
	return drivers.Action{
		Kind: drivers.ActionStart, Workspace: s.ref(name), Spec: s.workspace(name, gpus, len(pl)),
		Project: s.project, Tier: s.tier, Placements: pl, Revision: revision,
	}
}

func (s *suite) apply(a drivers.Action) {
	s.t.Helper()
	if a.Kind == drivers.ActionStart || a.Kind == drivers.ActionUpdate {
		s.started = append(s.started, a.Workspace)
	}
	if err := s.h.Cluster.Apply(s.ctx, a); err != nil {
		s.t.Fatalf("Apply(%s %s): %v", a.Kind, a.Workspace, err)
	}
}

// cleanup stops what the case started and, once it is gone, purges it:
// the suite leaves nothing behind.
func (s *suite) cleanup() {
	for _, ref := range s.started {
		_ = s.h.Cluster.Apply(s.ctx, drivers.Action{Kind: drivers.ActionStop, Workspace: ref, Project: s.project})
	}
	if len(s.started) > 0 {
		_ = s.h.Settle(s.ctx)
	}
	for _, ref := range s.started {
		_ = s.h.Cluster.Apply(s.ctx, drivers.Action{Kind: drivers.ActionPurge, Workspace: ref, Project: s.project})
	}
}

// freeGPUs returns a node of the snapshot with at least n healthy GPUs no
// allocation holds, and n of them sorted (same NVLink domain first), or
// skips when the cluster has none (a real cluster may be busy).
func (s *suite) freeGPUs(snap drivers.Snapshot, n int, exclude ...string) (string, []string) {
	s.t.Helper()
	held := map[string]bool{}
	for _, a := range snap.Allocs {
		for _, g := range a.GPUs {
			held[a.Node+"/"+g] = true
		}
	}
	for _, node := range snap.Nodes {
		if !node.Ready || !node.Eligible || slices.Contains(exclude, node.Name) {
			continue
		}
		byDomain := map[int][]string{}
		for _, g := range node.GPUs {
			if g.Healthy && !held[node.Name+"/"+g.ID] {
				byDomain[g.Domain] = append(byDomain[g.Domain], g.ID)
			}
		}
		var domains []int
		for d := range byDomain {
			domains = append(domains, d)
		}
		sort.Ints(domains)
		var all []string
		for _, d := range domains {
			all = append(all, byDomain[d]...)
		}
		if len(all) >= n {
			out := append([]string(nil), all[:n]...)
			sort.Strings(out)
			return node.Name, out
		}
	}
	s.t.Skipf("the cluster has no ready node with %d free GPUs", n)
	return "", nil
}

func allocOf(snap drivers.Snapshot, ref schema.Ref, replica int) *drivers.Alloc {
	for i := range snap.Allocs {
		if snap.Allocs[i].Workspace == ref && snap.Allocs[i].Replica == replica {
			return &snap.Allocs[i]
		}
	}
	return nil
}

func countOf(snap drivers.Snapshot, ref schema.Ref) int {
	n := 0
	for _, a := range snap.Allocs {
		if a.Workspace == ref {
			n++
		}
	}
	return n
}

func testObserveComplete(t *testing.T, s *suite) {
	a, b := s.observe(), s.observe()
	if !sort.SliceIsSorted(a.Nodes, func(i, j int) bool { return a.Nodes[i].Name < a.Nodes[j].Name }) {
		t.Errorf("nodes are not sorted by name")
	}
	for _, n := range a.Nodes {
		if !sort.SliceIsSorted(n.GPUs, func(i, j int) bool { return n.GPUs[i].Index < n.GPUs[j].Index }) {
			t.Errorf("node %s: GPUs are not sorted by index", n.Name)
		}
	}
	if d := cmp.Diff(a, b, cmpopts.IgnoreFields(drivers.Snapshot{}, "ObservedAt")); d != "" {
		t.Errorf("two observations of an unchanged cluster differ (-first +second):\n%s", d)
	}
	if a.ObservedAt.IsZero() {
		t.Errorf("ObservedAt is zero")
	}
	if !s.h.Exact {
		return
	}
	want := Nodes()
	opts := cmp.Options{
		cmpopts.IgnoreFields(drivers.Node{}, "ID", "CPUMHz", "MemoryBytes", "DiskBytes", "Cores", "CPUPerCore", "Features", "Drivers", "HostVolumes", "Pool", "Datacenter", "Class", "Meta"),
		cmpopts.IgnoreFields(drivers.GPU{}, "MemoryBytes", "Model"),
		cmpopts.EquateEmpty(),
	}
	if d := cmp.Diff(want, a.Nodes, opts); d != "" {
		t.Errorf("observed nodes differ from the cluster (-want +got):\n%s", d)
	}
	if len(a.Allocs) != 0 {
		t.Errorf("a fresh cluster has allocations: %v", a.Allocs)
	}
}

func testStart(t *testing.T, s *suite) {
	node, gpus := s.freeGPUs(s.observe(), 2)
	ref := s.ref("ws-start")
	s.apply(s.start("ws-start", "r1", drivers.Placement{Replica: 0, Node: node, GPUs: gpus}))
	check := func(phases ...drivers.AllocPhase) {
		t.Helper()
		snap := s.observe()
		a := allocOf(snap, ref, 0)
		if a == nil {
			t.Fatalf("no allocation for %s after Start: %v", ref, snap.Allocs)
		}
		if a.Node != node || !slices.Equal(a.GPUs, gpus) {
			t.Errorf("placed on %s %v, want %s %v", a.Node, a.GPUs, node, gpus)
		}
		if !slices.Contains(phases, a.Phase) {
			t.Errorf("phase %s, want one of %v", a.Phase, phases)
		}
		if a.Revision != "r1" {
			t.Errorf("revision %q, want r1", a.Revision)
		}
	}
	check(drivers.AllocStarting, drivers.AllocRunning)
	s.settle()
	check(drivers.AllocRunning)
}

func testIdempotent(t *testing.T, s *suite) {
	node, gpus := s.freeGPUs(s.observe(), 1)
	a := s.start("ws-idem", "r1", drivers.Placement{Node: node, GPUs: gpus})
	s.apply(a)
	s.apply(a)
	s.settle()
	first := s.observe()
	s.apply(a)
	second := s.observe()
	if n := countOf(second, a.Workspace); n != 1 {
		t.Fatalf("%d allocations after applying Start three times, want 1", n)
	}
	if d := cmp.Diff(first.Allocs, second.Allocs); d != "" {
		t.Errorf("re-applying an applied Start changed allocations (-before +after):\n%s", d)
	}
	stop := drivers.Action{Kind: drivers.ActionStop, Workspace: a.Workspace, Project: s.project}
	s.apply(stop)
	s.apply(stop)
}

func testStop(t *testing.T, s *suite) {
	node, gpus := s.freeGPUs(s.observe(), 1)
	ref := s.ref("ws-stop")
	s.apply(s.start("ws-stop", "r1", drivers.Placement{Node: node, GPUs: gpus}))
	s.settle()
	s.apply(drivers.Action{Kind: drivers.ActionStop, Workspace: ref, Project: s.project})
	if a := allocOf(s.observe(), ref, 0); a != nil && a.Phase != drivers.AllocStopping {
		t.Errorf("right after Stop the allocation is %s, want stopping or gone", a.Phase)
	}
	s.settle()
	if a := allocOf(s.observe(), ref, 0); a != nil {
		t.Errorf("after Stop and settling the allocation is still there: %+v", a)
	}
	s.apply(drivers.Action{Kind: drivers.ActionStop, Workspace: ref, Project: s.project})
	s.apply(drivers.Action{Kind: drivers.ActionStop, Workspace: s.ref("ws-never-started"), Project: s.project})
}

func testPreempt(t *testing.T, s *suite) {
	node, gpus := s.freeGPUs(s.observe(), 4)
	victim, by := s.ref("ws-victim"), s.ref("ws-preemptor")
	s.apply(s.start("ws-victim", "r1", drivers.Placement{Node: node, GPUs: gpus}))
	s.settle()
	s.apply(drivers.Action{Kind: drivers.ActionPreempt, Workspace: victim, By: by, Project: s.project, Reason: "conformance"})
	snap := s.observe()
	if a := allocOf(snap, victim, 0); a != nil {
		if a.Phase != drivers.AllocStopping {
			t.Errorf("right after Preempt the victim is %s, want stopping or gone", a.Phase)
		}
		// While the victim holds them, the GPUs are not free: the
		// preemptor is refused as a conflict.
		err := s.h.Cluster.Apply(s.ctx, s.start("ws-preemptor", "r1", drivers.Placement{Node: node, GPUs: gpus}))
		s.started = append(s.started, by)
		if err == nil {
			t.Errorf("Start on GPUs a stopping victim still holds succeeded")
		} else if c := drivers.ClassOf(err); c != drivers.ClassConflict {
			t.Errorf("Start on held GPUs: class %s, want conflict (%v)", c, err)
		}
	}
	s.settle()
	if a := allocOf(s.observe(), victim, 0); a != nil {
		t.Fatalf("victim still there after settling: %+v", a)
	}
	s.apply(s.start("ws-preemptor", "r1", drivers.Placement{Node: node, GPUs: gpus}))
	s.settle()
	a := allocOf(s.observe(), by, 0)
	if a == nil || !slices.Equal(a.GPUs, gpus) || a.Phase != drivers.AllocRunning {
		t.Errorf("preemptor: %+v, want running on %v", a, gpus)
	}
}

// testUpdate: an Update that changes nothing the task sees (a new
// revision, a new priority) keeps the task running, the same run (ID);
// one that changes the task restarts it where it runs, and the snapshot
// says so (a new run ID, the new fingerprint).
func testUpdate(t *testing.T, s *suite) {
	node, gpus := s.freeGPUs(s.observe(), 2)
	a := s.start("ws-update", "r1", drivers.Placement{Node: node, GPUs: gpus})
	s.apply(a)
	s.settle()
	before := allocOf(s.observe(), a.Workspace, 0)
	if before == nil || before.SpecHash != drivers.Fingerprint(&a.Spec.Spec) || before.Priority != s.tier.Spec.Value {
		t.Fatalf("after Start: %+v, want spec hash %s and priority %d", before, drivers.Fingerprint(&a.Spec.Spec), s.tier.Spec.Value)
	}
	check := func(what string, restarted bool, hash string, prio int) *drivers.Alloc {
		t.Helper()
		got := allocOf(s.observe(), a.Workspace, 0)
		switch {
		case got == nil || got.Phase != drivers.AllocRunning || got.Node != node || !slices.Equal(got.GPUs, gpus):
			t.Fatalf("after %s: %+v, want running on %s %v", what, got, node, gpus)
		case !restarted && got.ID != before.ID:
			t.Errorf("after %s the task was restarted (run %s, was %s); nothing it sees changed", what, got.ID, before.ID)
		case restarted && (got.ID == before.ID || got.ID == ""):
			t.Errorf("after %s the run is %q, was %q: a restart must show as a new run", what, got.ID, before.ID)
		case got.SpecHash != hash || got.Priority != prio:
			t.Errorf("after %s: spec hash %s priority %d, want %s %d", what, got.SpecHash, got.Priority, hash, prio)
		}
		return got
	}
	// 1. A new revision alone.
	up := a
	up.Kind, up.Revision = drivers.ActionUpdate, "r2"
	s.apply(up)
	s.settle()
	check("a revision-only Update", false, before.SpecHash, s.tier.Spec.Value)
	// 2. A new priority: in place.
	higher := *s.tier
	higher.Spec.Value += 10
	up.Tier, up.Revision = &higher, "r3"
	s.apply(up)
	s.settle()
	check("a priority Update", false, before.SpecHash, higher.Spec.Value)
	// 3. A changed task: restarted where it runs.
	ws := *a.Spec
	ws.Spec.Task.Env = map[string]string{"BERTH_CONFORMANCE": "changed"}
	up.Spec, up.Revision, up.Restarts = &ws, "r4", true
	s.apply(up)
	s.settle()
	if got := check("a task Update", true, drivers.Fingerprint(&ws.Spec), higher.Spec.Value); got.Revision != "r4" {
		t.Errorf("after a task Update the revision is %q, want r4", got.Revision)
	}
}

// testExit: a task that exits on its own is reported in Snapshot.Exits
// (completed for 0, failed with its code otherwise), holds nothing, and is
// not run again by the cluster; a Start runs it again; a Stop clears it.
func testExit(t *testing.T, s *suite) {
	if s.h.Exit == nil {
		t.Skip("the harness cannot make a task exit")
	}
	for _, code := range []int{0, 3} {
		name := fmt.Sprintf("ws-exit-%d", code)
		node, gpus := s.freeGPUs(s.observe(), 1)
		a := s.start(name, "r1", drivers.Placement{Node: node, GPUs: gpus})
		s.apply(a)
		s.settle()
		if err := s.h.Exit(s.ctx, a.Workspace, code); err != nil {
			t.Fatalf("exit %d: %v", code, err)
		}
		s.settle()
		snap := s.observe()
		if al := allocOf(snap, a.Workspace, 0); al != nil {
			t.Fatalf("exit %d: the workspace still has an allocation: %+v", code, al)
		}
		ex := exitOf(snap, a.Workspace)
		switch {
		case ex == nil:
			t.Fatalf("exit %d: not in Snapshot.Exits: %+v", code, snap.Exits)
		case ex.Failed != (code != 0) || ex.ExitCode != code:
			t.Errorf("exit %d: reported %+v", code, *ex)
		case ex.SpecHash != drivers.Fingerprint(&a.Spec.Spec):
			t.Errorf("exit %d: spec hash %s, want %s", code, ex.SpecHash, drivers.Fingerprint(&a.Spec.Spec))
		}
		// Nothing runs it again by itself.
		s.settle()
		if al := allocOf(s.observe(), a.Workspace, 0); al != nil {
			t.Errorf("exit %d: it was started again without berth: %+v", code, al)
		}
		if code == 0 {
			// A Start runs it again, as a new run.
			s.apply(a)
			s.settle()
			snap = s.observe()
			if al := allocOf(snap, a.Workspace, 0); al == nil || al.Phase != drivers.AllocRunning {
				t.Errorf("Start after exit: %+v, want running", al)
			}
			if ex := exitOf(snap, a.Workspace); ex != nil {
				t.Errorf("Start after exit: the old exit is still reported: %+v", *ex)
			}
			continue
		}
		// A Stop clears the ended run.
		s.apply(drivers.Action{Kind: drivers.ActionStop, Workspace: a.Workspace, Project: s.project})
		s.settle()
		if ex := exitOf(s.observe(), a.Workspace); ex != nil {
			t.Errorf("Stop after exit: still reported: %+v", *ex)
		}
	}
}

// testUnplaceable: a start the cluster accepts but cannot place is
// ClassUnplaceable with the cluster's reason, and leaves nothing running.
func testUnplaceable(t *testing.T, s *suite) {
	if reflect.ValueOf(s.h.Unplaceable).IsZero() {
		t.Skip("the harness names no resources the cluster cannot give")
	}
	snap := s.observe()
	node := ""
	for _, n := range snap.Nodes {
		if n.Ready && n.Eligible {
			node = n.Name
			break
		}
	}
	a := s.start("ws-unplaceable", "r1", drivers.Placement{Node: node})
	a.Spec.Spec.Resources = s.h.Unplaceable
	s.started = append(s.started, a.Workspace)
	err := s.h.Cluster.Apply(s.ctx, a)
	if c := drivers.ClassOf(err); err == nil || c != drivers.ClassUnplaceable {
		t.Fatalf("Apply = %v (class %s), want unplaceable", err, c)
	}
	if !strings.Contains(err.Error(), "memory") {
		t.Errorf("the error does not say what is exhausted (memory): %v", err)
	}
	// Trying again at once is refused the same way.
	if err := s.h.Cluster.Apply(s.ctx, a); drivers.ClassOf(err) != drivers.ClassUnplaceable {
		t.Errorf("second Apply = %v, want unplaceable", err)
	}
	s.settle()
	if al := allocOf(s.observe(), a.Workspace, 0); al != nil {
		t.Errorf("an unplaceable start left an allocation: %+v", al)
	}
}

func exitOf(snap drivers.Snapshot, ref schema.Ref) *drivers.Exit {
	for i := range snap.Exits {
		if snap.Exits[i].Workspace == ref {
			return &snap.Exits[i]
		}
	}
	return nil
}

func testGang(t *testing.T, s *suite) {
	snap := s.observe()
	n0, g0 := s.freeGPUs(snap, 2)
	ready := 0
	for _, n := range snap.Nodes {
		if n.Ready && n.Eligible {
			ready++
		}
	}
	if ready < 2 {
		t.Skipf("a gang across nodes needs a second ready node; the cluster has %d", ready)
	}
	n1, g1 := s.freeGPUs(snap, 2, n0)
	ref := s.ref("ws-gang")
	s.apply(s.start("ws-gang", "r1", drivers.Placement{Replica: 0, Node: n0, GPUs: g0}, drivers.Placement{Replica: 1, Node: n1, GPUs: g1}))
	s.settle()
	got := s.observe()
	for r, want := range []struct {
		node string
		gpus []string
	}{{n0, g0}, {n1, g1}} {
		a := allocOf(got, ref, r)
		if a == nil || a.Node != want.node || !slices.Equal(a.GPUs, want.gpus) {
			t.Errorf("replica %d: %+v, want on %s %v", r, a, want.node, want.gpus)
		}
	}
}

func testErrors(t *testing.T, s *suite) {
	snap := s.observe()
	node, gpus := s.freeGPUs(snap, 2)
	s.apply(s.start("ws-holder", "r1", drivers.Placement{Node: node, GPUs: gpus[:1]}))
	s.settle()
	bad := *s.tier
	bad.Spec.Value = 101
	invalidTier := s.start("ws-bad-tier", "r1", drivers.Placement{Node: node, GPUs: gpus[1:]})
	invalidTier.Tier = &bad
	wait := drivers.Action{Kind: drivers.ActionWait, Workspace: s.ref("ws-wait"), Victims: []schema.Ref{s.ref("ws-holder")}}
	tests := map[string]struct {
		a    drivers.Action
		want drivers.Class
	}{
		"priority out of range is invalid": {invalidTier, drivers.ClassInvalid},
		"a Wait never reaches a driver":    {wait, drivers.ClassInvalid},
		"held GPU is a conflict":           {s.start("ws-clash", "r1", drivers.Placement{Node: node, GPUs: gpus[:1]}), drivers.ClassConflict},
		"unknown node is a conflict":       {s.start("ws-nowhere", "r1", drivers.Placement{Node: "no-such-node", GPUs: gpus[1:]}), drivers.ClassConflict},
		"unknown GPU is a conflict":        {s.start("ws-ghost", "r1", drivers.Placement{Node: node, GPUs: []string{"GPU-no-such-device"}}), drivers.ClassConflict},
	}
	names := make([]string, 0, len(tests))
	for name := range tests {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		tt := tests[name]
		s.started = append(s.started, tt.a.Workspace)
		err := s.h.Cluster.Apply(s.ctx, tt.a)
		if err == nil {
			t.Errorf("%s: Apply succeeded", name)
			continue
		}
		if got := drivers.ClassOf(err); got != tt.want {
			t.Errorf("%s: class %s, want %s (%v)", name, got, tt.want, err)
		}
	}
	// Nothing of the refused actions may be left running.
	after := s.observe()
	for _, ref := range []string{"ws-bad-tier", "ws-clash", "ws-nowhere", "ws-ghost"} {
		if a := allocOf(after, s.ref(ref), 0); a != nil && a.Phase != drivers.AllocStopping {
			t.Errorf("refused %s left an allocation: %+v", ref, a)
		}
	}
}

// checkUse checks what the contract promises of every Use in snap: on a
// running allocation, at most one percent per GPU, each 0–100, and when
// it was measured.
func checkUse(t *testing.T, snap drivers.Snapshot) {
	t.Helper()
	for _, a := range snap.Allocs {
		u := a.Use
		if u == nil {
			continue
		}
		if a.Phase != drivers.AllocRunning {
			t.Errorf("%s replica %d is %s but has a GPU utilization reading", a.Workspace, a.Replica, a.Phase)
		}
		if len(u.Percent) == 0 || len(u.Percent) > len(a.GPUs) {
			t.Errorf("%s replica %d: %d readings for %d GPUs, want 1 to %d (nil without any)", a.Workspace, a.Replica, len(u.Percent), len(a.GPUs), len(a.GPUs))
		}
		for _, p := range u.Percent {
			if p < 0 || p > 100 {
				t.Errorf("%s replica %d: utilization %v%%, want 0 to 100", a.Workspace, a.Replica, p)
			}
		}
		if u.At.IsZero() {
			t.Errorf("%s replica %d: a reading without its time", a.Workspace, a.Replica)
		}
	}
}

func testUse(t *testing.T, s *suite) {
	node, gpus := s.freeGPUs(s.observe(), 2)
	ref := s.ref("ws-use")
	s.apply(s.start("ws-use", "r1", drivers.Placement{Node: node, GPUs: gpus}))
	s.settle()
	checkUse(t, s.observe())
	if s.h.SetUse == nil {
		return
	}
	for _, want := range [][]float64{{0, 85}, {0, 0}, {100, 30}} {
		if err := s.h.SetUse(s.ctx, ref, want); err != nil {
			t.Fatalf("SetUse(%v): %v", want, err)
		}
		snap := s.observe()
		checkUse(t, snap)
		a := allocOf(snap, ref, 0)
		if a == nil || a.Use == nil {
			t.Fatalf("after SetUse(%v) the allocation has no reading: %+v", want, a)
		}
		if !slices.Equal(a.Use.Percent, want) || a.Use.Max() != slices.Max(want) {
			t.Errorf("Use.Percent %v (max %v), want %v in the order of its GPUs %v", a.Use.Percent, a.Use.Max(), want, a.GPUs)
		}
	}
	s.apply(drivers.Action{Kind: drivers.ActionStop, Workspace: ref, Project: s.project})
	snap := s.observe()
	checkUse(t, snap)
	if a := allocOf(snap, ref, 0); a != nil && a.Use != nil {
		t.Errorf("a stopping allocation has a reading: %+v", a.Use)
	}
}
