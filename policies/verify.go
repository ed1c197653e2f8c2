package policies

// Machinery check: the property tests make Decide recount its
// incremental indexes at its end.

import "fmt"

// verifyIndexes makes Decide check, at its end, that its incremental
// indexes match a recount; the property tests turn it on.
var verifyIndexes = false

func (d *decider) verify() {
	for m := range d.c.index {
		for l := range numLevels {
			li := d.c.index[m][l]
			for gi, g := range li.groups {
				free := 0
				for _, si := range g.gpus {
					if d.c.slots[si].owner == ownerFree {
						free++
					}
				}
				if free != g.free || li.first(free) < 0 {
					panic(fmt.Sprintf("free index of group %d (model %d, level %d): %d, recount %d", gi, m, l, g.free, free))
				}
				for k := 0; k <= d.numTiers && d.avail[m][l] != nil; k++ {
					n := 0
					for _, si := range g.gpus {
						if d.contrib(si)&(1<<k) != 0 {
							n++
						}
					}
					if got := int(d.avail[m][l][k].count[gi]); got != n {
						panic(fmt.Sprintf("avail[%d][%d][%d] of group %d: %d, recount %d", m, l, k, gi, got, n))
					}
				}
			}
		}
	}
}
