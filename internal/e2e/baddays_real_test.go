package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/berth-dev/berth/view"
	"github.com/hashicorp/nomad/api"
)

// A GPU cluster's bad days on a real Nomad (issue 24): a drained node, a
// GPU that turns unhealthy or falls off the bus, a node whose client
// dies. Each moves the workspace as a preemption would, never calls it
// Failed, and reports how long it took to run elsewhere.

// badDay starts one 2-GPU workspace with a checkpoint grace of grace,
// whose task takes 2 s to checkpoint on SIGTERM (it writes "saved" to
// r.saved), and returns the loop once it runs, with the node it runs on.
func badDay(t *testing.T, grace time.Duration) (*realLoop, string) {
	r := newRealLoop(t)
	r.saved = filepath.Join(t.TempDir(), "saved")
	r.write("tiers.yaml", realTiers)
	script := fmt.Sprintf("trap 'sleep 2; echo saved >> %s; exit 0' TERM; sleep 3600 & wait", r.saved)
	ws := strings.Replace(realWorkspace("train", 2, script), "gracePeriod: 2s", "gracePeriod: "+grace.String(), 1)
	r.write("train.yaml", ws)
	r.until(30*time.Second, "train runs", r.running("train"))
	return r, r.state("train").Node
}

// checkpointed fails t unless train's task saved its work on its
// checkpoint signal before it stopped.
func (r *realLoop) checkpointed() {
	r.t.Helper()
	if b, _ := os.ReadFile(r.saved); !strings.Contains(string(b), "saved") {
		r.t.Errorf("train did not checkpoint before it stopped: its checkpoint grace was not given")
	}
}

// movedWithin runs cycles until train runs again somewhere away says is
// away from the fault, checking on the way that it is never Failed; then
// that one of its transitions gave the reason want. It returns how long
// that took from since.
func (r *realLoop) movedWithin(within time.Duration, away func(view.WorkspaceStatus) bool, want string, since time.Time) time.Duration {
	r.t.Helper()
	r.until(within, "train runs away from the fault", func() bool {
		st := r.state("train")
		if st.State == view.StateFailed {
			r.t.Fatalf("train is Failed (%s): a bad day of the cluster is no failure of the workspace", st.Reason)
		}
		return st.State == view.StateRunning && away(st)
	})
	took := time.Since(since)
	d, _ := r.loop.Workspace(r.ref("train"))
	for _, t := range d.History {
		if t.To == view.StateFailed {
			r.t.Errorf("transition to Failed: %+v", t)
		}
	}
	if !slices.ContainsFunc(d.History, func(t view.Transition) bool { return strings.Contains(t.Reason, want) }) {
		r.t.Errorf("no transition said %q; history %+v", want, d.History)
	}
	return took
}

// offNode: running on another node than from.
func offNode(from string) func(view.WorkspaceStatus) bool {
	return func(st view.WorkspaceStatus) bool { return st.Node != from }
}

// offGPU: running without GPU id (on its node or another).
func offGPU(id string) func(view.WorkspaceStatus) bool {
	return func(st view.WorkspaceStatus) bool { return !slices.Contains(st.GPUs, id) }
}

// TestRealDrainMovesWithCheckpointGrace: an operator drains train's node
// with a 5 s deadline; berth sees the drain begin and moves it at once
// with its checkpoint signal (its 10 s grace is longer than the deadline:
// the reason says the work since its checkpoint is at risk), and it runs
// on the other node within its grace plus one start.
func TestRealDrainMovesWithCheckpointGrace(t *testing.T) {
	r, from := badDay(t, 10*time.Second)
	id := realnomad.NodeIDs(t, r.c)[from]
	t.Cleanup(func() {
		if _, err := r.c.Nodes().UpdateDrain(id, nil, true, nil); err != nil {
			t.Errorf("end the drain of %s: %v", from, err)
		}
	})
	start := time.Now()
	if _, err := r.c.Nodes().UpdateDrain(id, &api.DrainSpec{Deadline: 5 * time.Second}, false, nil); err != nil {
		t.Fatal(err)
	}
	r.until(10*time.Second, "train moving", func() bool { return r.state("train").State == view.StateMoving })
	st := r.state("train")
	if !strings.HasPrefix(st.Reason, "moving: node "+from+" is draining") || !strings.Contains(st.Reason, "at risk") {
		t.Errorf("reason %q; want the drain named, and its deadline shorter than the grace", st.Reason)
	}
	took := r.movedWithin(10*time.Second+30*time.Second, offNode(from), "node "+from+" is draining", start)
	r.checkpointed()
	realnomad.Report(t, "drain (deadline 5s, grace 10s, 2s checkpoint): running on the other node %.1fs after the drain began", took.Seconds())
}

