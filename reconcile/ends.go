package reconcile

import (
	"cmp"
	"fmt"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/plan"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
)

// Runs that ended without berth stopping them (Snapshot.Exits), by class
// (drivers.EndClass says what each class leads to): a completed run and a
// task's own failure end the workspace until its spec changes; a run the
// node ended (lost, drained, a start that failed for the node's reason)
// is started again, after a backoff that grows with each such end in a
// row, until drivers.NodeFaultAttempts of them. Each end is counted once
// (berth_workspace_failures_total{class}) and kept in the workspace's
// status (LastEnd).

// endsOutcome is what settleEnds decided for the cycle.
type endsOutcome struct {
	// finished are the runs that ended for good: the decision does not
	// start them (completed, failed by the task, and the node's faults
	// no longer retried).
	finished map[schema.Ref]drivers.Exit
	// retrying are the node's faults being retried, each with the
	// attempt it is at (1: the first start after the fault); holds the
	// retries that must wait until the given time (their backoff).
	retrying map[schema.Ref]retry
}

// retry is one workspace started again after its node's fault.
type retry struct {
	end     drivers.Exit
	attempt int
	until   time.Time     // zero: it may start now
	ranFor  time.Duration // how long it had run (EndStatus.RanFor)
	// nodeStatus is why its node is not ready ("down", "disconnected"),
	// or "" when it is (or is gone from the snapshot).
	nodeStatus string
}

// settleEnds counts the ends this snapshot shows for the first time
// (each run's end once: a workspace holding allocations again clears
// endSeen, and an end at another time than the last is another, even
// when no snapshot saw the run between them), resets the count of the
// node's faults in a row of a workspace seen running, and sorts the ends
// into those that are final and the node's faults that are retried. The
// caller holds no lock.
func (l *Loop) settleEnds(set *schema.Set, snap *drivers.Snapshot, now time.Time) endsOutcome {
	out := endsOutcome{finished: plan.Ended(set, snap)}
	for _, a := range snap.Allocs {
		if rec := l.records[a.Workspace]; rec != nil {
			rec.endSeen = false
			if a.Phase == drivers.AllocRunning {
				rec.faults = 0
			}
		}
	}
	for ref, e := range out.finished {
		rec := l.records[ref]
		if rec == nil {
			rec = &record{status: view.WorkspaceStatus{Project: ref.Project, Name: ref.Name}}
			l.records[ref] = rec
		}
		if last := rec.status.LastEnd; !rec.endSeen || last == nil || (!e.At.IsZero() && !e.At.Equal(last.At)) {
			rec.endSeen = true
			if e.Class == drivers.EndNodeFault {
				rec.faults++
			}
			rec.status.LastEnd = &view.EndStatus{Class: e.Class.String(), At: e.At, Node: e.Node, ExitCode: e.ExitCode,
				Message: e.Message, Stderr: e.Stderr, Restarts: e.Restarts, Attempts: rec.faults}
			if rec.status.State == view.StateRunning {
				ran := max(0, cmp.Or(e.At, now).Sub(rec.status.Since))
				rec.status.LastEnd.RanFor = view.Seconds(ran)
				if e.Class == drivers.EndNodeFault && rec.lastProgress == 0 { // a driver that reports progress counts it on resume
					lost := lostSinceCheckpoint(set.Workspace(ref), ran)
					rec.status.WorkLost += view.Seconds(lost)
					l.cfg.Metrics.Lost(set, ref, lost)
				}
			}
			l.cfg.Metrics.Ended(e.Class)
		}
		if e.Class != drivers.EndNodeFault || rec.faults > drivers.NodeFaultAttempts {
			continue
		}
		delete(out.finished, ref)
		r := retry{end: e, attempt: rec.faults, ranFor: rec.status.LastEnd.RanFor.D(), nodeStatus: nodeStatus(snap, e.Node)}
		if until := e.At.Add(drivers.NodeFaultWait(rec.faults)); !e.At.IsZero() && now.Before(until) {
			r.until = until
		}
		if out.retrying == nil {
			out.retrying = map[schema.Ref]retry{}
		}
		out.retrying[ref] = r
	}
	return out
}

// lostSinceCheckpoint is the work a run of ran loses when it ends
// without its checkpoint signal: what it did since its last periodic
// checkpoint (spec.checkpoint.interval), all of it when it has none.
// The driver reports no progress (Nomad): this is the best berth knows.
func lostSinceCheckpoint(w *schema.Workspace, ran time.Duration) time.Duration {
	if w == nil || w.Spec.Checkpoint.Interval <= 0 {
		return ran
	}
	return ran % w.Spec.Checkpoint.Interval
}

// nodeStatus is the status of the node named name in snap when it is
// not ready, else "".
func nodeStatus(snap *drivers.Snapshot, name string) string {
	for i := range snap.Nodes {
		if n := &snap.Nodes[i]; n.Name == name && !n.Ready {
			return n.Status
		}
	}
	return ""
}

// faultWhere names what ended a run of the node's fault, for a reason.
func faultWhere(e drivers.Exit) string {
	where := "its allocation ended"
	if e.Node != "" {
		where = "its allocation on node " + e.Node + " ended"
	}
	if e.Message != "" {
		where += " (" + e.Message + ")"
	}
	return where
}

// retryReason is why a workspace whose run its node ended is starting
// again, or waits to.
func retryReason(r retry) string {
	s := "moving: " + faultWhere(r.end)
	if r.nodeStatus != "" {
		s = fmt.Sprintf("moving: node %s is %s", r.end.Node, r.nodeStatus)
		if r.end.Message != "" {
			s += " (" + r.end.Message + ")"
		}
	}
	if r.ranFor > 0 {
		s += fmt.Sprintf("; it had run %s, and what it did since its last checkpoint is lost", text.Seconds(r.ranFor))
	}
	s += "; the node's fault, not the task's: berth starts it again elsewhere"
	if !r.until.IsZero() {
		s += " at " + r.until.UTC().Format(time.TimeOnly) + " UTC"
	}
	return s + fmt.Sprintf(" (attempt %d of %d)", r.attempt, drivers.NodeFaultAttempts)
}
