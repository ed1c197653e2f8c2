package policies

// Machinery for victim choice: per model, level and preemptor tier, the
// GPUs a preemptor could get (free, releasing, held by lower-tier
// candidates), kept current as slots change owner; it bounds the
// preemption search.

import (
	"math/bits"
	"sort"
)

// markReleasing marks every GPU workspace wi holds as releasing.
func (d *decider) markReleasing(wi int32) {
	for _, si := range d.slotsOf(wi) {
		d.changeSlot(si, wi, true, false)
	}
}

// contrib is the set of avail indexes (bit k) slot si counts in.
func (d *decider) contrib(si int32) uint64 {
	all := uint64(1)<<(d.numTiers+1) - 1
	s := &d.c.slots[si]
	switch {
	case s.owner == ownerFree || (s.owner >= 0 && s.releasing):
		return all
	case s.owner == ownerReserved:
		return 0
	}
	w := d.ws[s.owner]
	if !w.candidate || w.victim {
		return 0
	}
	// Held by a candidate of rank r: counts for k > r.
	return all &^ (uint64(1)<<(w.rank+1) - 1)
}

// changeSlot sets slot si's owner and releasing flag, keeping the free
// and avail indexes current; record journals it for rollback.
func (d *decider) changeSlot(si, owner int32, releasing, record bool) {
	s := &d.c.slots[si]
	if record {
		d.journal = append(d.journal, undo{slot: si, owner: s.owner, releasing: s.releasing})
	}
	// The slot's models of which a search built some avail index.
	var built [numSets]bool
	anyBuilt := false
	for gk, m := range s.sets {
		if m < 0 {
			continue // in no model index of this set
		}
		for l := range numLevels {
			built[gk] = built[gk] || d.avail[m][l] != nil
		}
		anyBuilt = anyBuilt || built[gk]
	}
	var before uint64
	if anyBuilt {
		before = d.contrib(si)
	}
	if s.owner >= 0 && s.releasing {
		d.nReleasing--
	}
	d.c.setOwner(si, owner)
	s.releasing = releasing
	if owner >= 0 && releasing {
		d.nReleasing++
	}
	if !anyBuilt {
		return
	}
	after := d.contrib(si)
	if before == after {
		return
	}
	for k := 0; k <= d.numTiers; k++ {
		var delta int
		switch {
		case before&(1<<k) != 0 && after&(1<<k) == 0:
			delta = -1
		case before&(1<<k) == 0 && after&(1<<k) != 0:
			delta = 1
		default:
			continue
		}
		for gk, m := range s.sets {
			if !built[gk] {
				continue
			}
			for l := range numLevels {
				if d.avail[m][l] != nil {
					d.avail[m][l][k].add(int(s.groups[gk][l]), delta)
				}
			}
		}
	}
}

// availAt returns the avail indexes of model index m at level l,
// building them from the cluster as it is now the first time a search
// asks: until then nothing reads them, and from then on changeSlot keeps
// them current, so they are what building them all up front and keeping
// them current would have made (verify checks it against a recount).
func (d *decider) availAt(m, l int) []*countIndex {
	if d.avail[m][l] == nil {
		d.buildAvail(m, []int{l})
	}
	return d.avail[m][l]
}

// buildAvail builds the avail indexes of model index m at those of
// levels not built yet, reading each slot's contrib once for them all.
// Built earlier than availAt would have, they are the same: see there.
func (d *decider) buildAvail(m int, levels []int) {
	missing := false
	for _, l := range levels {
		missing = missing || d.avail[m][l] == nil
	}
	if !missing {
		return
	}
	// A slot's contrib is a suffix of the tiers: it counts for every k
	// from its threshold on (numTiers+1 and beyond: none). Each group's
	// count for k is the number of its slots with a threshold ≤ k.
	n := d.numTiers + 1
	thr := zeroed(&d.bufs.thr, len(d.c.slots), len(d.c.slots))
	for si := range d.c.slots {
		thr[si] = uint8(bits.TrailingZeros64(d.contrib(int32(si)))) // ≤ 64
	}
	for _, l := range levels {
		if d.avail[m][l] != nil {
			continue
		}
		li := d.c.index[m][l]
		vals := zeroed(&d.bufs.vals, len(li.groups)*n, len(li.groups)*n) // newCountIndex copies them
		for gi := range li.groups {
			row := vals[gi*n : (gi+1)*n]
			for _, si := range li.groups[gi].gpus {
				if t := int(thr[si]); t < n {
					row[t]++
				}
			}
			for k := 1; k < n; k++ {
				row[k] += row[k-1]
			}
		}
		d.avail[m][l] = make([]*countIndex, n)
		for k := range n {
			d.avail[m][l][k] = newCountIndex(li.groups, func(gi int) int { return vals[gi*n+k] })
		}
	}
}

// slotsOf returns the usable slots workspace wi holds, by slot order.
func (d *decider) slotsOf(wi int32) []int32 {
	var out []int32
	for _, a := range d.ws[wi].allocs {
		ni := sort.Search(len(d.c.nodes), func(i int) bool { return d.c.nodes[i].Name >= a.Node })
		if ni == len(d.c.nodes) || d.c.nodes[ni].Name != a.Node {
			continue
		}
		for _, id := range a.GPUs {
			if si := d.c.slot(ni, id); si >= 0 && d.c.slots[si].owner == wi {
				out = append(out, si)
			}
		}
	}
	return out
}
