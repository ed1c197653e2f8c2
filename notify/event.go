package notify

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
)

// Event is one thing that happened, as a receiver reads it: the webhook
// document's events and the lines of a Slack message.
type Event struct {
	// Event is its name (schema.NotifyEvents: preempted, moved, …).
	Event string `json:"event"`
	// At is when it happened, on the cluster's clock.
	At time.Time `json:"at"`
	// Workspace ("project/name"), Project and Owner (its spec.owner) are
	// the workspace's, for a workspace's event.
	Workspace string `json:"workspace,omitempty"`
	Project   string `json:"project,omitempty"`
	Owner     string `json:"owner,omitempty"`
	// State is the workspace's state after it (Preempting, Moving, …).
	State string `json:"state,omitempty"`
	// Reason is why, as berth wrote it in the status.
	Reason string `json:"reason,omitempty"`
	// Next says what happens next.
	Next string `json:"next,omitempty"`
	// Node is where it ran; PreemptedBy the workspace it made room for.
	Node        string `json:"node,omitempty"`
	PreemptedBy string `json:"preemptedBy,omitempty"`
	// GraceSeconds is a preemption's or move's checkpoint grace;
	// AtRiskSeconds the work since the last checkpoint; WaitedSeconds how
	// long an overdue workspace has waited.
	GraceSeconds  float64 `json:"graceSeconds,omitempty"`
	AtRiskSeconds float64 `json:"atRiskSeconds,omitempty"`
	WaitedSeconds float64 `json:"waitedSeconds,omitempty"`
	// Revision is the revision, for a revision's event, with the errors
	// that refused it.
	Revision string   `json:"revision,omitempty"`
	Errors   []string `json:"errors,omitempty"`
	// Seq is the timeline event's number (the dashboard's), 0 for the
	// events the timeline does not show (overdue, revisions).
	Seq uint64 `json:"seq,omitempty"`
}

// kind is what berth says of one event: the verb of a Slack line and
// what happens next.
type kind struct {
	// did follows the workspace's name: "was preempted".
	did string
	// next says what happens next; "" when nothing follows.
	next string
}

// kinds says each event in words. A new event needs a row here, one in
// timelineKinds or endClasses (where it comes from), and its name in
// schema.NotifyEvents and the schema's spec.events.
var kinds = map[string]kind{
	schema.EventPreempted:       {did: "was preempted", next: "it has its checkpoint grace to save its work, then waits in the queue and resumes from its checkpoint when GPUs free up"},
	schema.EventMoved:           {did: "is moving", next: "it is stopped with its checkpoint grace and starts again elsewhere, keeping its place in the queue"},
	schema.EventFailed:          {did: "failed", next: "berth does not start it again until its spec changes (or it is set Stopped, then Running); berth explain says why it failed"},
	schema.EventResumed:         {did: "resumed", next: "it runs"},
	schema.EventOverdue:         {did: "has waited past its wait bound", next: "berth reserves GPUs for the oldest overdue workspace first; berth explain says what it waits for"},
	schema.EventTimeLimit:       {did: "was stopped at its time limit", next: "it does not run again until its spec changes"},
	schema.EventIdle:            {did: "was stopped: its GPUs were idle", next: "it does not run again until its spec changes"},
	schema.EventRevisionApplied: {did: "is in force", next: "berth applies it to the cluster"},
	schema.EventRevisionRefused: {did: "was refused", next: "the revision in force stays until a fixed one is pushed"},
}

// timelineKinds maps the timeline's event kinds (view.Event.Kind) to the
// events a route may ask for; a kind not here is not told (started,
// vacated, pending, …).
var timelineKinds = map[string]string{
	"preempted":  schema.EventPreempted,
	"moving":     schema.EventMoved,
	"failed":     schema.EventFailed,
	"resumed":    schema.EventResumed,
	"time-limit": schema.EventTimeLimit,
	"idle":       schema.EventIdle,
}

// endClasses maps how a run ended (view.EndStatus.Class) to an event, for
// a workspace that stopped or failed with that class when the timeline's
// kind says no more ("stopped").
var endClasses = map[string]string{
	"time-limit": schema.EventTimeLimit,
	"idle":       schema.EventIdle,
}