// TestRealUnhealthyGPUMoves: one of train's GPUs turns unhealthy in
// Nomad's node record (an Xid error on a real node); berth moves it, the
// reason names the GPU, and the GPU is not offered again while it is
// unhealthy.
func TestRealUnhealthyGPUMoves(t *testing.T) {
	kit := realnomad.KitDir(t)
	r, from := badDay(t, 10*time.Second)
	gpu := r.state("train").GPUs[0]
	file := kit.GPUFile(t, from, gpu)
	t.Cleanup(func() { _ = os.Chmod(file, 0o644) })
	start := time.Now()
	if err := os.Chmod(file, 0o777); err != nil {
		t.Fatal(err)
	}
	took := r.movedWithin(60*time.Second, offGPU(gpu), "GPU "+gpu+" on node "+from+" is unhealthy", start)
	r.checkpointed()
	realnomad.Report(t, "unhealthy GPU (grace 10s, 2s checkpoint): running on other GPUs %.1fs after the GPU turned unhealthy", took.Seconds())
	// Not offered again: a second workspace wanting all four GPUs of a
	// node cannot have that node.
	r.write("wide.yaml", realWorkspace("wide", 4, "sleep 3600"))
	r.until(20*time.Second, "wide decided", func() bool { return r.state("wide").State != "" })
	if st := r.state("wide"); st.Node == from || slices.Contains(st.GPUs, gpu) {
		t.Errorf("wide placed on %s, whose GPU %s is unhealthy: %+v", from, gpu, st)
	}
}

// TestRealLostGPUMoves: one of train's GPUs disappears from its node (a
// GPU fallen off the bus); berth moves it off that GPU, naming it.
func TestRealLostGPUMoves(t *testing.T) {
	kit := realnomad.KitDir(t)
	r, from := badDay(t, 10*time.Second)
	gpu := r.state("train").GPUs[0]
	file := kit.GPUFile(t, from, gpu)
	t.Cleanup(func() { _ = os.WriteFile(file, nil, 0o644) })
	start := time.Now()
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	took := r.movedWithin(60*time.Second, offGPU(gpu), "GPU "+gpu+" is gone from node "+from, start)
	r.checkpointed()
	realnomad.Report(t, "GPU gone (grace 10s, 2s checkpoint): running on other GPUs %.1fs after the GPU was removed", took.Seconds())
}

