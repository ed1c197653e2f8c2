package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/api"
	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/reconcile"
	"github.com/berth-dev/berth/source"
	"github.com/berth-dev/berth/source/watch"
	"github.com/berth-dev/berth/view"
	"github.com/google/go-cmp/cmp"
)

const example = "../examples/walkthrough"

// walkthrough is the seed walk-through, driven through the real loop (the
// spec loader, the decision engine, fsnotify on the spec directory) over
// the simulated one-GPU cluster, observed only through the HTTP API.
type walkthrough struct {
	t      *testing.T
	dir    string
	clock  *sim.ManualClock
	server *httptest.Server
}

// splitWorkspaces returns the documents of the example's workspaces.yaml.
func splitWorkspaces(t *testing.T) (medium, high string) {
	b, err := os.ReadFile(filepath.Join(example, "workspaces.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(b), "\n---\n")
	if len(docs) != 2 || !strings.Contains(docs[0], "medium-training") || !strings.Contains(docs[1], "high-training") {
		t.Fatalf("examples/walkthrough/workspaces.yaml: want the medium then the high workspace, got %d documents", len(docs))
	}
	return docs[0] + "\n", docs[1]
}

func (w *walkthrough) write(name, content string) {
	w.t.Helper()
	if err := os.WriteFile(filepath.Join(w.dir, name), []byte(content), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

func (w *walkthrough) get(path string, v any) {
	w.t.Helper()
	resp, err := http.Get(w.server.URL + path)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		w.t.Fatalf("GET %s: %s\n%s", path, resp.Status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		w.t.Fatalf("GET %s: %v\n%s", path, err, body)
	}
}

func (w *walkthrough) status() view.Status {
	var st view.Status
	w.get("/api/v1/status", &st)
	if st.Version != view.APIVersion {
		w.t.Fatalf("status version %q, want %q", st.Version, view.APIVersion)
	}
	return st
}

func find(st view.Status, project, name string) *view.WorkspaceStatus {
	for i := range st.Workspaces {
		if st.Workspaces[i].Project == project && st.Workspaces[i].Name == name {
			return &st.Workspaces[i]
		}
	}
	return nil
}

// until advances the simulated clock in steps of step and polls the
// status until cond holds.
func (w *walkthrough) until(what string, step time.Duration, cond func(view.Status) bool) view.Status {
	w.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := w.status()
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(st, "", "  ")
			w.t.Fatalf("gave up waiting for %s; status:\n%s", what, b)
		}
		w.clock.Advance(step)
		time.Sleep(10 * time.Millisecond)
	}
}

func state(st view.Status, ref string) view.State {
	p, n, _ := strings.Cut(ref, "/")
	if ws := find(st, p, n); ws != nil {
		return ws.State
	}
	return ""
}

const (
	medium = "medium-priority-project/medium-training"
	high   = "high-priority-project/high-training"
)

func TestWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	w := &walkthrough{t: t, dir: t.TempDir(), clock: sim.NewManualClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))}
	for _, f := range []string{"tiers.yaml", "projects.yaml", "volume.yaml"} {
		b, err := os.ReadFile(filepath.Join(example, f))
		if err != nil {
			t.Fatal(err)
		}
		w.write(f, string(b))
	}
	medDoc, highDoc := splitWorkspaces(t)
	w.write("medium.yaml", medDoc)

	spec, err := sim.ReadFile(filepath.Join(example, "cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cluster := sim.New(*spec, w.clock)
	loop, err := reconcile.New(reconcile.Config{
		Source: source.DirSource{Dir: w.dir}, Cluster: cluster, Store: cluster,
		Interval: 200 * time.Millisecond, Debounce: 50 * time.Millisecond, Settle: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	w.server = httptest.NewServer(api.Handler(loop, nil))
	defer w.server.Close()
	ctx, cancel := context.WithCancel(t.Context())
	changes, err := watch.Dir(ctx, w.dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- loop.Run(ctx, changes) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	// 1. The medium workspace starts and runs past a few checkpoints (every 10m).
	w.until("medium Running", 5*time.Second, func(st view.Status) bool { return state(st, medium) == view.StateRunning })
	w.until("medium to run 25m", time.Minute, func(st view.Status) bool {
		return find(st, "medium-priority-project", "medium-training").Progress.D() >= 25*time.Minute
	})

	// 2. The high workspace arrives and preempts it.
	w.write("high.yaml", highDoc)
	st := w.until("medium preempted", 0, func(st view.Status) bool {
		s := state(st, medium)
		return s == view.StatePreempting || s == view.StatePreempted
	})
	m := find(st, "medium-priority-project", "medium-training")
	if m.PreemptedBy == nil || m.PreemptedBy.String() != high || !strings.Contains(m.Reason, "tier high (80)") {
		t.Errorf("medium preempted by %v because %q; want by %s, naming the tiers", m.PreemptedBy, m.Reason, high)
	}
	st = w.until("high Running", 2*time.Second, func(st view.Status) bool { return state(st, high) == view.StateRunning })
	if got := state(st, medium); got != view.StatePreempted {
		t.Errorf("medium %s while high runs, want Preempted", got)
	}
	w.until("high to run 20m", time.Minute, func(st view.Status) bool {
		return find(st, "high-priority-project", "high-training").Progress.D() >= 20*time.Minute
	})

	// 3. The high workspace is stopped; medium resumes with no edit of its own.
	w.write("high.yaml", strings.Replace(highDoc, "state: Running", "state: Stopped", 1))
	st = w.until("high Stopped, medium Running", 2*time.Second, func(st view.Status) bool {
		return state(st, high) == view.StateStopped && state(st, medium) == view.StateRunning
	})
	if st.Revision == nil || st.Attempted != nil {
		t.Errorf("revision %+v attempted %+v", st.Revision, st.Attempted)
	}

	var d view.WorkspaceDetail
	w.get("/api/v1/workspaces/medium-priority-project/medium-training", &d)
	var path []string
	var atPreempt, atResume time.Duration
	for _, tr := range d.History {
		path = append(path, string(tr.From)+"→"+string(tr.To))
		if tr.To == view.StatePreempting {
			atPreempt = tr.Progress.D()
		}
		if tr.From == view.StateStarting && tr.To == view.StateRunning {
			atResume = tr.Progress.D()
		}
	}
	want := []string{"→Starting", "Starting→Running", "Running→Preempting", "Preempting→Preempted", "Preempted→Starting", "Starting→Running"}
	if diff := cmp.Diff(want, path); diff != "" {
		t.Fatalf("medium's history (-want +got):\n%s", diff)
	}
	// Its grace (30s) covers the checkpoint (10s): it resumes from where
	// it was preempted, having lost nothing.
	if atPreempt < 25*time.Minute || atResume < atPreempt || atResume > atPreempt+time.Minute {
		t.Errorf("progress %s at preemption, %s at resume; want resume from the checkpoint at preemption", atPreempt, atResume)
	}
	if d.Workspace.WorkLost != 0 {
		t.Errorf("work lost %s, want 0", d.Workspace.WorkLost)
	}
	if got := cluster.Stats(); got.GPUSecondsLost != 0 || got.GPUSecondsDelivered < (45*time.Minute).Seconds() {
		t.Errorf("cluster delivered %v GPU-seconds and lost %v", got.GPUSecondsDelivered, got.GPUSecondsLost)
	}
	text := strings.Join(d.Explanation, " ")
	for _, s := range []string{"is running on gpu-node", "It was preempted by " + high, "resumed at"} {
		if !strings.Contains(text, s) {
			t.Errorf("explanation %q lacks %q", text, s)
		}
	}

	// 4. An invalid revision is refused with file:line; the last good one stays.
	good := st.Revision.ID
	w.write("broken.yaml", "apiVersion: berth.dev/v1\nkind: Project\nmetadata:\n  name: broken\nspec:\n  tier: hgih\n")
	bad := w.until("the broken revision refused", time.Second, func(st view.Status) bool { return st.Attempted != nil })
	if bad.Revision.ID != good || len(bad.Attempted.Errors) == 0 || !strings.HasPrefix(bad.Attempted.Errors[0], "broken.yaml:6:") {
		t.Errorf("in force %s (want %s), refused %+v: want errors at broken.yaml:6", bad.Revision.ID, good, bad.Attempted)
	}
	if state(bad, medium) != view.StateRunning {
		t.Errorf("medium %s under the last good revision", state(bad, medium))
	}

	// The other endpoints.
	resp, err := http.Get(w.server.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, s := range []string{`berth_preemptions_total{tier="medium"} 1`, `berth_revision_info{revision="` + st.Revision.ID + `",state="in_force"} 1`, "berth_reconcile_duration_seconds_count"} {
		if !strings.Contains(string(metrics), s) {
			t.Errorf("/metrics lacks %s", s)
		}
	}
	resp, err = http.Get(w.server.URL + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz: %v %v", resp.Status, err)
	}
	resp, _ = http.Get(w.server.URL + "/api/v1/workspaces/nope/nope")
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown workspace: %s, want 404", resp.Status)
	}
}
