package view

import (
	"encoding/json"
	"math"
	"slices"
	"time"
)

// The event feed (GET /api/v1/events) sends each browser the dashboard's
// whole state once, then one delta per reconcile cycle, in order (Seq
// counts up by one). The loop never waits for a browser: each one has a
// bounded buffer, and one whose buffer is full when a delta is ready is
// dropped (its connection closed); it reconnects and starts again from a
// fresh state.

// Subprotocol is the WebSocket subprotocol of the event feed. A browser
// cannot set an Authorization header on a WebSocket, so it may offer its
// bearer token as a second subprotocol, "bearer." + base64url(token)
// (without padding); the server never selects or echoes that one.
const Subprotocol = "berth.v1"

// Message is one message of the event feed: Type "state" carries State
// (the first message on every connection), "delta" carries Delta, the
// changes since the message before it.
type Message struct {
	Type  string     `json:"type"`
	Seq   uint64     `json:"seq"`
	State *Dashboard `json:"state,omitempty"`
	Delta *Delta     `json:"delta,omitempty"`
}

// Delta is what changed in one cycle. Nodes and Workspaces are the ones
// that changed or appeared (sorted like Dashboard's), Removed… the names
// of those gone; Projects and Queue, when not nil, replace the lists
// whole; Events are the new ones, oldest first. At, Revision, Attempted
// and LastReconcile are always the current values.
type Delta struct {
	At                time.Time         `json:"at"`
	Revision          *RevisionStatus   `json:"revision"`
	Attempted         *RevisionStatus   `json:"attempted,omitempty"`
	LastReconcile     *CycleStatus      `json:"lastReconcile,omitempty"`
	Nodes             []NodeView        `json:"nodes,omitempty"`
	RemovedNodes      []string          `json:"removedNodes,omitempty"`
	Workspaces        []WorkspaceStatus `json:"workspaces,omitempty"`
	RemovedWorkspaces []string          `json:"removedWorkspaces,omitempty"`
	// WorkspacesTotal is always the current count (Dashboard's).
	WorkspacesTotal int            `json:"workspacesTotal"`
	Projects        *[]ProjectView `json:"projects,omitempty"`
	Queue           *[]QueueEntry  `json:"queue,omitempty"`
	// QueueTotal comes with Queue.
	QueueTotal *int    `json:"queueTotal,omitempty"`
	Events     []Event `json:"events,omitempty"`
}

// Diff returns what changed from prev to next (all of next when prev is
// nil), without events.
func Diff(prev, next *Dashboard) *Delta {
	d := &Delta{At: next.At, Revision: next.Revision, Attempted: next.Attempted, LastReconcile: next.LastReconcile, WorkspacesTotal: next.WorkspacesTotal}
	if prev == nil {
		prev = &Dashboard{}
	}
	oldNodes := map[string]*NodeView{}
	for i := range prev.Nodes {
		oldNodes[prev.Nodes[i].Name] = &prev.Nodes[i]
	}
	for i := range next.Nodes {
		n := &next.Nodes[i]
		if o, ok := oldNodes[n.Name]; !ok || !o.equal(n) {
			d.Nodes = append(d.Nodes, *n)
		}
		delete(oldNodes, n.Name)
	}
	for name := range oldNodes {
		d.RemovedNodes = append(d.RemovedNodes, name)
	}
	slices.Sort(d.RemovedNodes)

	oldWS := map[string]*WorkspaceStatus{}
	for i := range prev.Workspaces {
		oldWS[prev.Workspaces[i].Ref().String()] = &prev.Workspaces[i]
	}
	for _, w := range next.Workspaces {
		key := w.Ref().String()
		if o, ok := oldWS[key]; !ok || !sameWorkspace(o, &w) {
			d.Workspaces = append(d.Workspaces, w)
		}
		delete(oldWS, key)
	}
	for key := range oldWS {
		d.RemovedWorkspaces = append(d.RemovedWorkspaces, key)
	}
	slices.Sort(d.RemovedWorkspaces)

	if !sameJSON(prev.Projects, next.Projects) {
		d.Projects = &next.Projects
	}
	if !sameJSON(prev.Queue, next.Queue) || prev.QueueTotal != next.QueueTotal {
		d.Queue, d.QueueTotal = &next.Queue, &next.QueueTotal
	}
	return d
}

// sameWorkspace reports whether two workspace statuses are the same.
func sameWorkspace(a, b *WorkspaceStatus) bool {
	return a.Project == b.Project && a.Name == b.Name && a.State == b.State && a.ReasonKind == b.ReasonKind &&
		a.Reason == b.Reason && a.Node == b.Node && a.GPUKind == b.GPUKind && a.Since.Equal(b.Since) && a.Progress == b.Progress &&
		a.WorkLost == b.WorkLost && a.Revision == b.Revision && a.Decision == b.Decision && slices.Equal(a.GPUs, b.GPUs) &&
		(a.PreemptedBy == nil) == (b.PreemptedBy == nil) && (a.PreemptedBy == nil || *a.PreemptedBy == *b.PreemptedBy) &&
		slices.Equal(a.Endpoints, b.Endpoints) &&
		(a.RunTime == nil) == (b.RunTime == nil) && (a.RunTime == nil || *a.RunTime == *b.RunTime) &&
		(a.LikelyStart == nil) == (b.LikelyStart == nil) && (a.LikelyStart == nil || sameLikely(a.LikelyStart, b.LikelyStart)) &&
		(a.LastEnd == nil) == (b.LastEnd == nil) && (a.LastEnd == nil || sameEnd(a.LastEnd, b.LastEnd)) &&
		sameUse(a.GPUUse, b.GPUUse)
}

// sameUse compares two GPU utilization readings as the dashboard shows
// them: whole percents and the GPUs read, not when they were measured,
// so that a fleet's new readings, every sampling interval, send only the
// workspaces whose figures moved.
func sameUse(a, b *GPUUseStatus) bool {
	if a == nil || b == nil {
		return a == b
	}
	return math.Round(a.MaxPercent) == math.Round(b.MaxPercent) && math.Round(a.MeanPercent) == math.Round(b.MeanPercent) && a.GPUs == b.GPUs
}

// sameEnd compares two ends (their times by Equal).
func sameEnd(a, b *EndStatus) bool {
	x, y := *a, *b
	x.At, y.At = time.Time{}, time.Time{}
	return x == y && a.At.Equal(b.At)
}

// sameLikely compares two likely starts (their times by Equal).
func sameLikely(a, b *LikelyStart) bool {
	return a.Known == b.Known && a.OverdueAt.Equal(b.OverdueAt) && a.Earliest.Equal(b.Earliest) && a.Likely.Equal(b.Likely) && a.Latest.Equal(b.Latest) &&
		a.PastRuns == b.PastRuns && a.Stated == b.Stated && a.UnknownRunning == b.UnknownRunning && a.UnknownAhead == b.UnknownAhead
}

// sameJSON compares two values by their JSON (they are small: a
// workspace, the project list, the queue).
func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
