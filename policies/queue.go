package policies

// Rule: the queue order (phase 2). One queue per project (tier, then
// attained-service queue, the least served first (service.go), then
// aging, then time queued), merged by a heap on the head's key: in-quota
// before borrowing (but a borrower whose tier borrows within the cohort
// goes before the in-quota work it may take: cohortBand), then tier,
// then attained-service queue, then fair share less the aging credit,
// then time queued, then Ref.
//
// Scenarios: testdata/queue/, and testdata/service/ for the
// attained-service queues.

import (
	"cmp"
	"container/heap"
	"fmt"
	"slices"
)

// queueKey is what orders a project in the queue: its head workspace
// and that workspace's queue key (see before).
type queueKey struct {
	w       *wsState
	inQuota bool
	// band orders heads before tier does (higher first): a head inside
	// its quota is in its tier's band; a borrower whose tier borrows
	// within the cohort is in the band just below the lowest tier it may
	// take (cohortBand), ahead of the in-quota work it could preempt;
	// any other borrower is in band 0, behind all in-quota work.
	band  int
	share float64 // the project's fair share less the head's aging credit
}

// inQuotaBand is the queue band of in-quota work of tier t (tier values
// are 1 to 100, 0 for none): above every other borrower's band (0), and
// the cohort's borrowers' bands between them.
func inQuotaBand(t int) int { return 2*t + 2 }

// cohortBand is the queue band of a borrower of w's tier when that tier
// borrows within the cohort: just above the in-quota work it may take
// (tiers below min(its threshold, its own tier)), just below the rest.
// The GPUs its preemptions free go to it, not back to its victims, which
// rank after it: else each would take the other's turn.
func cohortBand(w *wsState) int {
	if w.cohortBelow <= 0 || !w.canPreempt {
		return 0
	}
	return 2*min(w.cohortBelow, w.tier) + 1
}

// needBucket lists the queue positions of a project's workspaces that need
// the same number of GPUs, in queue order, so the first one that still
// fits inside the quota is found in a few steps.
type needBucket struct {
	need int
	pos  []int
	cur  int
}

// head returns the queue position the project offers next: the first
// workspace (in its queue order) that fits inside the project's remaining
// guaranteed quota, else its first workspace. A quota that names CPU or
// memory is checked in those too: within each bucket that fits the GPUs
// left, the first workspace that also fits the CPU and memory left
// (those skipped stay in the bucket: room comes back when a victim of the
// project is taken).
func (d *decider) head(p *projState) int {
	room := p.quota - p.held
	best := -1
	for i := range p.needs {
		b := &p.needs[i]
		if b.need > room {
			break
		}
		for b.cur < len(b.pos) && p.done[b.pos[b.cur]] {
			b.cur++
		}
		if !p.rquota.named() {
			if b.cur < len(b.pos) && (best < 0 || b.pos[b.cur] < best) {
				best = b.pos[b.cur]
			}
			continue
		}
		for _, pos := range b.pos[b.cur:] {
			if best >= 0 && pos > best {
				break
			}
			if !p.done[pos] && d.inQuota(p, d.ws[p.queue[pos]]) {
				best = pos
				break
			}
		}
	}
	if best >= 0 {
		return best
	}
	for p.next < len(p.queue) && p.done[p.next] {
		p.next++
	}
	return p.next
}

// projHeap orders projects by the queue key of their head workspace.
type projHeap struct {
	d     *decider
	items []int
}

func (h *projHeap) Len() int { return len(h.items) }

func (h *projHeap) Less(i, j int) bool {
	return h.d.before(h.items[i], h.items[j])
}

func (h *projHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.d.projs[h.items[i]].heapIdx = i
	h.d.projs[h.items[j]].heapIdx = j
}

func (h *projHeap) Push(x any) {
	pi := x.(int)
	h.d.projs[pi].heapIdx = len(h.items)
	h.items = append(h.items, pi)
}

func (h *projHeap) Pop() any {
	pi := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	h.d.projs[pi].heapIdx = -1
	return pi
}

// share is a project's fair-share load: decayed usage plus its held GPUs
// (in GPU-equivalents: a MIG instance is its slices of a GPU) at the
// usage they reach when held for good, per unit of weight.
func (d *decider) share(p *projState) float64 {
	return (p.usage + p.heldW*d.steady) / p.weight
}

