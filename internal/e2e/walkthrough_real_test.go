package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/berth-dev/berth/reconcile"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/source"
	"github.com/berth-dev/berth/view"
	"github.com/hashicorp/nomad/api"
)

const exampleNomad = "../../examples/walkthrough-nomad"

// TestRealWalkthrough plays the walk-through of examples/walkthrough-nomad
// (raw_exec tasks that checkpoint on SIGTERM) through the loop and the
// Nomad driver against a real agent, and checks the story against
// Nomad's own allocations: medium runs; high arrives and preempts it —
// medium's allocation gets SIGTERM with its 10 s grace and exits by
// itself after writing its checkpoint, and only then is high placed, on
// exactly medium's GPU; high stops and medium, with no edit of its own,
// is placed again on that GPU and resumes from its checkpoint.
//
// The walk-through needs GPUs to be scarce: on an agent with more than
// one GPU, a job that is not berth's holds all of them but one (berth
// counts GPUs that other jobs hold as taken).
func TestRealWalkthrough(t *testing.T) {
	c := realnomad.Client(t)
	wtHoldAllGPUsButOne(t, c)

	dir, ckpt := t.TempDir(), t.TempDir()
	for _, f := range []string{"tiers.yaml", "projects.yaml"} {
		b, err := os.ReadFile(filepath.Join(exampleNomad, f))
		if err != nil {
			t.Fatal(err)
		}
		write(t, dir, f, string(b))
	}
	b, err := os.ReadFile(filepath.Join(exampleNomad, "workspaces.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(strings.ReplaceAll(string(b), "    driver: raw_exec\n",
		"    driver: raw_exec\n    env: {CHECKPOINT_DIR: "+strconv.Quote(ckpt)+"}\n"), "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("workspaces.yaml: %d documents", len(docs))
	}
	medDoc, highDoc := docs[0]+"\n", docs[1]
	write(t, dir, "medium.yaml", medDoc)

	d := realnomad.NewDriver(t, nomad.ConfigFromEnv(""))
	loop, err := reconcile.New(reconcile.Config{Source: source.DirSource{Dir: dir}, Cluster: d, Store: d, ClusterName: "nomad"})
	if err != nil {
		t.Fatal(err)
	}
	medium := schema.Ref{Project: "medium-priority-project", Name: "medium-training"}
	high := schema.Ref{Project: "high-priority-project", Name: "high-training"}
	started := time.Now()
	// until runs reconcile cycles until ok holds (30 s at most).
	until := func(step string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		var lastErr error
		for {
			if _, err := loop.Once(ctx); err != nil {
				lastErr = err
			}
			if ok() {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not reached after 30 s of cycles (last cycle error: %v); status %v; medium's allocations %s; high's %s",
					step, lastErr, loop.Status().Workspaces, wtAllocSummary(t, c, medium), wtAllocSummary(t, c, high))
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	logOf := func(ref schema.Ref) string {
		b, _ := os.ReadFile(filepath.Join(ckpt, ref.Project+"."+ref.Name+".log"))
		return string(b)
	}

	// 1. medium runs, on one GPU, and makes some progress.
	var med1 *api.Allocation
	until("medium runs", func() bool {
		med1 = wtRunningAlloc(t, c, medium)
		return med1 != nil && strings.Contains(logOf(medium), "step 5 (checkpoint)")
	})
	gpu := wtDeviceIDs(med1)
	if len(gpu) != 1 {
		t.Fatalf("medium's allocation holds GPUs %v, want one", gpu)
	}

	// 2. high arrives and preempts medium.
	write(t, dir, "high.yaml", highDoc)
	var hi *api.Allocation
	until("high runs", func() bool {
		hi = wtRunningAlloc(t, c, high)
		return hi != nil
	})
	if got := wtDeviceIDs(hi); !slices.Equal(got, gpu) {
		t.Errorf("high got GPUs %v, want exactly medium's %v", got, gpu)
	}
	med1 = wtAllocInfo(t, c, med1.ID)
	if med1.DesiredStatus != "stop" || med1.ClientStatus != "complete" {
		t.Errorf("medium's allocation is %s/%s after the preemption, want stop/complete", med1.DesiredStatus, med1.ClientStatus)
	}
	task := med1.Job.TaskGroups[0].Tasks[0]
	if task.KillSignal != "SIGTERM" || task.KillTimeout == nil || *task.KillTimeout != 10*time.Second {
		t.Errorf("medium's task: kill signal %q, kill timeout %v; want SIGTERM and 10s (its checkpoint spec)", task.KillSignal, task.KillTimeout)
	}
	ts := med1.TaskStates[nomad.TaskName]
	var killing, terminated *api.TaskEvent
	for _, e := range ts.Events {
		switch e.Type {
		case api.TaskKilling:
			killing = e
		case api.TaskTerminated:
			terminated = e
		}
	}
	switch {
	case killing == nil || terminated == nil:
		t.Errorf("medium's task events lack Killing or Terminated: %s", wtEvents(ts))
	case killing.KillTimeout != 10*time.Second:
		t.Errorf("medium was killed with %v of grace, want 10s: %s", killing.KillTimeout, wtEvents(ts))
	case terminated.ExitCode != 0 || terminated.Signal != 0:
		if !lostExecutor(killing, terminated) {
			t.Errorf("medium did not exit by itself within its grace (exit %d, signal %d): %s", terminated.ExitCode, terminated.Signal, wtEvents(ts))
			break
		}
		// Its own log, below, says whether it exited by itself.
		t.Logf("Nomad lost medium's executor as medium exited (hashicorp/nomad#24220), %v after the interrupt: %s",
			time.Unix(0, terminated.Time).Sub(time.Unix(0, killing.Time)).Round(time.Millisecond), terminated.DisplayMessage)
	}
	if !strings.Contains(logOf(medium), "got SIGTERM") || !strings.Contains(logOf(medium), "checkpoint written") {
		t.Errorf("medium's log does not show its checkpoint on SIGTERM:\n%s", logOf(medium))
	}
	if hiStart := hi.TaskStates[nomad.TaskName].StartedAt; hiStart.Before(ts.FinishedAt) {
		t.Errorf("high started at %v, before medium released the GPU at %v", hiStart, ts.FinishedAt)
	}
	if w := wtStatusOf(loop.Status(), medium); w.State != view.StatePreempted || w.PreemptedBy == nil || *w.PreemptedBy != high {
		t.Errorf("medium is %s (%q, by %v) while high runs, want Preempted by %s", w.State, w.Reason, w.PreemptedBy, high)
	}

	// 3. high stops; medium resumes by itself, on the same GPU, from its
	// checkpoint.
	write(t, dir, "high.yaml", strings.Replace(highDoc, "  state: Running", "  state: Stopped", 1))
	var med2 *api.Allocation
	until("medium resumes", func() bool {
		med2 = wtRunningAlloc(t, c, medium)
		return med2 != nil && med2.ID != med1.ID && wtStatusOf(loop.Status(), medium).State == view.StateRunning
	})
	if got := wtDeviceIDs(med2); !slices.Equal(got, gpu) {
		t.Errorf("medium resumed on GPUs %v, want %v", got, gpu)
	}
	if a := wtAllocInfo(t, c, hi.ID); a.DesiredStatus != "stop" {
		t.Errorf("high's allocation is %s/%s, want stopped", a.DesiredStatus, a.ClientStatus)
	}
	until("medium resumed from its checkpoint", func() bool {
		return strings.Contains(logOf(medium), "resumed from its checkpoint at step")
	})
	if strings.Contains(logOf(medium), "resumed from its checkpoint at step 0\n") {
		t.Errorf("medium resumed from step 0:\n%s", logOf(medium))
	}
	t.Logf("the walk-through took %v on Nomad; medium's log:\n%s", time.Since(started).Round(time.Second), logOf(medium))
}

// wtHoldAllGPUsButOne registers a job that is not berth's holding every
// GPU of the agent's nodes but one, and purges it when the test ends
// (before realnomad's cleanup, which waits for every allocation).
func wtHoldAllGPUsButOne(t *testing.T, c *api.Client) {
	t.Helper()
	stubs, _, err := c.Nodes().List(nil)
	if err != nil {
		t.Fatal(err)
	}
	nodes := slices.SortedFunc(slices.Values(stubs), func(a, b *api.NodeListStub) int { return strings.Compare(a.Name, b.Name) })
	job := &api.Job{ID: ptr("walkthrough-gpu-holder"), Name: ptr("walkthrough-gpu-holder"), Type: ptr("service"), Priority: ptr(100), Datacenters: []string{"*"}}
	spare := 1
	for _, s := range nodes {
		n, _, err := c.Nodes().Info(s.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		gpus := 0
		for _, dev := range n.NodeResources.Devices {
			if dev.Type == "gpu" {
				gpus += len(dev.Instances)
			}
		}
		take := gpus - spare
		spare = max(0, spare-gpus)
		if take <= 0 {
			continue
		}
		job.TaskGroups = append(job.TaskGroups, &api.TaskGroup{
			Name:        ptr("hold-" + n.Name),
			Count:       ptr(1),
			Constraints: []*api.Constraint{{LTarget: "${node.unique.name}", Operand: "=", RTarget: n.Name}},
			Tasks: []*api.Task{{
				Name: "hold", Driver: "raw_exec",
				Config: map[string]any{"command": "/bin/sh", "args": []string{"-c", "sleep 3600"}},
				Resources: &api.Resources{CPU: ptr(50), MemoryMB: ptr(32),
					Devices: []*api.RequestedDevice{{Name: "nvidia/gpu", Count: ptr(uint64(take))}}},
			}},
		})
	}
	if spare > 0 {
		t.Skip("the walk-through needs a node with a GPU; this agent has none")
	}
	if len(job.TaskGroups) == 0 {
		return // one GPU in all: nothing to hold
	}
	if _, _, err := c.Jobs().Register(job, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, _, err := c.Jobs().Deregister(*job.ID, true, nil); err != nil {
			t.Errorf("purge the GPU holder: %v", err)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		allocs, _, err := c.Jobs().Allocations(*job.ID, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		running := 0
		for _, a := range allocs {
			if a.ClientStatus == "running" {
				running++
			}
		}
		if running == len(job.TaskGroups) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the GPU holder did not start in 30 s: %d of %d allocations running", running, len(job.TaskGroups))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// wtRunningAlloc returns ref's running allocation with its task running,
// or nil.
func wtRunningAlloc(t *testing.T, c *api.Client, ref schema.Ref) *api.Allocation {
	t.Helper()
	stubs, _, err := c.Jobs().Allocations(ref.Name, true, &api.QueryOptions{Namespace: ref.Project})
	if err != nil {
		if strings.Contains(err.Error(), "404") {
			return nil
		}
		t.Fatal(err)
	}
	for _, s := range stubs {
		if s.DesiredStatus == "run" && s.ClientStatus == "running" {
			return wtAllocInfo(t, c, s.ID)
		}
	}
	return nil
}

func wtAllocInfo(t *testing.T, c *api.Client, id string) *api.Allocation {
	t.Helper()
	a, _, err := c.Allocations().Info(id, &api.QueryOptions{Namespace: "*"})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// wtDeviceIDs returns the GPU instance IDs Nomad gave the allocation.
func wtDeviceIDs(a *api.Allocation) []string {
	var out []string
	if a.AllocatedResources == nil {
		return nil
	}
	for _, tr := range a.AllocatedResources.Tasks {
		for _, dev := range tr.Devices {
			out = append(out, dev.DeviceIDs...)
		}
	}
	slices.Sort(out)
	return out
}

func wtAllocSummary(t *testing.T, c *api.Client, ref schema.Ref) string {
	stubs, _, err := c.Jobs().Allocations(ref.Name, true, &api.QueryOptions{Namespace: ref.Project})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, s := range stubs {
		out = append(out, fmt.Sprintf("%s %s/%s %s", s.ID[:8], s.DesiredStatus, s.ClientStatus, s.DesiredDescription))
	}
	return "[" + strings.Join(out, "; ") + "]"
}

// lostExecutor reports whether a task's Terminated event is Nomad losing
// the executor that waited on the task (exit -1 and an RPC error in place
// of the exit status: hashicorp/nomad#24220, seen on Nomad 2.0.5 under
// load) before the task's kill timeout ran out, so no force kill was
// sent. The task's own exit is then known only from its log.
func lostExecutor(killing, terminated *api.TaskEvent) bool {
	return terminated.ExitCode == -1 && terminated.Signal == 0 &&
		strings.Contains(terminated.DisplayMessage, "executor: error waiting on process") &&
		terminated.Time-killing.Time < int64(killing.KillTimeout)
}

func wtEvents(ts *api.TaskState) string {
	var out []string
	for _, e := range ts.Events {
		out = append(out, e.Type+": "+e.DisplayMessage)
	}
	return strings.Join(out, "; ")
}

func wtStatusOf(st view.Status, ref schema.Ref) view.WorkspaceStatus {
	for _, w := range st.Workspaces {
		if w.Project == ref.Project && w.Name == ref.Name {
			return w
		}
	}
	return view.WorkspaceStatus{}
}
