package policies

// The limits: a workspace that has run its time limit (spec.maxRuntime,
// over all its runs of one spec), or whose GPUs stayed idle for its idle
// rule's after (spec.idle), is stopped with its checkpoint grace, as the
// specs stopping it would, and does not start again until its spec
// changes: VerdictStop with ReasonTimeLimit or ReasonIdle. An idle rule
// whose action is report only says so (the reason of its VerdictRun).
// Neither touches any other workspace.
//
// What they read is kept in the history by AdvanceHistory (how long each
// ran, its idle readings) and RecordDecision (who was stopped idle).
//
// Scenarios: testdata/limits/.

import (
	"fmt"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/schema"
)

// AdvanceHistory advances h to now from the snapshot: the decayed usage
// (AdvanceUsage), how long each workspace with a time limit has run
// (History.Ran) and the idle readings of each with an idle rule
// (History.Idle). The loop calls it before each decision, the replay
// too. h is not changed; the result shares no map with it.
func AdvanceHistory(h drivers.History, set *schema.Set, snap *drivers.Snapshot, now time.Time) drivers.History {
	out := AdvanceUsage(h, *snap, now, set.Policy.Spec.FairShare.HalfLife, set.Kinds)
	if !h.UsageAt.IsZero() && now.Before(h.UsageAt) {
		return out
	}
	out.Ran = advanceRan(h, set, snap, now)
	out.Idle = advanceIdle(h, set, snap)
	return out
}

// run is what a snapshot shows of one workspace's current run: its
// allocations that run (not starting, not stopping), the earliest
// start among them, and the spec they run.
type run struct {
	start    time.Time
	specHash string
	allocs   []*drivers.Alloc
}

// runsOf gathers the running allocations of the workspaces want keeps.
func runsOf(snap *drivers.Snapshot, want func(schema.Ref) bool) map[schema.Ref]*run {
	runs := map[schema.Ref]*run{}
	skip := map[schema.Ref]bool{}
	for i := range snap.Allocs {
		a := &snap.Allocs[i]
		if a.Phase != drivers.AllocRunning || skip[a.Workspace] {
			continue
		}
		r := runs[a.Workspace]
		if r == nil {
			if !want(a.Workspace) {
				skip[a.Workspace] = true
				continue
			}
			r = &run{start: a.StartedAt, specHash: a.SpecHash}
			runs[a.Workspace] = r
		}
		if a.StartedAt.Before(r.start) {
			r.start = a.StartedAt
		}
		r.allocs = append(r.allocs, a)
	}
	return runs
}

