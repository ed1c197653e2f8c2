package plan

import (
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
// before its job is purged (the loop's Config.PruneDelay and berth
// plan's --prune-delay default to it).
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
		for ref, own := range drivers.ByWorkspace(snap.Allocs) {
			if !drivers.AllStopping(own) {
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