// refreshKey recomputes project pi's queue key. The key reads only the
// project's own state (holdings, usage, decided positions), so Decide
// refreshes the projects whose state changed before the heap compares
// anything: the key then is what computing it at each comparison gave.
func (d *decider) refreshKey(pi int) {
	p := d.projs[pi]
	w := d.ws[p.queue[d.head(p)]]
	in := d.inQuota(p, w)
	band := cohortBand(w)
	if in {
		band = inQuotaBand(w.tier)
	}
	p.key = queueKey{w: w, inQuota: in, band: band, share: d.share(p) - float64(w.boost)*d.stepCredit}
}

// before reports whether project a's head comes before project b's, by
// their keys.
func (d *decider) before(a, b int) bool {
	ka, kb := &d.projs[a].key, &d.projs[b].key
	wa, wb := ka.w, kb.w
	if ka.band != kb.band {
		return ka.band > kb.band
	}
	if wa.tier != wb.tier {
		return wa.tier > wb.tier
	}
	if wa.band != wb.band {
		return wa.band < wb.band
	}
	if ka.share != kb.share {
		return ka.share < kb.share
	}
	if !wa.queuedSince.Equal(wb.queuedSince) {
		return wa.queuedSince.Before(wb.queuedSince)
	}
	return wa.ref.Less(wb.ref)
}

func (d *decider) buildQueue() *projHeap {
	h := &projHeap{d: d}
	queued := func(w *wsState) bool { return w.spec != nil && !w.stopped && len(w.allocs) == 0 && w.proj >= 0 }
	// Each project's queue, done flags and need buckets are cut from
	// arrays sized for every queued workspace.
	counts := zeroed(&d.bufs.counts, len(d.projs), len(d.projs))
	total := 0
	for _, w := range d.ws {
		if w.spec != nil && !w.stopped && len(w.allocs) == 0 && w.proj < 0 {
			w.out.Verdict = VerdictWait
			w.out.Reason = Reason{ReasonQuota, fmt.Sprintf("quota: project %s does not exist", w.ref.Project)}
		}
		if queued(w) {
			counts[w.proj]++
			total++
		}
	}
	queues, done := zeroed(&d.bufs.queues, total, total), zeroed(&d.bufs.done, total, total)
	positions := zeroed(&d.bufs.positions, total, total)
	bucketOf := zeroed(&d.bufs.bucketOf, total, total) // by queue position, its need bucket
	off := 0
	for pi, p := range d.projs {
		p.queue = queues[off : off : off+counts[pi]]
		off += counts[pi]
	}
	for wi, w := range d.ws {
		if queued(w) {
			p := d.projs[w.proj]
			p.queue = append(p.queue, int32(wi))
		}
	}
	off = 0
	for pi, p := range d.projs {
		if len(p.queue) == 0 {
			continue
		}
		// Refs are unique: no ties, so any sort gives this order.
		slices.SortFunc(p.queue, func(i, j int32) int {
			a, b := d.ws[i], d.ws[j]
			if a.tier != b.tier {
				return cmp.Compare(b.tier, a.tier)
			}
			if a.band != b.band {
				return cmp.Compare(a.band, b.band)
			}
			if a.boost != b.boost {
				return cmp.Compare(b.boost, a.boost)
			}
			if c := a.queuedSince.Compare(b.queuedSince); c != 0 {
				return c
			}
			return a.ref.Compare(b.ref)
		})
		n := len(p.queue)
		p.done = done[off : off+n : off+n]
		p.left = n
		// A project's queue asks for a few distinct needs: its buckets
		// are found by a scan, counted, then filled in queue order.
		bof := bucketOf[off : off+n]
		for pos, wi := range p.queue {
			w := d.ws[wi]
			need := w.gpus * w.replicas
			bi := 0
			for bi < len(p.needs) && p.needs[bi].need != need {
				bi++
			}
			if bi == len(p.needs) {
				p.needs = append(p.needs, needBucket{need: need})
			}
			p.needs[bi].cur++ // counts for now
			bof[pos] = int32(bi)
		}
		at := off
		for bi := range p.needs {
			b := &p.needs[bi]
			b.pos = positions[at : at : at+b.cur]
			at += b.cur
			b.cur = 0
		}
		for pos := range p.queue {
			b := &p.needs[bof[pos]]
			b.pos = append(b.pos, pos)
		}
		off += n
		slices.SortFunc(p.needs, func(a, b needBucket) int { return cmp.Compare(a.need, b.need) })
		h.items = append(h.items, pi)
		p.heapIdx = len(h.items) - 1
		d.refreshKey(pi)
	}
	heap.Init(h)
	return h
}
