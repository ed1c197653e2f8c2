package reconcile

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/berth-dev/berth/source"
	"github.com/berth-dev/berth/view"
)

// record is the loop's memory of one workspace.
type record struct {
	status  view.WorkspaceStatus
	history []view.Transition
	// lastProgress is the progress last observed while it held GPUs.
	lastProgress time.Duration
	// gone: it held no GPUs at the last observation after holding some,
	// so the next run seen is a resume (work lost is measured then).
	gone bool
	// held: the last observation showed it holding GPUs.
	held bool
	// resumed is the note for its next Running transition after a resume.
	resumed string
	// faults counts its runs in a row that ended by the node's fault
	// (ends.go); endSeen: its last end is counted (it has held nothing
	// since).
	faults  int
	endSeen bool
	// idleTold: its idle rule, which only reports, has said so in this
	// run (a Running → Running transition, once: the timeline's and the
	// notifications' "idle").
	idleTold bool
	// journal is its last journal encoding and journalSig what it was
	// made from (journal.go).
	journal    json.RawMessage
	journalSig journalSig
}

// sourceStatus asks the source for its status, when it has one, and
// fills in the revisions the loop applied and refused, as m has them.
func (l *Loop) sourceStatus(m *view.Model) *source.Status {
	gs, ok := l.cfg.Source.(source.Reporter)
	if !ok {
		return nil
	}
	st := gs.SourceStatus()
	if m.Revision != nil {
		st.LastAppliedRevision = gs.FullRevision(m.Revision.ID)
	}
	if m.Attempted != nil && gs.FullRevision(m.Attempted.ID) == st.LastAttemptedRevision {
		st.LastAttemptErrors = slices.Clone(m.Attempted.Errors)
	}
	if st.FetchError != "" {
		st.LastAttemptErrors = append(st.LastAttemptErrors, st.FetchError)
	}
	return &st
}
