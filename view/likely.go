package view

import (
	"cmp"
	"slices"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/policies"
	"github.com/berth-dev/berth/schema"
)

// Run times and the queue's likely start, for the status: a run that
// completes records how long it took (History.RunTimes, through
// policies.RecordRuns), each workspace gets its predicted run time
// (policies.Predict) and each waiting one when it is likely to start
// (policies.LikelyStarts).

// RunTimeStatus is a workspace's predicted run time: the median and the
// 10th–90th percentile range of the run times in Basis (PastRuns of
// them), scaled to its expectedDuration (Stated) when it states one.
type RunTimeStatus struct {
	Median Seconds `json:"medianSeconds"`
	Low    Seconds `json:"lowSeconds"`
	High   Seconds `json:"highSeconds"`
	// PastRuns is how many completed runs the prediction rests on; Basis
	// which ones ("its owner's runs of its size", "its project's runs",
	// …; absent with none).
	PastRuns int    `json:"pastRuns"`
	Basis    string `json:"basis,omitempty"`
	// Stated is its spec's expectedDuration (absent when not stated).
	Stated Seconds `json:"statedSeconds,omitempty"`
}

// LikelyStart is when a waiting workspace is likely to start, as times
// on the cluster's clock: between Earliest and Latest, most likely at
// Likely (every run time at its 10th, 90th and 50th percentile); they
// stay put while the predictions hold, so a status read later still
// says the same. Known false: it cannot say, and UnknownRunning and
// UnknownAhead count the workspaces holding GPUs it needs without a run
// time known (running, and ahead of it in the queue); with both zero it
// needs more GPUs than the cluster has. PastRuns and Stated are what it
// rests on (past runs, stated expectedDurations). It counts GPUs in
// queue order, without backfill or topology (policies.LikelyStarts); one
// its project's quota holds back (Quota) starts no sooner than the quota
// has room, estimated the same way. Text words it.
type LikelyStart struct {
	Known          bool      `json:"known"`
	Earliest       time.Time `json:"earliest,omitzero"`
	Likely         time.Time `json:"likely,omitzero"`
	Latest         time.Time `json:"latest,omitzero"`
	PastRuns       int       `json:"pastRuns"`
	Stated         int       `json:"stated"`
	UnknownRunning int       `json:"unknownRunning,omitempty"`
	UnknownAhead   int       `json:"unknownAhead,omitempty"`
	// Quota: its project's quota holds it back, not free GPUs; the times
	// are the later of the cluster's estimate and its project's.
	Quota bool `json:"quota,omitempty"`
	// OverdueAt is when the wait bound makes it overdue (queued plus the
	// policy's aging.maxWait): from then the starvation guard holds GPUs
	// for it ahead of borrowers and its own team's work of its tier and
	// lower (not of other teams' work inside their quotas), after older
	// overdue work. Zero with the bound off. The
	// times above do not model it.
	OverdueAt time.Time `json:"overdueAt,omitzero"`
}

// Text says l for people as seen at now: "in 2h–5h (most likely 3h;
// from 14 past runs)", "now: …", or "unknown: …" with why, and when the
// wait bound makes it overdue ("; overdue in 2d 3h", "; overdue").
func (l *LikelyStart) Text(now time.Time) string {
	return l.estimate(now) + l.overdueText(now)
}

// estimate is Text without the wait bound's clause.
func (l *LikelyStart) estimate(now time.Time) string {
	from := func(t time.Time) time.Duration { return max(0, t.Sub(now)) }
	return policies.Start{Known: l.Known, Low: from(l.Earliest), Likely: from(l.Likely), High: from(l.Latest),
		PastRuns: l.PastRuns, Stated: l.Stated, UnknownRunning: l.UnknownRunning, UnknownAhead: l.UnknownAhead, Quota: l.Quota}.String()
}

// overdueText says when the wait bound makes it overdue, as a clause
// ("; overdue in 2d 3h", "; overdue"); empty when the bound is off.
func (l *LikelyStart) overdueText(now time.Time) string {
	switch {
	case l.OverdueAt.IsZero():
		return ""
	case now.Before(l.OverdueAt):
		return "; overdue in " + text.RoughDuration(l.OverdueAt.Sub(now))
	}
	return "; overdue"
}

