package reconcile

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/plan"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
)

// adoptRevision puts a newly loaded, valid revision in force, unless it would
// prune too much: then the previous revision stays in force (nil when
// there was none) and the new one is reported as attempted with the
// reason.
func (l *Loop) adoptRevision(prev, set *schema.Set, snap *drivers.Snapshot) *schema.Set {
	m := plan.CheckMassPrune(prev, set, snap, plan.PruneGuard{Percent: l.cfg.MassPrunePercent, Min: l.cfg.MassPruneMin, Allow: l.cfg.AllowMassPrune})
	if !m.Refused() {
		if m.Mass() {
			l.log.Warn("revision "+set.Revision+" stops or removes many workspaces; allowed", "affected", len(m.Affected), "managed", m.Managed)
		}
		l.good, l.goodRev, l.attempted = set, &view.RevisionStatus{ID: set.Revision, LoadedAt: snap.ObservedAt}, nil
		l.cfg.Metrics.Revision(set.Revision, true)
		l.log.Info("revision "+set.Revision+" in force", "workspaces", len(set.Workspaces), "projects", len(set.Projects))
		return set
	}
	l.attempted = &view.RevisionStatus{ID: set.Revision, LoadedAt: snap.ObservedAt, Errors: []string{m.Problem()}}
	l.cfg.Metrics.Revision(set.Revision, false)
	kept := "nothing is in force"
	if prev != nil {
		kept = prev.Revision + " stays in force"
	}
	// A warning, as for an invalid revision: the loop goes on, and the
	// refusal is in the status (berth apply prints it, once).
	l.log.Warn("revision "+set.Revision+" refused; "+kept, "err", m.Problem())
	return prev
}

// absence is the loop's memory of a workspace the specs no longer list.
type absence struct {
	since  time.Time // cluster time it was first seen absent
	purged bool
}

// prune purges the jobs of workspaces that have stayed out of the specs
// for PruneDelay and no longer hold GPUs, and notes in their status when
// that will happen. A workspace back in the specs is forgotten here and
// starts from what it saved. When each workspace left the specs is kept
// in the Store's journal (journal.go): a restarted berth, or a newly
// elected one, purges on the same schedule.
func (l *Loop) prune(ctx context.Context, set *schema.Set, snap *drivers.Snapshot, now time.Time) error {
	holding := map[schema.Ref]bool{}
	for _, a := range snap.Allocs {
		holding[a.Workspace] = true
	}
	if l.absent == nil {
		l.absent = map[schema.Ref]*absence{}
	}
	var due []schema.Ref
	for ref, rec := range l.records {
		if set.Workspace(ref) != nil {
			delete(l.absent, ref)
			continue
		}
		ab := l.absent[ref]
		if ab == nil {
			ab = &absence{since: now}
			l.absent[ref] = ab
		}
		if ab.purged {
			if rec.status.State == view.StateStopped {
				rec.status.Reason = "no longer in the specs; purged"
			}
			continue
		}
		at := ab.since.Add(l.cfg.PruneDelay)
		if !now.Before(at) && !holding[ref] {
			due = append(due, ref)
			continue
		}
		if rec.status.State == view.StateStopped {
			rec.status.Reason = "no longer in the specs; its job is purged at " + at.UTC().Format(time.RFC3339) + " unless it comes back"
		}
	}
	for ref := range l.absent {
		if l.records[ref] == nil && set.Workspace(ref) != nil {
			delete(l.absent, ref)
		}
	}
	sort.Slice(due, func(i, j int) bool { return due[i].Less(due[j]) })
	var firstErr error
	for _, ref := range due {
		a := drivers.Action{Kind: drivers.ActionPurge, Workspace: ref, Reason: "out of the specs for " + l.cfg.PruneDelay.String(), Revision: set.Revision}
		if err := l.cfg.Cluster.Apply(ctx, a); err != nil {
			err = fmt.Errorf("apply purge %s: %w", ref, err)
			l.log.Warn("purge failed; retrying next cycle", "workspace", ref.String(), "err", err.Error())
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		l.absent[ref].purged = true
		if rec := l.records[ref]; rec != nil {
			rec.status.Reason = "no longer in the specs; purged"
			rec.history = append(rec.history, view.Transition{At: now, From: rec.status.State, To: view.StateStopped, Reason: "purged after " + l.cfg.PruneDelay.String() + " out of the specs"})
		}
		l.log.Info(ref.String()+": purged", "reason", a.Reason)
	}
	return firstErr
}
