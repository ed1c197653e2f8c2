package policies

// Rule: backfill by predicted run time (an experiment, off unless
// Input.Backfill). The GPUs held for a waiting gang or the starvation
// guard's pick (the reservation) stay idle until enough others free up.
// A later workspace whose predicted run time (its 90th percentile, see
// Predict) ends before the holder is likely to have room (the shadow
// time: running work ending at its predicted median, GPUs counted, not
// topology) may start on free and held GPUs together, as EASY
// backfilling does; the holder then holds what is left, and more as it
// frees. Nothing with an unknown run time backfills, and no preemption
// is tried on held GPUs. `berth simulate --policies berth,berth-backfill`
// measures it.

import (
	"math"
	"slices"
	"time"

	"github.com/berth-dev/berth/drivers"
)

// backfillShadow returns when the reservation's holder h is likely to
// have room: the free GPUs of its model plus those running workspaces
// release, each at its predicted median remaining time (leaving ones at
// once), until there are as many as it needs; MaxInt64 when that is
// unknown. Cached for the decision's holder.
func (d *decider) backfillShadow(h int32) time.Duration {
	if d.shadowOf == h+1 {
		return d.shadow
	}
	hw := d.ws[h]
	need := hw.gpus * hw.replicas
	mi := d.c.modelIndex(hw.model)
	have := 0
	if mi >= 0 {
		have = d.c.totalFree[mi] + len(d.reserved)
	}
	type rel struct {
		at   time.Duration
		gpus int
	}
	var rels []rel
	var cache PredictCache
	for _, w := range d.ws {
		if w.held == 0 || w.victim {
			continue
		}
		if w.leaving {
			rels = append(rels, rel{0, w.held})
			continue
		}
		if w.spec == nil {
			continue
		}
		r := cache.Predict(d.in.History, w.spec)
		if !r.Known() {
			continue // holds its GPUs as far as anyone knows
		}
		var progress time.Duration
		for _, a := range w.allocs {
			progress = max(progress, a.Progress)
		}
		elapsed := progress
		if elapsed <= 0 {
			elapsed = d.now.Sub(w.startedAt)
		}
		rels = append(rels, rel{r.Remaining(elapsed, 0.5), w.held})
	}
	slices.SortFunc(rels, func(a, b rel) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return 0
	})
	d.shadowOf, d.shadow = h+1, time.Duration(math.MaxInt64)
	if have >= need {
		d.shadow = 0
		return 0
	}
	for _, r := range rels {
		have += r.gpus
		if have >= need {
			d.shadow = r.at
			break
		}
	}
	return d.shadow
}

// backfill starts w on free and reserved GPUs when it is predicted to
// end before the reservation's holder is likely to have room, and
// reserves again for the holder what is left; it reports whether w
// started. Without Input.Backfill, a reservation, a prediction, or room
// in free and held GPUs together, it changes nothing.
func (d *decider) backfill(w *wsState, mi int) bool {
	if !d.in.Backfill || d.reservedBy < 0 || d.reservedBy == w.idx || !d.fitsWithoutReservation(w, mi) {
		return false
	}
	r := d.pred90(w)
	if r <= 0 || r >= d.backfillShadow(d.reservedBy) {
		return false
	}
	// Release the reservation, place every replica on free GPUs, and
	// reserve again for the holder.
	h := d.reservedBy
	as := "head of the queue"
	if d.guardMsg != "" {
		as = "the longest-starved workspace (aging at its maximum)"
	}
	for _, si := range d.reserved {
		d.changeSlot(si, ownerFree, false, false)
	}
	d.reserved, d.reservedBy = nil, -1
	d.ws[h].out.Holding = nil
	d.gen++
	d.memoGen++
	d.journal = d.journal[:0]
	pls := make([]drivers.Placement, 0, w.replicas)
	ok := true
	for rep := 0; rep < w.replicas; rep++ {
		pl, found := d.placeFree(w.idx, w, mi, rep)
		if !found {
			ok = false
			break
		}
		pls = append(pls, pl)
	}
	if !ok {
		d.rollback()
	}
	d.journal = d.journal[:0]
	hw := d.ws[h]
	d.reserve(h, hw, d.c.modelIndex(hw.model), as)
	if !ok {
		return false
	}
	p := d.projs[w.proj]
	d.admitted++
	d.gen++
	w.out.Borrowed = !d.inQuota(p, w)
	p.held += w.gpus * w.replicas
	w.out.Verdict = VerdictStart
	w.out.Placements = pls
	w.out.Reason = Reason{ReasonNone, "starts on GPUs held for " + hw.ref.String() + ": predicted to end before it can start"}
	return true
}

// pred90 is w's predicted 90th-percentile run time; 0 when unknown.
func (d *decider) pred90(w *wsState) time.Duration {
	if w.spec == nil {
		return 0
	}
	return d.predCache.Predict(d.in.History, w.spec).Quantile(0.9)
}
