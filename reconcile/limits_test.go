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

// TestIdleStopsAfterItsRule: a workspace whose GPUs read busy runs on;
// once every GPU reads idle for its rule's after, it is stopped with its
// checkpoint grace, Stopped with the idle end, and not started again;
// a rule that only reports says so once, as a transition, and it runs on.
func TestIdleStopsAfterItsRule(t *testing.T) {
	for _, action := range []schema.IdleAction{schema.IdleStop, schema.IdleReport} {
		t.Run(string(action), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h, ref, _ := newEditedHarness(t, func(w *schema.Workspace) {
					w.Spec.Idle = schema.IdleRule{After: 10 * time.Minute, Below: 5, Action: action}
				})
				cycle := func(n int) {
					for range n {
						h.sleep(time.Minute)
						h.loop.Once(t.Context())
					}
				}
				if err := h.cluster.SetUse(ref, 85); err != nil {
					t.Fatal(err)
				}
				cycle(20)
				if st := h.status(t, ref); st.State != view.StateRunning {
					t.Fatalf("busy: %s (%s); want Running", st.State, st.Reason)
				}
				if err := h.cluster.SetUse(ref, 2); err != nil {
					t.Fatal(err)
				}
				cycle(9)
				if st := h.status(t, ref); st.State != view.StateRunning {
					t.Fatalf("idle 9m of its 10m: %s (%s); want Running", st.State, st.Reason)
				}
				applied := len(h.cluster.Applied())
				cycle(3)
				st := h.status(t, ref)
				detail, _ := h.loop.Workspace(ref)
				if action == schema.IdleReport {
					told := 0
					for _, tr := range detail.History {
						if tr.From == view.StateRunning && tr.To == view.StateRunning && strings.HasPrefix(tr.Reason, "idle:") {
							told++
						}
					}
					cycle(5)
					if st.State != view.StateRunning || told != 1 || len(h.cluster.Applied()) != applied {
						t.Errorf("report: %s, told %d times, %d actions; want Running, told once, no action", st.State, told, len(h.cluster.Applied())-applied)
					}
					return
				}
				if st.State != view.StateStopped || st.ReasonKind != "idle" || st.LastEnd == nil || st.LastEnd.Class != "idle" {
					t.Fatalf("idle 12m of its 10m: %s (%s) %q, end %+v; want Stopped idle", st.State, st.ReasonKind, st.Reason, st.LastEnd)
				}
				if last := h.cluster.Applied()[len(h.cluster.Applied())-1]; last.Kind != drivers.ActionStop || !strings.HasPrefix(last.Reason, "idle: every GPU under 5%") {
					t.Errorf("last action %+v; want a stop for idle GPUs", last)
				}
				stopped := len(h.cluster.Applied())
				cycle(10)
				if st := h.status(t, ref); st.State != view.StateStopped || len(h.cluster.Applied()) != stopped {
					t.Errorf("after: %s (%s), %d more actions; want Stopped, none", st.State, st.Reason, len(h.cluster.Applied())-stopped)
				}
			})
		})
	}
}