// advanceRan adds to each running workspace with a time limit, or to
// every running workspace under attained-service ordering (the policy's
// Service), the time it ran since h.UsageAt (since its start, when it
// had no record: a limit set while it runs counts its whole run); a run
// of another spec starts again from zero. Records of workspaces no
// longer wanted running, or no longer counted, are dropped.
func advanceRan(h drivers.History, set *schema.Set, snap *drivers.Snapshot, now time.Time) map[schema.Ref]drivers.RunTime {
	ordering := len(set.Policy.Spec.Service.Steps) > 0
	if !set.HasRuntimeLimits() && !ordering {
		return nil
	}
	limited := func(ref schema.Ref) bool {
		w := set.Workspace(ref)
		return w != nil && w.Spec.State == schema.DesiredRunning && (ordering || set.MaxRuntime(w).Max > 0)
	}
	out := make(map[schema.Ref]drivers.RunTime, len(h.Ran))
	for ref, r := range h.Ran {
		if limited(ref) {
			out[ref] = r
		}
	}
	for ref, r := range runsOf(snap, limited) {
		rt, ok := out[ref]
		if r.specHash != "" && rt.SpecHash != r.specHash {
			rt, ok = drivers.RunTime{SpecHash: r.specHash}, false
		}
		from := r.start
		if at := countedTo(rt, &h); ok && at.After(from) {
			from = at
		}
		rt.Ran += max(0, now.Sub(from))
		rt.At = time.Time{} // counted to now, the history's UsageAt from here
		out[ref] = rt
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// advanceIdle keeps each running workspace's run of idle readings: a
// reading of all its running allocations' GPUs, every one under its
// rule's below, extends it (or starts one); a busy reading ends it. A
// workspace some of whose GPUs report nothing (MIG instances, a driver
// that reads no utilization, allocations not yet sampled) keeps what it
// had: it is never found idle without readings of every GPU. Its
// reading's time is the oldest of its allocations'.
func advanceIdle(h drivers.History, set *schema.Set, snap *drivers.Snapshot) map[schema.Ref]drivers.IdleSpan {
	if !set.HasIdleRules() {
		return nil
	}
	rules := map[schema.Ref]schema.ResolvedIdle{}
	runs := runsOf(snap, func(ref schema.Ref) bool {
		w := set.Workspace(ref)
		if w == nil || w.Spec.State != schema.DesiredRunning || w.Spec.Resources.GPUs == 0 {
			return false
		}
		r := set.Idle(w)
		rules[ref] = r
		return r.On()
	})
	out := make(map[schema.Ref]drivers.IdleSpan, len(h.Idle))
	for ref, r := range runs {
		at, busy, read := reading(r.allocs, rules[ref].Below)
		prev, had := h.Idle[ref]
		had = had && !prev.Since.Before(r.start) // a span of an earlier run is over
		switch {
		case !read:
			if had {
				out[ref] = prev
			}
		case busy:
		case had:
			out[ref] = drivers.IdleSpan{Since: prev.Since, Last: maxTime(prev.Last, at)}
		default:
			out[ref] = drivers.IdleSpan{Since: at, Last: at}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// reading is a workspace's utilization reading over its running
// allocations: when (the oldest of theirs), whether any GPU was at or
// above below, and whether every GPU was read at all.
func reading(allocs []*drivers.Alloc, below float64) (at time.Time, busy, read bool) {
	for i, a := range allocs {
		u := a.Use
		if u == nil || len(a.GPUs) == 0 || len(u.Percent) < len(a.GPUs) {
			return time.Time{}, false, false
		}
		if i == 0 || u.At.Before(at) {
			at = u.At
		}
		busy = busy || u.Max() >= below
	}
	return at, busy, len(allocs) > 0
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// applyLimits marks the workspaces the limits stop (w.end; w.stopped,
// so they leave like a workspace the specs stop) and the idle ones only
// reported (w.idleNote). It runs once their allocations are attached.
func (d *decider) applyLimits(specs *schema.Set, hist *drivers.History) {
	timed, idle := specs.HasRuntimeLimits(), specs.HasIdleRules()
	if !timed && !idle && len(hist.Ended) == 0 {
		return
	}
	for _, w := range d.ws {
		if w.spec == nil || w.stopped {
			continue
		}
		if e, ok := hist.Ended[w.ref]; ok && e.SpecHash == drivers.Fingerprint(&w.spec.Spec) {
			w.stopped, w.end = true, &Reason{reasonOfEnd(e.Class), e.Reason + stopsUntil(w, "when its spec changes")}
			continue
		}
		if timed {
			if r := d.timeLimit(specs, w, hist); r != nil {
				w.stopped, w.end = true, r
				continue
			}
		}
		if idle && len(w.allocs) > 0 {
			rule := specs.Idle(w.spec)
			span, ok := hist.Idle[w.ref]
			if !rule.On() || !ok || span.Last.Sub(span.Since) < rule.After {
				continue
			}
			why := fmt.Sprintf("idle: every GPU under %g%% for %s (since %s), %s idle rule (after %s)",
				rule.Below, text.Duration(span.Last.Sub(span.Since)), stamp(span.Since), rule.From, text.Duration(rule.After))
			if rule.Action == schema.IdleReport {
				w.idleNote = why + "; reported only: it runs on"
				continue
			}
			w.stopped, w.end = true, &Reason{ReasonIdle, why + stopsUntil(w, "when its spec changes")}
		}
	}
}

// timeLimit is the reason w stops at its time limit, nil while it may
// run: how long it ran with its spec (History.Ran, and its current run
// since the history was advanced) against its limit.
func (d *decider) timeLimit(specs *schema.Set, w *wsState, hist *drivers.History) *Reason {
	lim := specs.MaxRuntime(w.spec)
	if lim.Max <= 0 {
		return nil
	}
	ran := ranFor(w.ref, w.spec, w.allocs, hist, d.now)
	if ran < lim.Max {
		return nil
	}
	return &Reason{ReasonTimeLimit, fmt.Sprintf("time limit: ran %s of %s maxRuntime of %s", text.Duration(ran), lim.From, text.Duration(lim.Max)) +
		stopsUntil(w, "when its spec changes or its limit is raised")}
}

// stopsUntil ends the reason of a workspace a limit stops: it stops
// with its checkpoint grace (when it runs), and runs again only when.
func stopsUntil(w *wsState, when string) string {
	if len(w.allocs) > 0 {
		return "; it stops with its checkpoint grace and runs again only " + when
	}
	return "; it runs again only " + when
}

// ranFor is how long workspace ref (spec w, allocations allocs) has run
// with its spec as of now: its record in hist.Ran where the record is of
// the spec it runs (or, holding nothing, of its spec now), plus its
// current run since hist.UsageAt (since the run's start, without a
// record).
func ranFor(ref schema.Ref, w *schema.Workspace, allocs []*drivers.Alloc, hist *drivers.History, now time.Time) time.Duration {
	rt, ok := hist.Ran[ref]
	var start time.Time
	hash, running := "", false
	for _, a := range allocs {
		if a.Phase != drivers.AllocRunning {
			continue
		}
		if !running || a.StartedAt.Before(start) {
			start, hash = a.StartedAt, a.SpecHash
		}
		running = true
	}
	if ok {
		if running && hash != "" {
			ok = rt.SpecHash == hash
		} else if !running && rt.SpecHash != "" {
			ok = rt.SpecHash == drivers.Fingerprint(&w.Spec)
		}
	}
	var ran time.Duration
	if ok {
		ran = rt.Ran
		if at := countedTo(rt, hist); running && at.After(start) {
			start = at
		}
	}
	if running {
		ran += max(0, now.Sub(start))
	}
	return ran
}

// countedTo is the time run-time record rt counts up to: its own, else
// the history's UsageAt.
func countedTo(rt drivers.RunTime, h *drivers.History) time.Time {
	if !rt.At.IsZero() {
		return rt.At
	}
	return h.UsageAt
}

// reasonOfEnd is the reason kind of an end berth made.
func reasonOfEnd(c drivers.EndClass) ReasonKind {
	if c == drivers.EndTimeLimit {
		return ReasonTimeLimit
	}
	return ReasonIdle
}

// EndOf is the end class of a decision's stop at a limit, and whether
// it is one.
func EndOf(r Reason) (drivers.EndClass, bool) {
	switch r.Kind {
	case ReasonTimeLimit:
		return drivers.EndTimeLimit, true
	case ReasonIdle:
		return drivers.EndIdle, true
	}
	return drivers.EndUnknown, false
}

// RemainingRuntime is how long workspace ref, holding own (its
// allocations), may still run before its time limit, and whether it has
// one: for berth plan's "stops at its time limit in 2h".
func RemainingRuntime(specs *schema.Set, ref schema.Ref, own []drivers.Alloc, hist *drivers.History, now time.Time) (time.Duration, bool) {
	w := specs.Workspace(ref)
	if w == nil {
		return 0, false
	}
	lim := specs.MaxRuntime(w)
	if lim.Max <= 0 {
		return 0, false
	}
	allocs := make([]*drivers.Alloc, len(own))
	for i := range own {
		allocs[i] = &own[i]
	}
	var h drivers.History
	if hist != nil {
		h = *hist
	}
	return max(0, lim.Max-ranFor(ref, w, allocs, &h, now)), true
}
