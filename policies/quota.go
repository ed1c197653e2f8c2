package policies

// Rule: who is in quota. A running workspace's label (in-quota or
// borrowed) is decided when it starts and kept while it runs; a queued
// one is in quota when it fits in what its project's quota has left.
//
// Scenarios: testdata/quota/.

import (
	"fmt"
	"slices"

	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/schema"
)

// admission is how a running workspace was admitted against its
// project's quota, as History.Borrowing recorded it.
type admission int8

const (
	admittedUnknown   admission = iota // no record: derived from start order
	admittedInQuota                    // inside the quota
	admittedBorrowing                  // beyond it
)

// markOverQuota sets overQuota on a project's running workspaces and
// returns the GPUs and the CPU and memory (rheld) they hold. A workspace
// is beyond the quota when it is in any dimension the quota counts:
// GPUs always, CPU and memory where rq names them. queued, if not nil, sets a workspace's
// queuedSince; it is called only for workspaces that started at the same
// time as another (nil: every queuedSince is set already).
//
// The label was decided when each was admitted, and History.Borrowing
// remembers it: a workspace admitted inside the quota stays inside it
// while it runs, whatever its project starts after it and whatever older
// work leaves. Recorded in-quota work is counted first (in start order;
// only a quota lowered below it leaves some beyond). A recorded borrower
// moves inside the quota (and RecordDecision keeps that) when it fits in
// what both the in-quota work and the rule below leave: promotion only
// takes a right to preempt it away, never gives one.
//
// Workspaces with no record (an older history, an allocation berth did
// not start) are labelled as their admission would have been, from start
// order: those started after the project's holdings passed its quota are
// beyond it. Workspaces started together (one decision's starts) are told
// apart as that decision admitted them: in queue order (time queued, then
// Ref), the first that fit in what the quota had left went in as in-quota
// work, the rest borrowed. Re-deriving alone is not enough: once older
// work leaves, two started together may swap labels (the reclaimer
// becoming borrowed work that its victim takes back: the scenarios
// testdata/quota/borrow-record-*).
func markOverQuota(ws []*wsState, quota int, rq quotaRes, queued func(*wsState)) (int, quotaRes) {
	total := 0
	var totalR quotaRes
	for _, w := range ws {
		total += w.held
		totalR = totalR.add(w.rheld)
	}
	if total <= quota && !rq.exceeds(totalR, rq) {
		// Whatever the order, each workspace fits in what those before
		// it left of the quota (both loops below): none is beyond it.
		for _, w := range ws {
			w.overQuota = false
		}
		return total, totalR
	}
	// Start order (time queued, then Ref, among those started together):
	// by start time, then each run of equal start times by the rest.
	slices.SortFunc(ws, func(a, b *wsState) int { return a.startedAt.Compare(b.startedAt) })
	for i := 0; i < len(ws); {
		j := i + 1
		for j < len(ws) && ws[j].startedAt.Equal(ws[i].startedAt) {
			j++
		}
		if j-i > 1 {
			if queued != nil {
				for _, w := range ws[i:j] {
					queued(w)
				}
			}
			slices.SortFunc(ws[i:j], func(a, b *wsState) int {
				if c := a.queuedSince.Compare(b.queuedSince); c != 0 {
					return c
				}
				return a.ref.Compare(b.ref)
			})
		}
		i = j
	}
	// inRoom: what the quota has left beside the work counted inside it.
	inRoom, inRoomR := quota, rq
	for _, w := range ws {
		if w.admitted == admittedInQuota {
			w.overQuota = w.held > inRoom || rq.exceeds(w.rheld, inRoomR)
			if !w.overQuota {
				inRoom -= w.held
				inRoomR = inRoomR.sub(w.rheld)
			}
		}
	}
	held := 0
	var heldR quotaRes
	for i := 0; i < len(ws); {
		j := i
		room, roomR := quota-held, rq.sub(heldR)
		for ; j < len(ws) && ws[j].startedAt.Equal(ws[i].startedAt); j++ {
			w := ws[j]
			if w.admitted != admittedInQuota {
				w.overQuota = w.held > room || w.held > inRoom || rq.exceeds(w.rheld, roomR) || rq.exceeds(w.rheld, inRoomR)
				if !w.overQuota {
					inRoom -= w.held
					inRoomR = inRoomR.sub(w.rheld)
				}
			}
			if !w.overQuota {
				room -= w.held
				roomR = roomR.sub(w.rheld)
			}
			held += w.held
			heldR = heldR.add(w.rheld)
		}
		i = j
	}
	return held, heldR
}

