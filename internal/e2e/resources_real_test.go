package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/berth-dev/berth/load"
	"github.com/berth-dev/berth/policies"
	"github.com/berth-dev/berth/reconcile"
	"github.com/berth-dev/berth/source"
	"github.com/hashicorp/nomad/api"
)

// Issue 12, item 4: what berth decides about CPU, memory, disk and node
// features must be what a real Nomad does. These tests run against the
// agent `make e2e` starts (2 nodes × 4 fake GPUs, raw_exec, no docker, no
// host volumes), whatever CPU it advertises: where a limit must be
// reached, a job that is not berth's takes all but a few hundred MHz.

const realProject = "res"

// realSpecs writes a tier, project res and the given workspace documents
// (YAML bodies of spec.resources and anything else, one per name) into a
// new directory and returns it.
func realSpecs(t *testing.T, extra string, workspaces map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString(`apiVersion: berth.dev/v1
kind: PriorityTier
metadata: {name: medium}
spec: {value: 50}
---
apiVersion: berth.dev/v1
kind: Project
metadata: {name: ` + realProject + `}
spec: {tier: medium}
`)
	b.WriteString(extra)
	names := make([]string, 0, len(workspaces))
	for n := range workspaces {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, `---
apiVersion: berth.dev/v1
kind: Workspace
metadata: {name: %s, project: %s}
spec:
  task: {driver: raw_exec, command: /bin/sh, args: ["-c", "sleep 3600"]}
%s
`, n, realProject, workspaces[n])
	}
	write(t, dir, "specs.yaml", b.String())
	return dir
}

// resLoop returns a loop over dir and the driver it uses.
func resLoop(t *testing.T, dir string) (*reconcile.Loop, *nomad.Driver) {
	t.Helper()
	d := realnomad.NewDriver(t, nomad.ConfigFromEnv(""))
	l, err := reconcile.New(reconcile.Config{Source: source.DirSource{Dir: dir}, Cluster: d, Store: d, ClusterName: "real"})
	if err != nil {
		t.Fatal(err)
	}
	return l, d
}

// predict is berth's decision over the agent as it is now.
func predict(t *testing.T, d *nomad.Driver, dir string) policies.Decision {
	t.Helper()
	set, diags, err := load.FS(os.DirFS(dir), ".")
	if err != nil || set == nil {
		t.Fatalf("load specs: %v %v", err, diags)
	}
	snap, err := d.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return policies.Decide(policies.Input{Specs: set, Snapshot: &snap, History: &drivers.History{}, Now: snap.ObservedAt})
}

