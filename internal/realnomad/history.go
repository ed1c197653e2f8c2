package realnomad

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
)

// SampleHistory returns the history of n workspaces over n/50+1 projects
// as a loop leaves it: every workspace queued or running (half of the
// running ones borrowing), one in ten preempted, times to the
// nanosecond. The same n and seed give the same history; each call
// returns a new value the caller owns. The driver's store tests over the
// fake Nomad and internal/e2e's over a real one save and load it.
func SampleHistory(n int, seed uint64) drivers.History {
	r := rand.New(rand.NewPCG(seed, 1))
	at := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	h := drivers.History{
		AppliedRevision: "3f2a9c1e0b7d4a5f8e6c2b1a0d9e8f7c6b5a4d3e", AppliedAt: at, UsageAt: at,
		Usage:       map[string]float64{},
		QueuedSince: map[schema.Ref]time.Time{},
		Preempted:   map[schema.Ref]drivers.Preemption{},
		Borrowing:   map[schema.Ref]bool{},
		RunTimes:    map[string][]time.Duration{},
	}
	for i := range n {
		project := fmt.Sprintf("team-%03d", i/50)
		if i%50 == 0 { // each project's run times: all, and one owner's of one size
			for _, k := range []string{project, project + "/ada/8"} {
				for range 32 {
					h.RunTimes[k] = append(h.RunTimes[k], time.Duration(r.Int64N(int64(72*time.Hour))))
				}
			}
		}
		ref := schema.Ref{Project: project, Name: fmt.Sprintf("train-%05d", i)}
		h.Usage[project] += r.Float64() * 3600
		since := at.Add(-time.Duration(r.Int64N(int64(48 * time.Hour))))
		switch {
		case i%10 == 0:
			by := schema.Ref{Project: "team-000", Name: fmt.Sprintf("train-%05d", r.IntN(n))}
			h.QueuedSince[ref] = since
			h.Preempted[ref] = drivers.Preemption{Victim: ref, By: by, At: since, Reason: "tier high (80) preempts tier medium (50) on node-7 GPUs 0-3"}
		case i%2 == 0:
			h.QueuedSince[ref] = since
		default:
			h.Borrowing[ref] = i%4 == 1
		}
	}
	return h
}
