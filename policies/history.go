package policies

import (
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
)

// AdvanceUsage returns h with its usage decayed from h.UsageAt to now and
// the GPU-seconds the snapshot's allocations used since then added (each
// decayed from when it was used): usage(now) = usage(at)·0.5^(Δ/halfLife)
// + Σ gpus·∫ 0.5^((now−t)/halfLife) dt, where an allocation's GPUs count
// in GPU-equivalents (drivers.Weight, by the kinds declared: a MIG
// instance its slices of a GPU). An allocation started after UsageAt
// counts from its start. A zero halfLife means no decay. h is not
// changed; the result shares no map with it. A now before h.UsageAt
// returns a copy of h.
func AdvanceUsage(h drivers.History, snap drivers.Snapshot, now time.Time, halfLife time.Duration, kinds []schema.GPUKind) drivers.History {
	out := copyHistory(h)
	if !h.UsageAt.IsZero() && now.Before(h.UsageAt) {
		return out
	}
	out.Usage = decayedUsage(h, &snap, now, halfLife, allocWeigher(&snap, kinds))
	out.UsageAt = now
	return out
}

// allocWeigher returns what an allocation of snap's GPUs counts in
// GPU-equivalents, or nil where every GPU counts one (no kind of
// another weight is declared, no MIG instance is on a node).
func allocWeigher(snap *drivers.Snapshot, kinds []schema.GPUKind) func(a *drivers.Alloc) float64 {
	if !slices.ContainsFunc(kinds, func(k schema.GPUKind) bool { return k.Spec.Weight > 0 && k.Spec.Weight != 1 }) && noMIG(snap.Nodes) {
		return nil
	}
	set := schema.Set{Kinds: kinds}
	return func(a *drivers.Alloc) float64 {
		m := snap.ModelOf(a)
		return drivers.Weight(set.KindOf(m), m) * float64(len(a.GPUs))
	}
}

// noMIG reports whether no node of nodes has a MIG instance. It
// remembers the answer for the last node list it read (by its first
// element's address and its length: a snapshot is never changed, and the
// simulator's share one node list until a node changes), as a replay
// advances usage over the same nodes at every decision.
func noMIG(nodes []drivers.Node) bool {
	if len(nodes) == 0 {
		return true
	}
	noMIGCache.Lock()
	defer noMIGCache.Unlock()
	if noMIGCache.first == &nodes[0] && noMIGCache.n == len(nodes) {
		return noMIGCache.none
	}
	none := true
	for i := range nodes {
		for j := range nodes[i].GPUs {
			none = none && !nodes[i].GPUs[j].IsMIG()
		}
	}
	noMIGCache.first, noMIGCache.n, noMIGCache.none = &nodes[0], len(nodes), none
	return none
}

var noMIGCache struct {
	sync.Mutex
	first *drivers.Node
	n     int
	none  bool
}

// decayedUsage is AdvanceUsage's usage map, without copying the rest;
// weigh is what an allocation's GPUs count (nil: one each).
func decayedUsage(h drivers.History, snap *drivers.Snapshot, now time.Time, halfLife time.Duration, weigh func(*drivers.Alloc) float64) map[string]float64 {
	usage := make(map[string]float64, len(h.Usage))
	factor := 1.0
	if !h.UsageAt.IsZero() && halfLife > 0 && now.After(h.UsageAt) {
		factor = math.Pow(0.5, now.Sub(h.UsageAt).Seconds()/halfLife.Seconds())
	}
	for p, u := range h.Usage {
		usage[p] = u * factor
	}
	if snap == nil {
		return usage
	}
	// A project's allocations usually come together (Allocs is sorted by
	// workspace): its sum is kept in cur through each run of them and
	// stored at the run's end, the same additions in the same order.
	proj, cur, inRun := "", 0.0, false
	for i := range snap.Allocs {
		a := &snap.Allocs[i] // not copied: an allocation is large
		from := a.StartedAt
		if h.UsageAt.After(from) {
			from = h.UsageAt
		}
		dt := now.Sub(from).Seconds()
		if dt <= 0 || len(a.GPUs) == 0 {
			continue
		}
		if !inRun || a.Workspace.Project != proj {
			if inRun {
				usage[proj] = cur
			}
			proj, cur, inRun = a.Workspace.Project, usage[a.Workspace.Project], true
		}
		g := float64(len(a.GPUs))
		if weigh != nil {
			g = weigh(a)
		}
		if halfLife > 0 {
			tau := halfLife.Seconds() / math.Ln2
			cur += g * tau * (1 - math.Exp(-dt/tau))
		} else {
			cur += g * dt
		}
	}
	if inRun {
		usage[proj] = cur
	}
	return usage
}