// runningAlloc waits until workspace name's job has a running
// allocation, and returns it.
func runningAlloc(t *testing.T, c *api.Client, name string) *api.Allocation {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		allocs, _, err := c.Jobs().Allocations(name, false, &api.QueryOptions{Namespace: realProject})
		if err != nil {
			t.Fatalf("allocations of %s: %v", name, err)
		}
		for _, stub := range allocs {
			switch stub.ClientStatus {
			case "running":
				a, _, err := c.Allocations().Info(stub.ID, nil)
				if err != nil {
					t.Fatal(err)
				}
				return a
			case "failed", "lost", "complete":
				t.Fatalf("%s: allocation %s is %s (%s)", name, stub.ID, stub.ClientStatus, stub.ClientDescription)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no running allocation after 45 s (%d allocations)", name, len(allocs))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// occupy registers a job that is not berth's on node (its Nomad ID),
// reserving cpu MHz of it, and removes it when the test ends. It returns
// once its allocation runs.
func occupy(t *testing.T, c *api.Client, id, nodeID string, cpu int) {
	t.Helper()
	job := api.NewBatchJob(id, id, "global", 50)
	job.Datacenters = []string{"*"}
	task := api.NewTask("hold", "raw_exec").
		SetConfig("command", "/bin/sh").SetConfig("args", []string{"-c", "sleep 3600"}).
		Require(&api.Resources{CPU: &cpu, MemoryMB: ptr(64)})
	tg := api.NewTaskGroup("hold", 1).AddTask(task).Constrain(api.NewConstraint("${node.unique.id}", "=", nodeID))
	tg.EphemeralDisk = &api.EphemeralDisk{SizeMB: ptr(110)} // above its 100 MB of logs
	job.AddTaskGroup(tg)
	if _, _, err := c.Jobs().Register(job, nil); err != nil {
		t.Fatalf("register %s: %v", id, err)
	}
	t.Cleanup(func() { _, _, _ = c.Jobs().Deregister(id, true, nil) })
	// Running, not only placed: what the test leaves free assumes it
	// holds its CPU. Nomad 2.0.5's client can fail to set one up right
	// after an exclusive core is released ("cpuparts_hook … cpuset.cpus:
	// device or resource busy"); Nomad reschedules it, and the test waits.
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for {
		allocs, _, err := c.Jobs().Allocations(id, false, nil)
		for _, a := range allocs {
			if a.ClientStatus == "running" {
				return
			}
			last = a.ClientStatus + " (" + a.ClientDescription + ")"
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not running after 60 s: %v; last allocation %s", id, err, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// nomadWouldPlace asks Nomad's own scheduler (a dry-run plan) whether a
// task reserving cpu MHz, memMB and diskMB fits on any node.
func nomadWouldPlace(t *testing.T, c *api.Client, cpu, memMB, diskMB int) (bool, string) {
	t.Helper()
	job := api.NewBatchJob("berth-probe", "berth-probe", "global", 50)
	job.Datacenters = []string{"*"}
	task := api.NewTask("probe", "raw_exec").SetConfig("command", "/bin/true").
		Require(&api.Resources{CPU: &cpu, MemoryMB: &memMB})
	tg := api.NewTaskGroup("probe", 1).AddTask(task)
	tg.EphemeralDisk = &api.EphemeralDisk{SizeMB: &diskMB}
	job.AddTaskGroup(tg)
	resp, _, err := c.Jobs().Plan(job, false, nil)
	if err != nil {
		t.Fatalf("plan probe: %v", err)
	}
	if m := resp.FailedTGAllocs["probe"]; m != nil {
		return false, fmt.Sprintf("exhausted %v, filtered %v", m.DimensionExhausted, m.ConstraintFiltered)
	}
	return true, ""
}

// TestRealCPUShareNotCores: cpu 500m is a 500 MHz share, so three such
// workspaces and one asking for an exclusive core all run on one of the
// agent's 2-core nodes, where `cores = 1` each (the old rendering) would
// have left the third blocked; Nomad reserves for each what berth
// counted.
func TestRealCPUShareNotCores(t *testing.T) {
	c := realnomad.Client(t)
	dir := realSpecs(t, "", map[string]string{
		"a":    "  resources: {gpus: 0, cpu: 500m}",
		"b":    "  resources: {gpus: 0, cpu: 500m}",
		"c":    "  resources: {gpus: 0, cpu: 500m}",
		"core": "  resources: {gpus: 0, exclusiveCores: 1}",
	})
	loop, d := resLoop(t, dir)
	snap, err := d.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	dec := predict(t, d, dir)
	node := ""
	for _, w := range dec.Workspaces {
		if w.Verdict != policies.VerdictStart || len(w.Placements) != 1 {
			t.Fatalf("berth decided %s for %s (%s); want a start", w.Verdict, w.Ref, w.Reason.Message)
		}
		if node != "" && w.Placements[0].Node != node {
			t.Errorf("%s on %s, others on %s: 0-GPU work is packed", w.Ref, w.Placements[0].Node, node)
		}
		node = w.Placements[0].Node
	}
	if _, err := loop.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	var perCore int64
	for _, n := range snap.Nodes {
		if n.Name == node {
			perCore = n.CPUPerCore
		}
	}
	for _, name := range []string{"a", "b", "c", "core"} {
		a := runningAlloc(t, c, name)
		tr := a.AllocatedResources.Tasks[nomad.TaskName]
		wantCPU, wantCores := int64(500), 0
		if name == "core" {
			wantCPU, wantCores = perCore, 1
		}
		if a.NodeName != node || tr.Cpu.CpuShares != wantCPU || len(tr.Cpu.ReservedCores) != wantCores ||
			tr.Memory.MemoryMB != 300 || a.AllocatedResources.Shared.DiskMB != 300 {
			t.Errorf("%s: Nomad placed it on %s with %d MHz, cores %v, %d MB memory, %d MB disk; berth counted %s, %d MHz, %d cores, 300, 300",
				name, a.NodeName, tr.Cpu.CpuShares, tr.Cpu.ReservedCores, tr.Memory.MemoryMB, a.AllocatedResources.Shared.DiskMB, node, wantCPU, wantCores)
		}
	}
	// berth observes what Nomad reserved, exactly.
	after, err := d.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, a := range after.Allocs {
		sum += a.CPUMHz
	}
	if want := 3*500 + perCore; sum != want {
		t.Errorf("berth observes %d MHz held; Nomad reserved %d", sum, want)
	}
}

// TestRealDefaultCPUFillsAsPredicted: workspaces that omit cpu reserve
// Nomad's 100 MHz, and berth counts it. With node 1 left 550 MHz and
// node 2 350 MHz by jobs that are not berth's, berth predicts five on
// node 1 (packed first: it has less left), three on node 2 once node 1
// is full, and two waiting; Nomad places exactly those, and its own
// scheduler agrees that a ninth would not fit.
func TestRealDefaultCPUFillsAsPredicted(t *testing.T) {
	c := realnomad.Client(t)
	ws := map[string]string{}
	for i := range 10 {
		ws[fmt.Sprintf("w%02d", i)] = "  resources: {gpus: 0}"
	}
	dir := realSpecs(t, "", ws)
	loop, d := resLoop(t, dir)
	snap, err := d.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Nodes) < 2 {
		t.Skipf("needs 2 nodes, the agent has %d", len(snap.Nodes))
	}
	leave := map[string]int64{snap.Nodes[0].Name: 550, snap.Nodes[1].Name: 350}
	for i, n := range snap.Nodes[:2] {
		occupy(t, c, fmt.Sprintf("berth-test-occupy-%d", i), n.ID, int(n.CPUMHz-leave[n.Name]))
	}
	dec := predict(t, d, dir)
	where := map[string]int{}
	placed := map[string]string{}
	var waiting []string
	for _, w := range dec.Workspaces {
		switch w.Verdict {
		case policies.VerdictStart:
			where[w.Placements[0].Node]++
			placed[w.Ref.Name] = w.Placements[0].Node
		case policies.VerdictWait:
			waiting = append(waiting, w.Ref.Name)
			if !strings.Contains(w.Reason.Message, "100 MHz CPU") {
				t.Errorf("%s waits: %q; want the CPU it lacks", w.Ref, w.Reason.Message)
			}
		}
	}
	n1, n2 := snap.Nodes[0].Name, snap.Nodes[1].Name
	if where[n1] != 5 || where[n2] != 3 || len(waiting) != 2 {
		t.Fatalf("berth predicts %v and %d waiting; want 5 on %s, 3 on %s, 2 waiting", where, len(waiting), n1, n2)
	}
	if _, err := loop.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, node := range placed {
		if a := runningAlloc(t, c, name); a.NodeName != node {
			t.Errorf("%s: Nomad runs it on %s; berth placed it on %s", name, a.NodeName, node)
		}
	}
	for _, name := range waiting {
		if _, _, err := c.Jobs().Info(name, &api.QueryOptions{Namespace: realProject}); err == nil {
			t.Errorf("%s waits in berth's decision but has a Nomad job", name)
		}
	}
	if ok, _ := nomadWouldPlace(t, c, 100, 300, 300); ok {
		t.Errorf("Nomad would place a ninth default workspace; berth said none fits")
	}
	if ok, why := nomadWouldPlace(t, c, 50, 300, 300); !ok {
		t.Errorf("Nomad would not place 50 MHz (%s): berth's view of what is left is wrong", why)
	}
}

// TestRealMissingDriverAndHostVolume: a workspace whose task driver no
// node has (docker, on an agent without it) or whose host volume no node
// offers waits with that reason and is never registered; one that needs
// neither starts beside them.
func TestRealMissingDriverAndHostVolume(t *testing.T) {
	c := realnomad.Client(t)
	volume := `---
apiVersion: berth.dev/v1
kind: Volume
metadata: {name: datasets}
spec: {size: 1Gi, type: host, projects: [` + realProject + `]}
`
	dir := realSpecs(t, volume, map[string]string{
		"plain": "  resources: {gpus: 1}",
		"mount": "  resources: {gpus: 0}\n  volumes: [{name: datasets, mountPath: /data}]",
	})
	write(t, dir, "docker.yaml", `apiVersion: berth.dev/v1
kind: Workspace
metadata: {name: boxed, project: `+realProject+`}
spec:
  task: {driver: docker, image: "busybox:1", command: sleep, args: ["3600"]}
  resources: {gpus: 1}
`)
	loop, _ := resLoop(t, dir)
	res, err := loop.Once(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"boxed": "no ready node has the docker driver",
		"mount": "no ready node has host volume datasets",
	}
	got := map[string]string{}
	for _, tr := range res.Transitions {
		got[tr.Workspace.Name] = tr.Reason
	}
	for name, reason := range want {
		if !strings.Contains(got[name], reason) {
			t.Errorf("%s: reason %q; want %q", name, got[name], reason)
		}
		if _, _, err := c.Jobs().Info(name, &api.QueryOptions{Namespace: realProject}); err == nil {
			t.Errorf("%s has a Nomad job; berth must not register what Nomad cannot place", name)
		}
	}
	runningAlloc(t, c, "plain")
	if st := status(t, loop, "boxed"); !strings.Contains(st, "docker driver") {
		t.Errorf("status of boxed: %q", st)
	}
}

// status returns the loop's status of workspace name: its state and
// reason, as `berth status` prints them.
func status(t *testing.T, l *reconcile.Loop, name string) string {
	t.Helper()
	for _, w := range l.Status().Workspaces {
		if w.Name == name {
			return string(w.State) + ": " + w.Reason
		}
	}
	return ""
}
