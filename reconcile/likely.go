package reconcile

import (
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/policies"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
)

// completedRun is the run a workspace that just completed (its last
// transition, to Completed at end) took: its progress where the driver
// reports it, else the time history shows it running.
func completedRun(spec *schema.Workspace, rec *record, end time.Time) policies.Run {
	r := policies.Run{Project: spec.Meta.Project, Owner: spec.Spec.Owner, GPUs: spec.Spec.Resources.GPUs * max(spec.Spec.Replicas, 1)}
	r.Took = rec.lastProgress
	if r.Took <= 0 && len(rec.history) > 0 {
		r.Took = view.RunningTime(rec.history[:len(rec.history)-1], end)
	}
	return r
}

// takeRuns returns the runs completed since the last call.
func (l *Loop) takeRuns() []policies.Run {
	r := l.runs
	l.runs = nil
	return r
}

// predictAll sets each record's RunTime and, for those waiting in d's
// queue, LikelyStart (view.Predict). The cycle's, records up to date.
func (l *Loop) predictAll(set *schema.Set, snap *drivers.Snapshot, d policies.Decision, hist *drivers.History, now time.Time) {
	for _, rec := range l.records {
		rec.status.RunTime, rec.status.LikelyStart = nil, nil
	}
	for i, p := range view.Predict(set, snap, d, hist, now, l.known) {
		if p.RunTime == nil && p.LikelyStart == nil {
			continue
		}
		rec := l.records[set.Workspaces[i].Ref()]
		rec.status.RunTime, rec.status.LikelyStart = p.RunTime, p.LikelyStart
	}
}

// known is view.Known over the loop's records.
func (l *Loop) known(ref schema.Ref) (view.State, []view.Transition, bool) {
	rec := l.records[ref]
	if rec == nil {
		return "", nil, false
	}
	return rec.status.State, rec.history, true
}
