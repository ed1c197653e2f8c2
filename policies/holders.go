package policies

// Phase 1, holders: a workspace that holds allocations keeps running,
// keeps stopping, or is stopped; what leaves releases its GPUs.

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/berth-dev/berth/drivers"
)

// settleHolders gives every workspace that holds GPUs, or is not wanted,
// its verdict.
func (d *decider) settleHolders() {
	// Every holder's placements, cut from arrays sized for them all.
	var buf placementBuf
	allocs, gpus := 0, 0
	for _, w := range d.ws {
		allocs += len(w.allocs)
		gpus += w.held // every GPU its allocations list
	}
	buf.pls = make([]drivers.Placement, 0, allocs)
	buf.gpus = make([]string, 0, gpus)
	for _, w := range d.ws {
		switch {
		case w.spec == nil:
			w.out.Verdict = VerdictStop
			w.out.Placements = buf.placementsOf(w.allocs)
			w.out.Reason = Reason{ReasonStopped, "removed: the specs no longer list it"}
		case w.stopped:
			w.out.Verdict = VerdictStop
			w.out.Placements = buf.placementsOf(w.allocs)
			w.out.Reason = Reason{ReasonStopped, "stopped: its desired state is Stopped"}
		case w.stopping:
			w.out.Verdict = VerdictPreempt
			w.out.Placements = buf.placementsOf(w.allocs)
			if w.preempted != nil {
				by := w.preempted.By
				w.out.PreemptedBy = &by
				w.out.Reason = Reason{ReasonPreempted, fmt.Sprintf("preempted by %s at %s; stopping", by, stamp(w.preempted.At))}
			} else {
				w.out.Reason = Reason{ReasonPreempted, "stopping; it queues again once its GPUs are free"}
			}
		case w.running:
			w.out.Verdict = VerdictRun
			w.out.Placements = buf.placementsOf(w.allocs)
			w.out.Borrowed = w.overQuota
		}
	}
}

// PlacementsOf turns allocations into placements, sorted by replica, with
// each placement's GPUs sorted; it copies and never mutates allocs. Nil
// for no allocations.
func PlacementsOf(allocs []*drivers.Alloc) []drivers.Placement {
	var b placementBuf
	return b.placementsOf(allocs)
}

// placementBuf carves the placements of many workspaces, and their GPU
// lists, out of two shared arrays: one allocation each instead of one
// per workspace and one per placement. Each slice cut from them is
// capped at its length, so appending to one never reaches another.
type placementBuf struct {
	pls  []drivers.Placement
	gpus []string
}

func (b *placementBuf) placementsOf(allocs []*drivers.Alloc) []drivers.Placement {
	if len(allocs) == 0 {
		return nil
	}
	if cap(b.pls)-len(b.pls) < len(allocs) {
		b.pls = make([]drivers.Placement, 0, max(len(allocs), 64))
	}
	start := len(b.pls)
	for _, a := range allocs {
		var gpus []string // nil for none, as append([]string(nil)) gives
		if len(a.GPUs) > 0 {
			if cap(b.gpus)-len(b.gpus) < len(a.GPUs) {
				b.gpus = make([]string, 0, max(len(a.GPUs), 256))
			}
			n := len(b.gpus)
			b.gpus = append(b.gpus, a.GPUs...)
			gpus = b.gpus[n:len(b.gpus):len(b.gpus)]
			if !slices.IsSorted(gpus) {
				slices.Sort(gpus)
			}
		}
		b.pls = append(b.pls, drivers.Placement{Replica: a.Replica, Node: a.Node, GPUs: gpus})
	}
	out := b.pls[start:len(b.pls):len(b.pls)]
	if len(out) > 1 {
		sort.Slice(out, func(i, j int) bool { return out[i].Replica < out[j].Replica })
	}
	return out
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
