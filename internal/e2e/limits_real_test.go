package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/berth-dev/berth/reconcile"
	"github.com/berth-dev/berth/source"
	"github.com/berth-dev/berth/view"
)

// Time limits and idle GPUs on a real Nomad (issue 38): a workspace that
// runs its maxRuntime, or whose GPUs stay idle for its idle rule's after,
// is stopped by berth with its checkpoint signal and grace, is Stopped
// with its end (never Failed), and is not started again until its spec
// changes.

// TestRealTimeLimitStopsWithCheckpoint: a workspace limited to 10 s of
// run, whose task saves its work on SIGTERM, is stopped within a cycle
// of its limit with its work saved, and stays stopped until its spec
// changes.
func TestRealTimeLimitStopsWithCheckpoint(t *testing.T) {
	r := newRealLoop(t)
	r.saved = filepath.Join(t.TempDir(), "saved")
	r.write("tiers.yaml", realTiers)
	script := fmt.Sprintf("trap 'sleep 1; echo saved >> %s; exit 0' TERM; sleep 3600 & wait", r.saved)
	limit := 10 * time.Second
	spec := realWorkspace("limited", 1, script) + "  maxRuntime: " + limit.String() + "\n"
	r.write("limited.yaml", spec)
	r.until(30*time.Second, "limited runs", r.running("limited"))
	// Its run as Nomad counts it: from the allocation's start.
	var started time.Time
	snap, err := r.d.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range snap.Allocs {
		if a.Workspace == r.ref("limited") {
			started = a.StartedAt
		}
	}
	if started.IsZero() {
		t.Fatal("no running allocation of limited")
	}
	// Cycles a second apart, as the loop's interval would be at its
	// shortest; the stop must come within one of the limit.
	var stopAt time.Time
	r.until(limit+20*time.Second, "limited is stopped at its limit", func() bool {
		st := r.state("limited")
		if st.State == view.StateFailed {
			t.Fatalf("limited is Failed (%s): a time limit is no failure", st.Reason)
		}
		if st.State == view.StateStopped && stopAt.IsZero() {
			stopAt = time.Now()
		}
		return !stopAt.IsZero()
	})
	if over := stopAt.Sub(started) - limit; over > 3*time.Second {
		t.Errorf("stopped %s after its limit of %s; want within one cycle", over.Round(time.Millisecond), limit)
	}
	st := r.state("limited")
	if st.ReasonKind != "time-limit" || !strings.HasPrefix(st.Reason, "time limit: ran ") {
		t.Errorf("limited is %s (%s) %q; want Stopped at its time limit", st.State, st.ReasonKind, st.Reason)
	}
	// The task saves its work a second after SIGTERM, inside its grace
	// of 2 s: its file says so once Nomad has let it.
	r.until(20*time.Second, "limited checkpoints as it stops", func() bool {
		b, _ := os.ReadFile(r.saved)
		return strings.Contains(string(b), "saved")
	})
	if st := r.state("limited"); st.LastEnd == nil || st.LastEnd.Class != "time-limit" {
		t.Errorf("last end %+v; want the time limit's", st.LastEnd)
	}
	// It stays stopped, cycle after cycle.
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(300 * time.Millisecond) {
		res, _ := r.loop.Once(ctx)
		for _, a := range res.Applied {
			if a.Kind == drivers.ActionStart {
				t.Fatalf("limited started again without a spec change: %+v", a)
			}
		}
	}
	if st := r.state("limited"); st.State != view.StateStopped {
		t.Errorf("limited is %s (%s) after its limit; want Stopped", st.State, st.Reason)
	}
	// A changed spec (a longer limit is no change to what the task sees:
	// change the task) runs it again, its clock started again.
	r.write("limited.yaml", strings.Replace(spec, "sleep 3600", "sleep 3601", 1))
	r.until(30*time.Second, "limited runs again after its spec changed", r.running("limited"))
}

// TestRealIdleNotebookStopped: with an idle rule of 9 s under 5%, a
// notebook whose GPU reads 0% is stopped with its checkpoint grace once
// its readings have been idle that long, Stopped with the idle end and
// not started again; a busy one (85%) runs on. Readings every 3 s.
func TestRealIdleNotebookStopped(t *testing.T) {
	kit := realnomad.KitDir(t)
	r := newRealLoop(t)
	r.d = useDriver(t, "")
	l, err := reconcile.New(reconcile.Config{Source: source.DirSource{Dir: r.dir}, Cluster: r.d, Store: r.d})
	if err != nil {
		t.Fatal(err)
	}
	r.loop = l
	snap, err := r.d.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range snap.Nodes {
		for _, g := range n.GPUs {
			if g.Model == "H100-fake" {
				setUse(t, kit, n.Name, g.ID, 0)
			}
		}
	}
	r.d.StartSampling(ctx)
	r.saved = filepath.Join(t.TempDir(), "saved")
	r.write("tiers.yaml", realTiers)
	idle := "  idle: {after: 9s, below: 5}\n"
	r.write("notebook.yaml", realWorkspace("notebook", 1, fmt.Sprintf("trap 'sleep 1; echo saved >> %s; exit 0' TERM; sleep 3600 & wait", r.saved))+idle)
	r.write("busy.yaml", realWorkspace("busy", 1, "sleep 3600")+idle)
	r.until(30*time.Second, "both run", r.running("notebook", "busy"))
	busy := r.state("busy")
	setUse(t, kit, busy.Node, busy.GPUs[0], 85)
	began := time.Now()
	r.until(60*time.Second, "the notebook is stopped idle", func() bool {
		if st := r.state("busy"); st.State != view.StateRunning {
			t.Fatalf("busy is %s (%s); a busy workspace runs on", st.State, st.Reason)
		}
		return r.state("notebook").State == view.StateStopped
	})
	took := time.Since(began)
	st := r.state("notebook")
	if st.ReasonKind != "idle" || !strings.HasPrefix(st.Reason, "idle: every GPU under 5%") || st.LastEnd == nil || st.LastEnd.Class != "idle" {
		t.Errorf("notebook is %s (%s) %q, end %+v; want Stopped idle", st.State, st.ReasonKind, st.Reason, st.LastEnd)
	}
	if took < 9*time.Second {
		t.Errorf("stopped %s after it ran, idle; want at least its after (9s)", took.Round(time.Millisecond))
	}
	r.until(20*time.Second, "the notebook checkpoints as it stops", func() bool {
		b, _ := os.ReadFile(r.saved)
		return strings.Contains(string(b), "saved")
	})
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(300 * time.Millisecond) {
		res, _ := r.loop.Once(ctx)
		for _, a := range res.Applied {
			if a.Kind == drivers.ActionStart && a.Workspace == r.ref("notebook") {
				t.Fatalf("the notebook started again without a spec change: %+v", a)
			}
		}
	}
	if st := r.state("busy"); st.State != view.StateRunning {
		t.Errorf("busy is %s (%s); want Running", st.State, st.Reason)
	}
	realnomad.Report(t, "idle rule (after 9s, readings every %s): the notebook (0%% from its start) stopped %.1fs after both ran; the busy one (85%%) ran on", useInterval, took.Seconds())
}
