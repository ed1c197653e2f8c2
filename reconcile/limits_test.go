package reconcile

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
)

// TestTimeLimitStopsOnce: a workspace that runs its maxRuntime is
// stopped within a cycle of the limit, with its checkpoint grace (a
// stop), is Stopped with the time limit's reason and end (never Failed),
// and does not start again, cycle after cycle.
func TestTimeLimitStopsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		limit := 10 * time.Minute
		h, ref, _ := newEditedHarness(t, func(w *schema.Workspace) { w.Spec.MaxRuntime = &limit })
		started := h.status(t, ref).Since
		for range 9 {
			h.sleep(time.Minute)
			h.loop.Once(t.Context())
			if st := h.status(t, ref); st.State != view.StateRunning {
				t.Fatalf("at %s: %s (%s); want Running inside its limit", h.clock.Now().Sub(started), st.State, st.Reason)
			}
		}
		var stoppedAt time.Time
		for range 3 {
			h.sleep(time.Minute)
			h.loop.Once(t.Context())
			if st := h.status(t, ref); st.State == view.StateStopped {
				stoppedAt = h.clock.Now()
				break
			}
		}
		if stoppedAt.IsZero() {
			t.Fatalf("still %s after %s; want Stopped at its limit of %s", h.status(t, ref).State, h.clock.Now().Sub(started), limit)
		}
		if over := stoppedAt.Sub(started) - limit; over > time.Minute+sim30s {
			t.Errorf("stopped %s after its limit; want within one cycle", over)
		}
		applied := h.cluster.Applied()
		if last := applied[len(applied)-1]; last.Kind != drivers.ActionStop || last.Workspace != ref || !strings.HasPrefix(last.Reason, "time limit: ran ") {
			t.Fatalf("last action %+v; want a stop of %s at its time limit", last, ref)
		}
		for range 5 {
			h.sleep(time.Minute)
			h.loop.Once(t.Context())
		}
		st := h.status(t, ref)
		if st.State != view.StateStopped || st.ReasonKind != "time-limit" || !strings.Contains(st.Reason, "its own maxRuntime of 10m") {
			t.Errorf("after: %s (%s) %q; want Stopped at its time limit", st.State, st.ReasonKind, st.Reason)
		}
		if st.LastEnd == nil || st.LastEnd.Class != "time-limit" {
			t.Errorf("last end %+v; want the time limit's", st.LastEnd)
		}
		if n := len(h.cluster.Applied()); n != len(applied) {
			t.Errorf("%d actions after the stop (%+v); want none: it does not start again", n-len(applied), h.cluster.Applied()[len(applied):])
		}
		detail, _ := h.loop.Workspace(ref)
		for _, tr := range detail.History {
			if tr.To == view.StateFailed {
				t.Errorf("a time limit is no failure: %+v", detail.History)
			}
		}
	})
}

// sim30s is the slack of a stop: the sim's checkpoint grace.
const sim30s = 30 * time.Second