// workspaceEvent is the event a timeline event tells, from the cycle's
// model m (the owner, the end's class); false when it tells none.
func workspaceEvent(e view.Event, m *view.Model) (Event, bool) {
	name, ok := timelineKinds[e.Kind]
	ref := refOf(e.Workspace)
	var ws *view.WorkspaceStatus
	if m != nil {
		if d, found := workspaceIn(m, ref); found {
			ws = d
		}
	}
	if !ok && ws != nil && ws.LastEnd != nil && (e.To == view.StateStopped || e.To == view.StateFailed || e.To == view.StateCompleted) {
		name, ok = endClasses[ws.LastEnd.Class]
	}
	if !ok {
		return Event{}, false
	}
	out := Event{Event: name, At: e.At, Workspace: e.Workspace, Project: e.Project, State: string(e.To), Reason: e.Reason,
		Next: kinds[name].next, Node: e.Node, GraceSeconds: float64(e.Grace), AtRiskSeconds: float64(e.AtRisk), Seq: e.Seq}
	if e.PreemptedBy != nil {
		out.PreemptedBy = e.PreemptedBy.String()
	}
	if name == schema.EventIdle && e.To == view.StateRunning {
		out.Next = "it runs on: its idle rule only reports; stop it, or put its GPUs to work, to free them for others"
	}
	if name == schema.EventPreempted && e.Grace > 0 {
		out.Next = fmt.Sprintf("it has %s to checkpoint, then waits in the queue and resumes from its checkpoint when GPUs free up", text.Duration(e.Grace.D()))
	}
	if m != nil && m.Inputs.Set != nil {
		if w := m.Inputs.Set.Workspace(ref); w != nil {
			out.Owner = w.Spec.Owner
		}
	}
	return out, true
}

// didOf says what happened to e's workspace, in words: its kind's, but
// for idle GPUs an idle rule only reports (the workspace runs on).
func didOf(e Event) string {
	if e.Event == schema.EventIdle && e.State == string(view.StateRunning) {
		return "has had idle GPUs"
	}
	return kinds[e.Event].did
}

// refOf parses "project/name".
func refOf(s string) schema.Ref {
	p, n, _ := strings.Cut(s, "/")
	return schema.Ref{Project: p, Name: n}
}

// workspaceIn finds ref's status in m without copying the model.
func workspaceIn(m *view.Model, ref schema.Ref) (*view.WorkspaceStatus, bool) {
	i, ok := slices.BinarySearchFunc(m.Workspaces, ref, func(w view.WorkspaceStatus, r schema.Ref) int { return w.Ref().Compare(r) })
	if !ok {
		return nil, false
	}
	return &m.Workspaces[i], true
}

// revisionEvents are the events of the revisions n tells of.
func revisionEvents(n view.News) []Event {
	var out []Event
	if r := n.Applied; r != nil {
		out = append(out, Event{Event: schema.EventRevisionApplied, At: r.LoadedAt, Revision: r.ID, Next: kinds[schema.EventRevisionApplied].next})
	}
	if r := n.Refused; r != nil {
		next := kinds[schema.EventRevisionRefused].next
		if n.Model != nil && n.Model.Revision != nil {
			next = fmt.Sprintf("revision %s stays in force until a fixed one is pushed", n.Model.Revision.ID)
		}
		out = append(out, Event{Event: schema.EventRevisionRefused, At: r.LoadedAt, Revision: r.ID, Errors: slices.Clone(r.Errors), Next: next})
	}
	return out
}

// waiting are the states of a workspace that waits to run.
func waiting(s view.State) bool { return s == view.StatePending || s == view.StatePreempted }

// overdue finds the workspaces of m whose wait passed the policy's
// aging.maxWait, once per wait: told maps each workspace told of to the
// start of the wait it was told of, and is updated (forgetting those no
// longer waiting). Sorted as m's workspaces are.
func overdue(m *view.Model, told map[schema.Ref]time.Time) []Event {
	if m == nil || m.Inputs.Set == nil || m.Inputs.History == nil {
		return nil
	}
	maxWait := m.Inputs.Set.Policy.Spec.Aging.MaxWait
	queued := m.Inputs.History.QueuedSince
	for ref, since := range told {
		if q, ok := queued[ref]; !ok || !q.Equal(since) {
			delete(told, ref)
		}
	}
	if maxWait <= 0 {
		return nil
	}
	var out []Event
	for i := range m.Workspaces {
		w := &m.Workspaces[i]
		if !waiting(w.State) {
			continue
		}
		ref := w.Ref()
		since, ok := queued[ref]
		if !ok || m.ObservedAt.Sub(since) < maxWait {
			continue
		}
		if t, done := told[ref]; done && t.Equal(since) {
			continue
		}
		told[ref] = since
		e := Event{Event: schema.EventOverdue, At: since.Add(maxWait), Workspace: ref.String(), Project: ref.Project, State: string(w.State),
			WaitedSeconds: m.ObservedAt.Sub(since).Seconds(), Next: kinds[schema.EventOverdue].next}
		if s := m.Inputs.Set.Workspace(ref); s != nil {
			e.Owner = s.Spec.Owner
		}
		e.Reason = fmt.Sprintf("waiting since %s, past aging.maxWait (%s)", since.UTC().Format(time.RFC3339), text.Duration(maxWait))
		if w.Reason != "" {
			e.Reason += ": " + w.Reason
		}
		out = append(out, e)
	}
	return out
}