// TestRealNodeLossMovesWorkspace: train's node's client agent is killed
// (kill -9); once Nomad marks the node down, berth starts train on the
// other node, saying the node lost it, counting the work lost, and never
// calling it Failed. The client is started again afterwards.
func TestRealNodeLossMovesWorkspace(t *testing.T) {
	kit := realnomad.KitDir(t)
	r, from := badDay(t, 2*time.Second)
	if from == "node-1" {
		// node-1 is the server too: move train to node-2 first, by
		// making node-1 ineligible and draining it.
		id := realnomad.NodeIDs(t, r.c)["node-1"]
		if _, err := r.c.Nodes().UpdateDrain(id, &api.DrainSpec{Deadline: time.Minute}, false, nil); err != nil {
			t.Fatal(err)
		}
		r.movedWithin(60*time.Second, offNode("node-1"), "draining", time.Now())
		if _, err := r.c.Nodes().UpdateDrain(id, nil, true, nil); err != nil {
			t.Fatal(err)
		}
		from = r.state("train").Node
	}
	t.Cleanup(func() {
		kit.RestartClient(t, from)
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			nodes, _, err := r.c.Nodes().List(nil)
			if err == nil {
				for _, n := range nodes {
					if n.Name == from && n.Status == "ready" {
						return
					}
				}
			}
			time.Sleep(500 * time.Millisecond)
		}
		t.Errorf("%s did not come back after its client was started again (see %s)", from, filepath.Join(kit.Dir, from+".log"))
	})
	start := time.Now()
	kit.KillClient(t, from)
	took := r.movedWithin(90*time.Second, offNode(from), "node "+from, start)
	st := r.state("train")
	if st.LastEnd == nil || st.LastEnd.Class != "node-fault" {
		t.Errorf("last end %+v; want the node's fault", st.LastEnd)
	}
	realnomad.Report(t, "node lost (client killed): running on the other node %.1fs after the kill (Nomad's heartbeat grace included)", took.Seconds())
}

// TestRealRestartAttemptsThenFailed: a task that fails on its own with
// restart: {attempts: 2} runs three times in place, then the workspace is
// Failed with its exit code, and explain shows the last lines it wrote to
// stderr; one without a restart block is Failed after one run.
func TestRealRestartAttemptsThenFailed(t *testing.T) {
	r := newRealLoop(t)
	runs := filepath.Join(t.TempDir(), "runs")
	script := fmt.Sprintf("echo run >> %s; echo 'CUDA error: an illegal memory access was encountered' >&2; sleep 0.5; exit 5", runs)
	r.write("tiers.yaml", realTiers)
	r.write("flaky.yaml", strings.Replace(realWorkspace("flaky", 1, script), "  state: Running\n", "  state: Running\n  restart: {attempts: 2, delay: 1s}\n", 1))
	once := fmt.Sprintf("echo once >> %s.once; exit 3", runs)
	r.write("once.yaml", realWorkspace("once", 1, once))
	r.until(60*time.Second, "flaky and once failed", func() bool {
		return r.state("flaky").State == view.StateFailed && r.state("once").State == view.StateFailed
	})
	b, _ := os.ReadFile(runs)
	if n := strings.Count(string(b), "run"); n != 3 {
		t.Errorf("flaky ran %d times, want 3 (two restarts)", n)
	}
	st := r.state("flaky")
	if !strings.Contains(st.Reason, "code 5") || !strings.Contains(st.Reason, "after 2 restart(s)") {
		t.Errorf("reason %q, want exit code 5 after 2 restarts", st.Reason)
	}
	if st.LastEnd == nil || st.LastEnd.Class != "task-failed" || st.LastEnd.ExitCode != 5 || !strings.Contains(st.LastEnd.Stderr, "illegal memory access") {
		t.Errorf("last end %+v; want the task's failure, exit code 5, with its stderr", st.LastEnd)
	}
	d, _ := r.loop.Workspace(r.ref("flaky"))
	if text := strings.Join(d.Explanation, "\n"); !strings.Contains(text, "illegal memory access") || !strings.Contains(text, "exit code 5") {
		t.Errorf("explain:\n%s\nwant the exit code and the stderr lines", text)
	}
	b, _ = os.ReadFile(runs + ".once")
	if n := strings.Count(string(b), "once"); n != 1 || !strings.Contains(r.state("once").Reason, "code 3") {
		t.Errorf("once ran %d times (%q); want once, Failed with code 3", n, r.state("once").Reason)
	}
	// Failed is final: nothing is applied to either again.
	for range 3 {
		if res, _ := r.loop.Once(ctx); len(res.Applied) != 0 {
			t.Errorf("applied %v to a failed workspace", res.Applied)
		}
		time.Sleep(300 * time.Millisecond)
	}
}
