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
	// Ran is, for each workspace with a time limit (schema.Set.MaxRuntime)
	// that has run, how long it ran with one spec up to UsageAt, over all
	// its runs: preemptions, moves and berth's own restarts do not reset
	// it; a run of another spec does, and so do leaving the specs or
	// being set Stopped. policies.AdvanceHistory keeps it.
	Ran map[schema.Ref]RunTime `json:"ran,omitempty"`
	// Idle is, for each running workspace with an idle rule
	// (schema.Set.Idle) whose every GPU read idle in the last readings,
	// when the run of idle readings began and the last of them.
	// policies.AdvanceHistory keeps it; a busy reading, or the workspace
	// no longer running, drops it.
	Idle map[schema.Ref]IdleSpan `json:"idle,omitempty"`
	// Ended records the workspaces berth stopped for good with the spec
	// they had: idle (EndIdle). They do not run again while their spec's
	// fingerprint is SpecHash; policies.RecordDecision keeps it.
	Ended map[schema.Ref]Ended `json:"ended,omitempty"`
}

// RunTime is how long a workspace ran with the spec of fingerprint
// SpecHash (empty: a driver that does not know it).
type RunTime struct {
	SpecHash string        `json:"specHash,omitempty"`
	Ran      time.Duration `json:"ran"`
	// At is the time Ran counts up to; zero: the history's UsageAt (the
	// loop's, which advances every record with it). A record of runs that
	// ended (the replay's) is of their last end.
	At time.Time `json:"at,omitzero"`
}

// IdleSpan is a run of idle readings of a workspace's GPUs: the first
// (Since) and the last (Last).
type IdleSpan struct {
	Since time.Time `json:"since"`
	Last  time.Time `json:"last"`
}

// Ended is a workspace berth stopped for good: how (Class), when, with
// which spec (its fingerprint), and why, in a sentence.
type Ended struct {
	Class    EndClass  `json:"class"`
	At       time.Time `json:"at"`
	SpecHash string    `json:"specHash"`
	Reason   string    `json:"reason"`
}

// Preemption records who preempted whom, when and why.
type Preemption struct {
	Victim schema.Ref `json:"victim"`
	By     schema.Ref `json:"by"`
	At     time.Time  `json:"at"`
	Reason string     `json:"reason"`
}
