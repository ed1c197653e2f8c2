package replay

import (
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/policies"
)

// The replay's history step keeps what the loop's keeps for a running
// workspace: the quota label its admission gave it (History.Borrowing).
// Every decision berth makes in the sample is handed, for each job
// running, the label that the loop's own record (policies.RecordDecision,
// folded over the decisions before it) would hand it; the replay decides
// on narrowed queues, the record is the loop's.
func TestReplayKeepsTheLoopsLabels(t *testing.T) {
	if testing.Short() {
		t.Skip("replays the sample")
	}
	wl, spec, m := sampleWorkload(t, 1)
	berth, _ := PolicyByName("berth")
	var (
		loop              drivers.History     // the loop's record of the decisions before now
		pending           []policies.Decision // the decisions at now, recorded once time moves
		now               time.Time
		checked, labelled int
		failed            bool // the first difference is reported (Decide runs on Run's goroutine)
	)
	decide := berth.Decide
	berth.Decide = func(in policies.Input) policies.Decision {
		if in.Now.After(now) {
			for _, d := range pending {
				loop = policies.RecordDecision(loop, nil, d)
			}
			pending, now = pending[:0], in.Now
			for _, a := range in.Snapshot.Allocs {
				if a.Phase == drivers.AllocStopping {
					continue
				}
				got, gotOK := in.History.Borrowing[a.Workspace]
				want, wantOK := loop.Borrowing[a.Workspace]
				if (got != want || gotOK != wantOK) && !failed {
					failed = true
					t.Errorf("%s: %s runs labelled borrowing=%t (recorded %t), the loop's record says borrowing=%t (recorded %t)",
						in.Now.Format(time.RFC3339), a.Workspace, got, gotOK, want, wantOK)
				}
				checked++
				if got {
					labelled++
				}
			}
		}
		d := decide(in)
		pending = append(pending, d)
		return d
	}
	if _, err := Run(wl, *spec, m, []Policy{berth}, Options{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d running allocations checked, %d of them borrowing", checked, labelled)
	if checked == 0 || labelled == 0 {
		t.Fatalf("%d running allocations checked, %d borrowing: want some of each", checked, labelled)
	}
}
