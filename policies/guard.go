package policies

// Rule: the starvation guard and the wait bound. Before the queue runs it
// picks one workspace to reserve free GPUs for: the oldest overdue one
// (waiting past Aging.MaxWait), else the longest-waiting workspace at
// maximum aging that smaller arrivals could starve. Its reservation is
// made just before the first workspace that does not outrank it
// (boundBy).
//
// Scenarios: testdata/guard/.

import (
	"fmt"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/internal/text"
)

// boundBy reports whether w comes no earlier in the queue than the
// guard's pick g may let it: for an overdue g, what overdueBinds says
// (the wait bound; the rest, coming later, see through the reservation:
// passes); else w borrows while g fits in its quota, or both are alike
// and w's tier is not higher.
func (d *decider) boundBy(w, g *wsState) bool {
	if d.guardOverdue {
		return d.overdueBinds(w, g)
	}
	wq := d.inQuota(d.projs[w.proj], w)
	gq := d.inQuota(d.projs[g.proj], g)
	if wq != gq {
		return gq
	}
	return w.tier <= g.tier
}

// overdueBinds reports whether the overdue workspace g goes before w:
// w is of g's tier or lower, and borrowing (it does not fit inside what
// its project's quota has left), or of g's own project while g fits
// inside the quota too. Another team's work inside its quota is
// guaranteed whatever g waits for: it starts ahead of g and reclaims as
// it may. Its own team's, when g borrows, takes what the quota has
// left, which g could not use: held back, the quota would idle while
// other teams borrow. So an overdue workspace's bound is over its
// team's quota when it fits there, else over the borrowable capacity.
func (d *decider) overdueBinds(w, g *wsState) bool {
	if w.tier > g.tier {
		return false
	}
	if w.proj < 0 || !d.inQuota(d.projs[w.proj], w) {
		return true
	}
	return w.proj == g.proj && d.inQuota(d.projs[g.proj], g)
}

// passes reports whether w, about to have its turn, is work the overdue
// workspace whose reservation the guard holds does not bind
// (overdueBinds: a higher tier, or another team's work inside its
// quota), so the reservation is lifted for w's turn (liftGuard) and what
// w leaves of it put back after (restoreGuard).
func (d *decider) passes(w *wsState) bool {
	return d.guardOverdue && d.guardIdx >= 0 && d.reservedBy == d.guardIdx && w.idx != d.guardIdx && !d.overdueBinds(w, d.ws[d.guardIdx])
}

// liftGuard frees the guard's reserved GPUs and returns them.
func (d *decider) liftGuard() []int32 {
	held := d.reserved
	for _, si := range held {
		d.changeSlot(si, ownerFree, false, false)
	}
	d.reserved = nil
	d.gen++
	d.memoGen++ // more free GPUs: memoized failures may now start
	return held
}

// restoreGuard reserves again those of held still free, for the guard.
func (d *decider) restoreGuard(held []int32) {
	var kept []int32
	for _, si := range held {
		if d.c.slots[si].owner == ownerFree {
			d.changeSlot(si, ownerReserved, false, false)
			kept = append(kept, si)
		}
	}
	d.gen++
	g := d.ws[d.guardIdx]
	if len(kept) == len(held) {
		d.reserved = held
		return
	}
	d.reserved = kept
	if len(kept) == 0 {
		d.reservedBy = -1
		g.out.Holding = nil
		return
	}
	// Its holding, less what the higher tier took.
	var holding []drivers.Placement
	for _, pl := range g.out.Holding {
		ni := int32(d.c.nodeIndex(pl.Node))
		var ids []string
		for _, id := range pl.GPUs {
			for _, si := range kept {
				if s := &d.c.slots[si]; s.id == id && s.node == ni {
					ids = append(ids, id)
				}
			}
		}
		if len(ids) > 0 {
			pl.GPUs = ids
			holding = append(holding, pl)
		}
	}
	g.out.Holding = holding
}

// guardAs names the guard's pick in its reservation's message.
func (d *decider) guardAs() string {
	if d.guardOverdue {
		return fmt.Sprintf("the oldest overdue workspace (waiting past aging.maxWait, %s)", text.Duration(d.policy.Aging.MaxWait))
	}
	return "the longest-starved workspace (aging at its maximum)"
}

// starved picks, before the queue runs, the workspace the starvation
// guard reserves the best free GPUs for, among those that need GPUs, fit
// some node's level they may use, whose project's limits would let them
// run, and that no waiting preemptor holds back (preemptorWaits: GPUs
// held for one would idle):
//
//   - the overdue workspace that queued first (then the highest tier, then
//     Ref), whatever its size and quota: the wait bound;
//   - else, of those whose aging boost is at its maximum and that need
//     more GPUs than the smallest workspace waiting in their tier (only
//     those can be starved by smaller arrivals taking GPUs one by one),
//     the highest tier, then the longest waiting, then Ref.
func (d *decider) starved() int32 {
	ag := d.policy.Aging
	d.guardOverdue = false
	aging := ag.Interval > 0 && ag.Step > 0 && ag.MaxBoost > 0
	if !aging && ag.MaxWait <= 0 {
		return -1
	}
	minNeed := map[int]int{}
	if aging {
		for _, p := range d.projs {
			for _, wi := range p.queue {
				w := d.ws[wi]
				if n, ok := minNeed[w.tier]; !ok || w.gpus*w.replicas < n {
					minNeed[w.tier] = w.gpus * w.replicas
				}
			}
		}
	}
	var best *wsState
	bestIdx, bestOverdue := int32(-1), false
	for _, p := range d.projs {
		for _, wi := range p.queue {
			w := d.ws[wi]
			need := w.gpus * w.replicas
			if w.gpus <= 0 || (!w.overdue && (bestOverdue || !aging || w.boost < ag.MaxBoost || need <= minNeed[w.tier])) {
				continue
			}
			if best != nil {
				if w.overdue {
					// The first queued, then the highest tier.
					if bestOverdue && (w.queuedSince.After(best.queuedSince) || (w.queuedSince.Equal(best.queuedSince) && (w.tier < best.tier || (w.tier == best.tier && !w.ref.Less(best.ref))))) {
						continue
					}
				} else if w.tier < best.tier || (w.tier == best.tier && (w.queuedSince.After(best.queuedSince) || (w.queuedSince.Equal(best.queuedSince) && !w.ref.Less(best.ref)))) {
					continue
				}
			}
			if _, over := d.overLimit(p, w); over {
				continue
			}
			if d.preemptorWaits(w) >= 0 {
				continue // it resumes after its preemptor: GPUs held for it would idle
			}
			mi := d.modelIndexOf(w)
			if mi < 0 || d.c.index[mi][w.levels[len(w.levels)-1]].maxK < w.gpus {
				continue
			}
			best, bestIdx, bestOverdue = w, wi, w.overdue
		}
	}
	d.guardOverdue = bestOverdue
	return bestIdx
}
