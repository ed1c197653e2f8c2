package policies

// Rule: who is in quota. A running workspace's label (in-quota or
// borrowed) is decided when it starts and kept while it runs; a queued
// one is in quota when it fits in what its project's quota has left.

import (
	"fmt"
	"slices"
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
// returns the GPUs they hold. queued, if not nil, sets a workspace's
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
// becoming borrowed work that its victim takes back, scenario 58).
func markOverQuota(ws []*wsState, quota int, queued func(*wsState)) int {
	total := 0
	for _, w := range ws {
		total += w.held
	}
	if total <= quota {
		// Whatever the order, each workspace fits in what those before
		// it left of the quota (both loops below): none is beyond it.
		for _, w := range ws {
			w.overQuota = false
		}
		return total
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
	inRoom := quota
	for _, w := range ws {
		if w.admitted == admittedInQuota {
			w.overQuota = w.held > inRoom
			if !w.overQuota {
				inRoom -= w.held
			}
		}
	}
	held := 0
	for i := 0; i < len(ws); {
		j := i
		room := quota - held
		for ; j < len(ws) && ws[j].startedAt.Equal(ws[i].startedAt); j++ {
			w := ws[j]
			if w.admitted != admittedInQuota {
				w.overQuota = w.held > room || w.held > inRoom
				if !w.overQuota {
					inRoom -= w.held
				}
			}
			if !w.overQuota {
				room -= w.held
			}
			held += w.held
		}
		i = j
	}
	return held
}

func (d *decider) inQuota(p *projState, w *wsState) bool {
	return p.held+w.gpus*w.replicas <= p.quota
}

func (d *decider) quotaReason(p *projState, w *wsState) Reason {
	need := w.gpus * w.replicas
	inQ := min(p.held, p.quota)
	borrowed := max(p.held-p.quota, 0)
	if !w.preemptible {
		return Reason{ReasonQuota, fmt.Sprintf("quota: not preemptible, so it runs only inside project %s's guaranteed quota, which has %d/%d GPUs in use; it needs %d", p.name, inQ, p.quota, need)}
	}
	return Reason{ReasonQuota, fmt.Sprintf("quota: project %s uses %d/%d guaranteed GPUs and %d/%d borrowed; it needs %d", p.name, inQ, p.quota, borrowed, p.borrow, need)}
}
