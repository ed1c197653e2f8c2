package reconcile

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
)

// AllowMassPruneAnnotation, set to "true" on the SchedulingPolicy of a
// revision, lets that revision stop or remove many workspaces at once.
const AllowMassPruneAnnotation = "berth.dev/allow-mass-prune"

// DefaultPruneDelay is how long a workspace must stay out of the specs
// before its job is purged.
const DefaultPruneDelay = 24 * time.Hour

// PruneGuard is the mass-prune threshold: a revision is refused when it
// stops or removes more than Percent% and more than Min of the managed
// workspaces (defaults 25 and 3), unless Allow.
type PruneGuard struct {
	Percent, Min int
	Allow        bool
}

func (g PruneGuard) withDefaults() PruneGuard {
	if g.Percent <= 0 {
		g.Percent = 25
	}
	if g.Min <= 0 {
		g.Min = 3
	}
	return g
}

// MassPrune is what a revision would stop or remove, against what berth
// manages now.
type MassPrune struct {
	// Managed are the workspaces berth runs or was told to run: holding
	// GPUs in the snapshot, or wanted Running by the revision in force.
	Managed int `json:"managed"`
	// Affected are the managed workspaces the new revision removes or
	// wants Stopped, sorted.
	Affected []schema.Ref `json:"affected,omitempty"`
	// Empty: the new revision has no specs at all.
	Empty bool `json:"empty,omitempty"`
	// Allowed: the flag or the policy annotation allows it.
	Allowed bool `json:"allowed,omitempty"`
	// Percent and Min are the threshold it was checked against.
	Percent int `json:"percent"`
	Min     int `json:"min"`
}

// Mass reports whether it crosses the threshold: more than Percent% and
// more than Min of the managed workspaces, or no specs at all.
func (m MassPrune) Mass() bool {
	n := len(m.Affected)
	return m.Empty || (n > m.Min && 100*n > m.Percent*m.Managed)
}

// Refused reports whether the revision must not be applied.
func (m MassPrune) Refused() bool { return m.Mass() && !m.Allowed }

// Problem is the sentence a refused revision is reported with.
func (m MassPrune) Problem() string {
	if m.Empty {
		return "the revision contains no specs at all; applying it would stop every workspace. Allow it with --allow-mass-prune or the " + AllowMassPruneAnnotation + ": \"true\" annotation on the SchedulingPolicy"
	}
	names := make([]string, len(m.Affected))
	for i, r := range m.Affected {
		names[i] = r.String()
	}
	return fmt.Sprintf("mass prune refused: the revision would stop or remove %d of %d managed workspaces (%s), more than %d%% and more than %d; allow it with --allow-mass-prune or the %s: \"true\" annotation on the SchedulingPolicy",
		len(m.Affected), m.Managed, strings.Join(names, ", "), m.Percent, m.Min, AllowMassPruneAnnotation)
}

// CheckMassPrune compares next against what berth manages: workspaces
// holding GPUs in snap (not already stopping) and those prev (the
// revision in force, may be nil) wants Running. It is pure.
func CheckMassPrune(prev, next *schema.Set, snap *drivers.Snapshot, guard PruneGuard) MassPrune {
	guard = guard.withDefaults()
	managed := map[schema.Ref]bool{}
	if snap != nil {
		held := map[schema.Ref][]drivers.Alloc{}
		for _, a := range snap.Allocs {
			held[a.Workspace] = append(held[a.Workspace], a)
		}
		for ref, own := range held {
			if !allStopping(own) {
				managed[ref] = true
			}
		}
	}
	if prev != nil {
		for _, w := range prev.Workspaces {
			if w.Spec.State != schema.DesiredStopped {
				managed[w.Ref()] = true
			}
		}
	}
	m := MassPrune{Managed: len(managed), Percent: guard.Percent, Min: guard.Min}
	m.Empty = len(next.Tiers) == 0 && len(next.Projects) == 0 && len(next.Workspaces) == 0
	for ref := range managed {
		w := next.Workspace(ref)
		if w == nil || w.Spec.State == schema.DesiredStopped {
			m.Affected = append(m.Affected, ref)
		}
	}
	sort.Slice(m.Affected, func(i, j int) bool { return m.Affected[i].Less(m.Affected[j]) })
	m.Allowed = guard.Allow || next.Policy.Meta.Annotations[AllowMassPruneAnnotation] == "true"
	return m
}

// admit puts a newly loaded, valid revision in force, unless it would
// prune too much: then the previous revision stays in force (nil when
// there was none) and the new one is reported as attempted with the
// reason.
func (l *Loop) admit(prev, set *schema.Set, snap *drivers.Snapshot) *schema.Set {
	m := CheckMassPrune(prev, set, snap, PruneGuard{Percent: l.cfg.MassPrunePercent, Min: l.cfg.MassPruneMin, Allow: l.cfg.AllowMassPrune})
	if !m.Refused() {
		if m.Mass() {
			l.log.Warn("revision "+set.Revision+" stops or removes many workspaces; allowed", "affected", len(m.Affected), "managed", m.Managed)
		}
		l.mu.Lock()
		l.good, l.goodRev, l.attempted = set, &RevisionStatus{ID: set.Revision, LoadedAt: snap.ObservedAt}, nil
		l.mu.Unlock()
		l.cfg.Metrics.revision(set.Revision, true)
		l.log.Info("revision "+set.Revision+" in force", "workspaces", len(set.Workspaces), "projects", len(set.Projects))
		return set
	}
	l.mu.Lock()
	l.attempted = &RevisionStatus{ID: set.Revision, LoadedAt: snap.ObservedAt, Errors: []string{m.Problem()}}
	l.mu.Unlock()
	l.cfg.Metrics.revision(set.Revision, false)
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
	l.mu.Lock()
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
			if rec.status.State == StateStopped {
				rec.status.Reason = "no longer in the specs; purged"
			}
			continue
		}
		at := ab.since.Add(l.cfg.PruneDelay)
		if !now.Before(at) && !holding[ref] {
			due = append(due, ref)
			continue
		}
		if rec.status.State == StateStopped {
			rec.status.Reason = "no longer in the specs; its job is purged at " + at.UTC().Format(time.RFC3339) + " unless it comes back"
		}
	}
	for ref := range l.absent {
		if l.records[ref] == nil && set.Workspace(ref) != nil {
			delete(l.absent, ref)
		}
	}
	l.mu.Unlock()
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
		l.mu.Lock()
		l.absent[ref].purged = true
		if rec := l.records[ref]; rec != nil {
			rec.status.Reason = "no longer in the specs; purged"
			rec.history = append(rec.history, Transition{At: now, From: rec.status.State, To: StateStopped, Reason: "purged after " + l.cfg.PruneDelay.String() + " out of the specs"})
		}
		l.mu.Unlock()
		l.log.Info(ref.String()+": purged", "reason", a.Reason)
	}
	return firstErr
}