// inQuota reports whether w fits in what project p's quota has left, in
// every dimension the quota counts.
func (d *decider) inQuota(p *projState, w *wsState) bool {
	if p.held+w.gpus*w.replicas > p.quota {
		return false
	}
	return !p.rquota.named() || !p.rquota.exceeds(p.rheld.add(quotaNeed(w)), p.rquota)
}

func (d *decider) quotaReason(p *projState, w *wsState) Reason {
	need := w.gpus * w.replicas
	inQ := min(p.held, p.quota)
	borrowed := max(p.held-p.quota, 0)
	if unit := p.unit(); unit != "GPUs" {
		// A kind's account (kept apart: a string argument costs the
		// common case, most waits being these, an allocation each).
		if !w.preemptible {
			return Reason{ReasonQuota, fmt.Sprintf("quota: not preemptible, so it runs only inside project %s's guaranteed quota, which has %d/%d %s in use; it needs %d", p.name, inQ, p.quota, unit, need)}
		}
		return Reason{ReasonQuota, fmt.Sprintf("quota: project %s uses %d/%d guaranteed %s and %d/%d borrowed; it needs %d", p.name, inQ, p.quota, unit, borrowed, p.borrow, need)}
	}
	if !w.preemptible {
		return Reason{ReasonQuota, fmt.Sprintf("quota: not preemptible, so it runs only inside project %s's guaranteed quota, which has %d/%d GPUs in use; it needs %d", p.name, inQ, p.quota, need)}
	}
	return Reason{ReasonQuota, fmt.Sprintf("quota: project %s uses %d/%d guaranteed GPUs and %d/%d borrowed; it needs %d", p.name, inQ, p.quota, borrowed, p.borrow, need)}
}

// unit names what quota account p counts: "GPUs", "h100 GPUs" for a
// kind's account, "GPUs of other kinds" for the rest of a project whose
// quota names kinds.
func (p *projState) unit() string {
	switch {
	case p.kind != "":
		return p.kind + " GPUs"
	case p.accounts != nil:
		return "GPUs of other kinds"
	}
	return "GPUs"
}

// gpus writes n GPUs of what quota account p counts: "4 GPUs", "4 h100
// GPUs", "1 GPU of other kinds".
func (p *projState) gpus(n int) string {
	switch {
	case p.kind != "":
		return text.Plural(n, p.kind+" GPU")
	case p.accounts != nil:
		return text.Plural(n, "GPU") + " of other kinds"
	}
	return text.Plural(n, "GPU")
}

// quotaRes is what a quota counts besides GPUs: CPU in the unit of
// resources.cpu (MHz shares, one core written being 1000) and memory in
// bytes. As a quota, a dimension at zero
// is one the quota does not name: it limits nothing.
type quotaRes struct{ cpu, mem int64 }

func (a quotaRes) add(b quotaRes) quotaRes { return quotaRes{a.cpu + b.cpu, a.mem + b.mem} }
func (a quotaRes) sub(b quotaRes) quotaRes { return quotaRes{a.cpu - b.cpu, a.mem - b.mem} }

// named reports whether quota q names CPU or memory.
func (q quotaRes) named() bool { return q.cpu > 0 || q.mem > 0 }

// exceeds reports whether a is more than room in a dimension quota q
// names.
func (q quotaRes) exceeds(a, room quotaRes) bool {
	return (q.cpu > 0 && a.cpu > room.cpu) || (q.mem > 0 && a.mem > room.mem)
}

