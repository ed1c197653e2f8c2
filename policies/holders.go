package policies

// Phase 1, holders: a workspace that holds allocations keeps running,
// keeps stopping, or is stopped; what leaves releases its GPUs.
//
// Scenarios: testdata/holders/.

import (
	"fmt"
	"time"
)

// settleHolders gives every workspace that holds GPUs, or is not wanted,
// its verdict.
func (d *decider) settleHolders() {
	// Every holder's placements, cut from arrays sized for them all.
	buf := d.in.Scratch.Placements()
	allocs, gpus := 0, 0
	for _, w := range d.ws {
		allocs += len(w.allocs)
		gpus += w.held // every GPU its allocations list
	}
	buf.Grow(allocs, gpus)
	for _, w := range d.ws {
		switch {
		case w.spec == nil:
			w.out.Verdict = VerdictStop
			w.out.Placements = buf.Of(w.allocs)
			w.out.Reason = Reason{ReasonStopped, "removed: the specs no longer list it"}
		case w.stopped:
			w.out.Verdict = VerdictStop
			w.out.Placements = buf.Of(w.allocs)
			w.out.Reason = Reason{ReasonStopped, "stopped: its desired state is Stopped"}
			if w.end != nil {
				w.out.Reason = *w.end
			}
		case w.fault != "":
			w.out.Verdict = VerdictPreempt
			w.out.Placements = buf.Of(w.allocs)
			w.out.Reason = Reason{ReasonMoving, w.fault}
		case w.moved:
			w.out.Verdict = VerdictStop
			w.out.Placements = buf.Of(w.allocs)
			w.out.Reason = Reason{ReasonStopped, fmt.Sprintf("moves: its placement (%s) no longer allows the node it runs on; it starts again where it may", d.feats[w.feat].placement)}
		case w.stopping:
			w.out.Verdict = VerdictPreempt
			w.out.Placements = buf.Of(w.allocs)
			if w.preempted != nil {
				by := w.preempted.By
				w.out.PreemptedBy = &by
				w.out.Reason = Reason{ReasonPreempted, fmt.Sprintf("preempted by %s at %s; stopping", by, stamp(w.preempted.At))}
			} else {
				w.out.Reason = Reason{ReasonPreempted, "stopping; it queues again once its GPUs are free"}
			}
		case w.running:
			w.out.Verdict = VerdictRun
			w.out.Placements = buf.Of(w.allocs)
			w.out.Borrowed = w.overQuota
			if w.idleNote != "" {
				w.out.Reason = Reason{ReasonIdle, w.idleNote}
			}
		}
	}
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
