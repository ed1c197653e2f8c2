package policies

// Machinery for admission and victim choice: every move a trial start
// makes (slot owners, node capacity, victims, project holdings) is
// journaled, so a gang or preemption that fails is rolled back whole.

// undo is one journaled move; rollback undoes them newest first.
type undo struct {
	slot      int32 // -1: a workspace change; -2: a node's free CPU, memory, disk and cores; -3: relLeft
	owner     int32
	node      int32
	amt       amount
	releasing bool
	ws        int32
	victim    bool
	projHeld  int
	projHeldW float64
	projRHeld quotaRes
}

func (d *decider) setOwner(si, owner int32, releasing bool) {
	d.changeSlot(si, owner, releasing, true)
	d.gen++
}

func (d *decider) victimize(vi int32) {
	v := d.ws[vi]
	p := d.projs[v.proj]
	// Slots first, then the workspace: rollback undoes the workspace first,
	// so each slot's avail contribution is recomputed as it was.
	for _, si := range d.slotsOf(vi) {
		d.changeSlot(si, vi, true, true)
	}
	d.journal = append(d.journal, undo{slot: -1, ws: vi, victim: v.victim, projHeld: p.held, projHeldW: p.heldW, projRHeld: p.rheld})
	v.victim = true
	p.held -= v.held
	p.heldW -= v.heldW
	p.rheld = p.rheld.sub(v.rheld)
	d.dirty = append(d.dirty, v.proj)
	d.gen++
	d.memoGen++
}

func (d *decider) rollback() {
	for i := len(d.journal) - 1; i >= 0; i-- {
		u := d.journal[i]
		if u.slot >= 0 {
			d.changeSlot(u.slot, u.owner, u.releasing, false)
			continue
		}
		if u.slot == -2 {
			d.free[u.node] = u.amt
			continue
		}
		if u.slot == -3 {
			key := [2]int32{u.owner, u.node}
			if u.victim {
				d.relLeft[key] = u.amt
			} else {
				delete(d.relLeft, key)
			}
			continue
		}
		v := d.ws[u.ws]
		v.victim = u.victim
		d.projs[v.proj].held = u.projHeld
		d.projs[v.proj].heldW = u.projHeldW
		d.projs[v.proj].rheld = u.projRHeld
	}
	d.journal = d.journal[:0]
	d.dirty = d.dirty[:0]
}