// RunningTime is how long history shows a workspace running in its
// current run (since it last completed, failed or was stopped), up to
// end: the sum of its Running stretches, the last one open until end.
func RunningTime(history []Transition, end time.Time) time.Duration {
	var total time.Duration
	var since time.Time
	first := 0
	for i := len(history) - 1; i >= 0; i-- {
		if t := history[i].To; t == StateCompleted || t == StateFailed || t == StateStopped {
			if i < len(history)-1 {
				first = i + 1
				break
			}
		}
	}
	for _, t := range history[first:] {
		if !since.IsZero() {
			total += t.At.Sub(since)
			since = time.Time{}
		}
		if t.To == StateRunning {
			since = t.At
		}
	}
	if !since.IsZero() && end.After(since) {
		total += end.Sub(since)
	}
	return total
}

// Prediction is what Predict says of one workspace of the set: its
// predicted run time and, waiting in the decision's queue, its likely
// start (nil when none).
type Prediction struct {
	RunTime     *RunTimeStatus
	LikelyStart *LikelyStart
}

// Known tells Predict the state and history of a workspace berth knows
// (ok false: none). The history is read, never kept or mutated.
type Known func(ref schema.Ref) (st State, history []Transition, ok bool)

// Predict is the run time of each workspace of set that has not ended
// and the likely start of each one waiting in d's queue (Pending or
// Preempted), as known reports their states: one Prediction per
// workspace of set, in set's order (set.Workspaces is sorted by Ref, and
// so are d's: one walk pairs them). It reads only its arguments and
// mutates none of them; the values it returns are new.
func Predict(set *schema.Set, snap *drivers.Snapshot, d policies.Decision, hist *drivers.History, now time.Time, known Known) []Prediction {
	out := make([]Prediction, len(set.Workspaces))
	var cache policies.PredictCache
	preds := make([]policies.RunTime, len(set.Workspaces))
	for i := range set.Workspaces {
		w := &set.Workspaces[i]
		r := cache.Predict(hist, w)
		preds[i] = r
		if !r.Known() {
			continue
		}
		st, _, ok := known(w.Ref())
		if !ok {
			continue
		}
		switch st {
		case StateCompleted, StateFailed, StateStopped:
			continue
		}
		out[i].RunTime = &RunTimeStatus{Median: Seconds(r.Quantile(0.5)), Low: Seconds(r.Quantile(0.1)), High: Seconds(r.Quantile(0.9)),
			PastRuns: len(r.Samples), Basis: r.Basis, Stated: Seconds(r.Stated)}
	}
	// specOf finds a workspace's spec index (-1: none) by binary search.
	specOf := func(ref schema.Ref) int {
		i, ok := slices.BinarySearchFunc(set.Workspaces, ref, func(w schema.Workspace, r schema.Ref) int { return w.Ref().Compare(r) })
		if !ok {
			return -1
		}
		return i
	}

	// Free GPUs, and what holds the rest.
	free := snap.UsableGPUs()
	// The queue, paired with the specs in one walk (both sorted by Ref);
	// leaving holders by verdict.
	type queued struct {
		wd   *policies.WorkspaceDecision
		spec int
	}
	queue := make([]queued, 0, len(d.Workspaces))
	leaving := map[schema.Ref]bool{}
	si := 0
	for i := range d.Workspaces {
		wd := &d.Workspaces[i]
		if wd.Verdict == policies.VerdictPreempt || wd.Verdict == policies.VerdictStop {
			leaving[wd.Ref] = true
		}
		if wd.Queue <= 0 {
			continue
		}
		for si < len(set.Workspaces) && set.Workspaces[si].Ref().Compare(wd.Ref) < 0 {
			si++
		}
		if si < len(set.Workspaces) && set.Workspaces[si].Ref() == wd.Ref {
			queue = append(queue, queued{wd, si})
		}
	}
	holders := make([]policies.Holder, 0, len(snap.Allocs)+len(queue)/8)
	holderProj := make([]string, 0, cap(holders)) // each holder's project
	for i := 0; i < len(snap.Allocs); {
		ref := snap.Allocs[i].Workspace
		var h policies.Holder
		if k := specOf(ref); k >= 0 {
			h.Run = preds[k]
		}
		var progress time.Duration
		for ; i < len(snap.Allocs) && snap.Allocs[i].Workspace == ref; i++ {
			a := &snap.Allocs[i]
			h.GPUs += len(a.GPUs)
			h.Leaving = h.Leaving || a.Phase == drivers.AllocStopping
			progress = max(progress, a.Progress)
		}
		h.Leaving = h.Leaving || leaving[ref]
		if h.GPUs == 0 {
			continue
		}
		free -= h.GPUs
		h.Elapsed = progress
		if progress <= 0 {
			if _, history, ok := known(ref); ok {
				h.Elapsed = RunningTime(history, now)
			}
		}
		holders = append(holders, h)
		holderProj = append(holderProj, ref.Project)
	}
	if len(queue) == 0 {
		return out
	}
	slices.SortFunc(queue, func(a, b queued) int { return cmp.Compare(a.wd.Queue, b.wd.Queue) })
	waiters := make([]policies.Waiter, 0, len(queue))
	quotaHeld := map[schema.Ref]bool{} // waiters their project's quota holds back
	for _, q := range queue {
		spec := &set.Workspaces[q.spec]
		gpus := spec.Spec.Resources.GPUs * max(spec.Spec.Replicas, 1)
		if q.wd.Verdict == policies.VerdictStart {
			// Starting now: it holds its GPUs from here.
			holders = append(holders, policies.Holder{GPUs: gpus, Run: preds[q.spec]})
			holderProj = append(holderProj, q.wd.Ref.Project)
			free -= gpus
			continue
		}
		if q.wd.Verdict == policies.VerdictWait && gpus > 0 {
			waiters = append(waiters, policies.Waiter{Ref: q.wd.Ref, GPUs: gpus, Run: preds[q.spec]})
			if q.wd.Reason.Kind == policies.ReasonQuota {
				quotaHeld[q.wd.Ref] = true
			}
		}
	}
	starts := policies.LikelyStarts(free, holders, waiters)
	// A workspace its project's quota holds back starts when both the
	// cluster and the quota have room: the quota's estimate runs the
	// same way on the GPUs the project may still take, its own holders
	// and its own queue.
	if len(quotaHeld) > 0 {
		// Each such project's holders and waiters (waiters by index into
		// starts), gathered in one pass each.
		type projQueue struct {
			holders []policies.Holder
			waiters []policies.Waiter
			at      []int
		}
		byProj := map[string]*projQueue{}
		for ref := range quotaHeld {
			if p := set.Project(ref.Project); p != nil && p.Spec.BorrowLimit.GPUs >= 0 {
				byProj[ref.Project] = &projQueue{}
			}
		}
		for i, h := range holders {
			if q := byProj[holderProj[i]]; q != nil {
				q.holders = append(q.holders, h)
			}
		}
		for i, w := range waiters {
			if q := byProj[w.Ref.Project]; q != nil {
				q.waiters, q.at = append(q.waiters, w), append(q.at, i)
			}
		}
		for proj, q := range byProj {
			p := set.Project(proj)
			room := p.Spec.Quota.GPUs + p.Spec.BorrowLimit.GPUs
			for _, h := range q.holders {
				room -= h.GPUs
			}
			for k, st := range policies.LikelyStarts(room, q.holders, q.waiters) {
				if quotaHeld[st.Ref] {
					starts[q.at[k]] = policies.QuotaBound(starts[q.at[k]], st)
				}
			}
		}
	}
	maxWait := set.Policy.Spec.Aging.MaxWait
	for _, s := range starts {
		st, _, ok := known(s.Ref)
		k := specOf(s.Ref)
		if !ok || k < 0 || (st != StatePending && st != StatePreempted) {
			continue
		}
		ls := &LikelyStart{Known: s.Known, PastRuns: s.PastRuns, Stated: s.Stated, UnknownRunning: s.UnknownRunning, UnknownAhead: s.UnknownAhead, Quota: s.Quota}
		if q, ok := hist.QueuedSince[s.Ref]; ok && maxWait > 0 {
			ls.OverdueAt = q.Add(maxWait)
		}
		if s.Known {
			at := func(d time.Duration) time.Time { return now.Add(d).Round(time.Second) }
			ls.Earliest, ls.Likely, ls.Latest = at(s.Low), at(s.Likely), at(s.High)
		}
		out[k].LikelyStart = ls
	}
	return out
}
