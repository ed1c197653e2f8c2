package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/view"
)

// Time limits on a real Nomad (issue 38): a workspace that runs its
// maxRuntime is stopped by berth within a cycle of the limit, with its
// checkpoint signal and grace, is Stopped at its time limit (never
// Failed), and is not started again; a spec change runs it again.

// TestRealTimeLimitStopsWithCheckpoint: a workspace limited to 15 s of
// run, whose task saves its work on SIGTERM, is stopped within a cycle
// of its limit with its work saved, and stays stopped until its spec
// changes.
func TestRealTimeLimitStopsWithCheckpoint(t *testing.T) {
	r := newRealLoop(t)
	r.saved = filepath.Join(t.TempDir(), "saved")
	r.write("tiers.yaml", realTiers)
	script := fmt.Sprintf("trap 'sleep 1; echo saved >> %s; exit 0' TERM; sleep 3600 & wait", r.saved)
	limit := 15 * time.Second
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
