package replay

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"
)

// TestMaxRuntime: with a time limit of 1h on every job, under every
// policy, a2 (2h) is stopped at its limit (it ran 1h, counted over its
// runs: b's preemption of it does not reset the clock), the short b
// completes, and the report says how many were stopped and the work they
// did not get to; without a limit, all complete.
func TestMaxRuntime(t *testing.T) {
	m := DefaultMapping()
	m.Quotas = map[string]int{"a": 4, "b": 4}
	m.MaxRuntime = 0
	for _, p := range replayText(t, handTrace, oneNode, m).Policies {
		if p.Completed != 3 || p.LimitStopped != 0 {
			t.Errorf("no limit: %s completed %d, stopped %d at a limit; want 3, 0", p.Name, p.Completed, p.LimitStopped)
		}
	}
	m.MaxRuntime = time.Hour
	rep := replayText(t, handTrace, oneNode, m)
	for _, p := range rep.Policies {
		// a1 and a2 run 2h each: both stop at 1h of run; b runs 10m.
		if p.Completed != 1 || p.LimitStopped != 2 || p.Unfinished != 0 {
			t.Errorf("%s: completed %d, stopped at the limit %d, unfinished %d; want 1, 2, 0", p.Name, p.Completed, p.LimitStopped, p.Unfinished)
		}
		// Each ran an hour of its 2h: 4 GPUs × 1h undone each.
		if math.Abs(p.LimitWorkHours-8) > 1e-9 {
			t.Errorf("%s: %.4f GPU-hours undone, want 8", p.Name, p.LimitWorkHours)
		}
	}
	var b bytes.Buffer
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "stopped at time limit") {
		t.Errorf("the report does not say what stopped at the limit:\n%s", b.String())
	}
}