func copyHistory(h drivers.History) drivers.History {
	out := drivers.History{UsageAt: h.UsageAt}
	if h.Usage != nil {
		out.Usage = maps.Clone(h.Usage)
	}
	if h.QueuedSince != nil {
		out.QueuedSince = maps.Clone(h.QueuedSince)
	}
	if h.Preempted != nil {
		out.Preempted = maps.Clone(h.Preempted)
	}
	if h.Borrowing != nil {
		out.Borrowing = maps.Clone(h.Borrowing)
	}
	if h.Journal != nil {
		out.Journal = maps.Clone(h.Journal)
	}
	if h.RunTimes != nil {
		out.RunTimes = maps.Clone(h.RunTimes) // the slices are never changed in place
	}
	if h.Ran != nil {
		out.Ran = maps.Clone(h.Ran)
	}
	if h.Idle != nil {
		out.Idle = maps.Clone(h.Idle)
	}
	if h.Ended != nil {
		out.Ended = maps.Clone(h.Ended)
	}
	return out
}

// RecordAdmission keeps w's quota label in borrowing (History.Borrowing),
// as RecordDecision does for each workspace of its decision: one that
// starts or runs keeps the label its decision gave it
// (WorkspaceDecision.Borrowed), any other loses its own. The replay,
// which decides on a narrowed queue, records its labels with it.
func RecordAdmission(borrowing map[schema.Ref]bool, w *WorkspaceDecision) {
	switch w.Verdict {
	case VerdictRun, VerdictStart:
		if b, ok := borrowing[w.Ref]; !ok || b != w.Borrowed {
			borrowing[w.Ref] = w.Borrowed
		}
	default:
		delete(borrowing, w.Ref)
	}
}

// RecordDecision returns h with the queue bookkeeping of decision d:
// a workspace that waits or starts keeps its first QueuedSince (set to
// d.Now when it had none), so a preempted workspace keeps its place in
// the queue; a workspace told to stop, or gone from the decision, is
// forgotten; each victim of d gets a Preemption record, which stays until
// it runs again. A workspace that starts or runs has its quota label
// (WorkspaceDecision.Borrowed) kept in Borrowing; every other one has it
// dropped. A workspace d stops because its GPUs were idle (ReasonIdle)
// is kept in Ended with its spec's fingerprint (set's), so that it stays
// stopped until the spec changes; it is forgotten once it runs again,
// is set Stopped or leaves the specs. Usage is left to AdvanceHistory.
// h is not changed.
func RecordDecision(h drivers.History, set *schema.Set, d Decision) drivers.History {
	out := copyHistory(h)
	if out.QueuedSince == nil {
		out.QueuedSince = map[schema.Ref]time.Time{}
	}
	if out.Preempted == nil {
		out.Preempted = map[schema.Ref]drivers.Preemption{}
	}
	if out.Borrowing == nil {
		out.Borrowing = map[schema.Ref]bool{}
	}
	seen := make(map[schema.Ref]bool, len(d.Workspaces))
	for i := range d.Workspaces {
		w := &d.Workspaces[i]
		seen[w.Ref] = true
		RecordAdmission(out.Borrowing, w)
		if w.Verdict == VerdictStop && w.Reason.Kind == ReasonIdle {
			if _, ok := out.Ended[w.Ref]; !ok && set != nil {
				if sw := set.Workspace(w.Ref); sw != nil {
					if out.Ended == nil {
						out.Ended = map[schema.Ref]drivers.Ended{}
					}
					why, _, _ := strings.Cut(w.Reason.Message, "; it ")
					out.Ended[w.Ref] = drivers.Ended{Class: drivers.EndIdle, At: d.Now, SpecHash: drivers.Fingerprint(&sw.Spec), Reason: why}
				}
			}
		} else {
			delete(out.Ended, w.Ref) // it runs, waits to, or is stopped by the specs
		}
		switch w.Verdict {
		case VerdictStop:
			delete(out.QueuedSince, w.Ref)
			delete(out.Preempted, w.Ref)
		case VerdictRun:
			delete(out.Preempted, w.Ref)
			if _, ok := out.QueuedSince[w.Ref]; !ok {
				out.QueuedSince[w.Ref] = d.Now
			}
		case VerdictWait, VerdictStart:
			if _, ok := out.QueuedSince[w.Ref]; !ok {
				out.QueuedSince[w.Ref] = d.Now
			}
		case VerdictPreempt:
			if _, ok := out.QueuedSince[w.Ref]; !ok {
				out.QueuedSince[w.Ref] = d.Now
			}
			if w.PreemptedBy != nil {
				if old, ok := out.Preempted[w.Ref]; !ok || old.By != *w.PreemptedBy {
					out.Preempted[w.Ref] = drivers.Preemption{Victim: w.Ref, By: *w.PreemptedBy, At: d.Now, Reason: w.Reason.Message}
				}
			}
		}
	}
	for r := range out.QueuedSince {
		if !seen[r] {
			delete(out.QueuedSince, r)
		}
	}
	for r := range out.Preempted {
		if !seen[r] {
			delete(out.Preempted, r)
		}
	}
	for r := range out.Borrowing {
		if !seen[r] {
			delete(out.Borrowing, r)
		}
	}
	for r := range out.Ended {
		if !seen[r] {
			delete(out.Ended, r)
		}
	}
	return out
}