// quotaPerReplica is what one replica of w counts against its project's
// CPU and memory quota: its CPU share as written (an exclusive core
// counts as cpu: 1, 1000) and its memory. Counting the spec rather than
// a node's MHz keeps the count the same wherever it runs.
func quotaPerReplica(w *wsState) quotaRes {
	return quotaRes{w.cpu + int64(w.cores)*1000, w.mem}
}

// QuotaPerReplica is what one replica asking r counts against its
// project's CPU and memory quota, as the decision counts it: CPU in MHz
// shares (resources.cpu, an exclusive core as 1000) and memory in
// bytes. Status and metrics report use against the quota with it.
func QuotaPerReplica(r schema.WorkResources) (cpu, mem int64) {
	return r.CPUMHz + int64(r.ExclusiveCores)*1000, r.MemoryBytes
}

// quotaNeed is what w, all replicas, counts against its project's CPU
// and memory quota.
func quotaNeed(w *wsState) quotaRes {
	r := quotaPerReplica(w)
	n := int64(w.replicas)
	return quotaRes{r.cpu * n, r.mem * n}
}

// leavesAtQuota reports whether taking x (held by borrowed work) off
// project p leaves it at or above its quota in a dimension the quota
// names and x uses, so that what is taken was all borrowed there.
func (p *projState) leavesAtQuota(x quotaRes) bool {
	q, h := p.rquota, p.rheld
	return (q.cpu > 0 && x.cpu > 0 && h.cpu-x.cpu >= q.cpu) || (q.mem > 0 && x.mem > 0 && h.mem-x.mem >= q.mem)
}

// overLimit reports whether admitting w would take project p beyond
// what it may hold in some dimension (GPUs first, then CPU, then
// memory): its quota for a workspace that may not be preempted, else
// its quota plus borrow limit (a limit < 0: none); with the reason.
func (d *decider) overLimit(p *projState, w *wsState) (Reason, bool) {
	need := w.gpus * w.replicas
	limit := -1
	if !w.preemptible {
		limit = p.quota
	} else if p.borrow >= 0 {
		limit = p.quota + p.borrow
	}
	if limit >= 0 && p.held+need > limit {
		return d.quotaReason(p, w), true
	}
	if !p.rquota.named() {
		return Reason{}, false
	}
	rn := quotaNeed(w)
	dims := [...]struct {
		name                      string
		quota, borrow, held, need int64
		text                      func(int64) string
	}{
		{"CPU", p.rquota.cpu, p.rborrow.cpu, p.rheld.cpu, rn.cpu, text.CPU},
		{"memory", p.rquota.mem, p.rborrow.mem, p.rheld.mem, rn.mem, text.Bytes},
	}
	for _, dm := range dims {
		if dm.quota <= 0 || dm.need <= 0 {
			continue
		}
		if !w.preemptible {
			if dm.held+dm.need > dm.quota {
				return Reason{ReasonQuota, fmt.Sprintf("quota: not preemptible, so it runs only inside project %s's guaranteed %s quota of %s, which has %s in use; it needs %s", p.name, dm.name, dm.text(dm.quota), dm.text(dm.held), dm.text(dm.need))}, true
			}
			continue
		}
		if dm.borrow >= 0 && dm.held+dm.need > dm.quota+dm.borrow {
			return Reason{ReasonQuota, fmt.Sprintf("quota: project %s would exceed its %s quota (%s + %s borrow): it uses %s; it needs %s", p.name, dm.name, dm.text(dm.quota), dm.text(dm.borrow), dm.text(dm.held), dm.text(dm.need))}, true
		}
	}
	return Reason{}, false
}

// quotaText writes project p's quota: "4 GPUs", or with the CPU and
// memory it names, "4 GPUs, 8 CPUs and 64 GiB memory".
func quotaText(p *projState) string {
	parts := []string{p.gpus(p.quota)}
	if p.rquota.cpu > 0 {
		parts = append(parts, text.CPU(p.rquota.cpu))
	}
	if p.rquota.mem > 0 {
		parts = append(parts, text.Bytes(p.rquota.mem)+" memory")
	}
	return joinAnd(parts)
}
