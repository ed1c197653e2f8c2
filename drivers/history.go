package drivers

import (
	"encoding/json"
	"time"

	"github.com/berth-dev/berth/schema"
)

// History is what the reconciler remembers between decisions: decayed
// usage for fair share and how long each workspace has waited. The
// decision reads it and never mutates it; the reconciler advances it.
type History struct {
	// AppliedRevision is the spec revision the last cycle applied in full,
	// and AppliedAt when; a restarted berth reads them from its store.
	AppliedRevision string    `json:"appliedRevision,omitempty"`
	AppliedAt       time.Time `json:"appliedAt,omitzero"`
	// UsageAt is the time Usage was last decayed to.
	UsageAt time.Time `json:"usageAt"`
	// Usage is decayed GPU-seconds per project as of UsageAt.
	Usage map[string]float64 `json:"usage,omitempty"`
	// QueuedSince is when each workspace that wants to run started
	// waiting; a preempted workspace keeps its original place.
	QueuedSince map[schema.Ref]time.Time `json:"queuedSince,omitempty"`
	// Preempted holds the last preemption of each workspace still waiting
	// to resume.
	Preempted map[schema.Ref]Preemption `json:"preempted,omitempty"`
	// Borrowing records, for each running workspace, how it counts against
	// its project's guaranteed quota, decided when it was admitted: true,
	// it was admitted beyond the quota (borrowing, so a reclaim may take
	// it); false, inside it. A borrower becomes false once in-quota work
	// leaving makes room for it; an in-quota one never becomes true. A
	// workspace that stops, is preempted or waits is forgotten. Running
	// workspaces without an entry (an older history, an allocation berth
	// did not start) are told apart by start order.
	Borrowing map[schema.Ref]bool `json:"borrowing,omitempty"`
	// RunTimes holds how long recent runs that completed took, for the
	// run-time prediction (policies.Predict): under keys "project",
	// "project/owner", "project//N" and "project/owner/N" (N: the GPUs of
	// all its replicas; owner empty when the spec names none), the last
	// policies.RunTimeSamples of each, oldest first. policies.RecordRuns
	// adds to it; nothing else changes it.
	RunTimes map[string][]time.Duration `json:"runTimes,omitempty"`
	// Journal is the reconciler's own memory of each workspace for its
	// status: its recent transitions (behind explain and the dashboard's
	// timeline), the facts of its last run that a resume is measured
	// against, and when it left the specs (the prune delay). The JSON is
	// the reconciler's to write and read; the decision never reads it,
	// and stores keep it as it is. The reconciler bounds its size.
	Journal map[schema.Ref]json.RawMessage `json:"journal,omitempty"`
}

// Preemption records who preempted whom, when and why.
type Preemption struct {
	Victim schema.Ref `json:"victim"`
	By     schema.Ref `json:"by"`
	At     time.Time  `json:"at"`
	Reason string     `json:"reason"`
}
