package view

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/policies"
	"github.com/berth-dev/berth/schema"
)

// Dashboard is everything the live dashboard shows, as one document: the
// first message of GET /api/v1/events. Nodes are sorted by name, their
// GPUs by index; Projects by name; Workspaces by project, then name; Queue
// in decision order; Events oldest first.
type Dashboard struct {
	Version string `json:"version"`
	Berth   string `json:"berth,omitempty"`
	Cluster string `json:"cluster,omitempty"`
	// At is the cluster's clock at the last observation.
	At            time.Time       `json:"at"`
	Revision      *RevisionStatus `json:"revision"`
	Attempted     *RevisionStatus `json:"attempted,omitempty"`
	LastReconcile *CycleStatus    `json:"lastReconcile,omitempty"`
	Nodes         []NodeView      `json:"nodes"`
	Projects      []ProjectView   `json:"projects"`
	// Workspaces are every workspace while there are at most
	// DashboardAll; beyond, per project the DashboardChips the page shows
	// (those that need attention first) and every one that holds GPUs.
	// WorkspacesTotal counts them all.
	Workspaces      []WorkspaceStatus `json:"workspaces"`
	WorkspacesTotal int               `json:"workspacesTotal"`
	// Queue is the first DashboardQueue of those waiting, in decision
	// order; QueueTotal counts them all.
	Queue      []QueueEntry `json:"queue"`
	QueueTotal int          `json:"queueTotal"`
	Events     []Event      `json:"events"`
}

// Bounds of the dashboard's state, so that a tree of 100,000 workspaces
// does not make a first message of tens of MB (the counts stay whole).
const (
	// DashboardAll: up to this many workspaces, all are sent.
	DashboardAll = 2000
	// DashboardChips is how many workspaces of each project the page
	// shows (app.js's MAX_CHIPS).
	DashboardChips = 18
	// DashboardQueue is how many waiting workspaces are sent.
	DashboardQueue = 500
	// DashboardWaiting is how many names of a project's waiting
	// workspaces are sent.
	DashboardWaiting = 20
)

// NodeView is one node as the cluster view draws it.
type NodeView struct {
	Name     string `json:"name"`
	Pool     string `json:"pool,omitempty"`
	Ready    bool   `json:"ready"`
	Eligible bool   `json:"eligible"`
	// TopologyGuessed: the driver assumed one NVLink domain and NUMA node.
	TopologyGuessed bool      `json:"topologyGuessed,omitempty"`
	GPUs            []GPUView `json:"gpus"`
}

// GPUView is one GPU and who holds it.
type GPUView struct {
	ID      string `json:"id"`
	Index   int    `json:"index"`
	Model   string `json:"model"`
	Domain  int    `json:"domain"`
	NUMA    int    `json:"numa"`
	Healthy bool   `json:"healthy"`
	// HeldBy names the job berth does not own that holds it (then not
	// Healthy, though the device may be).
	HeldBy string `json:"heldBy,omitempty"`
	// Workspace holds it ("project/name"); empty when idle. Phase is the
	// holding allocation's phase: starting, running or stopping.
	Workspace string `json:"workspace,omitempty"`
	Project   string `json:"project,omitempty"`
	Phase     string `json:"phase,omitempty"`
}

func (g GPUView) equal(o GPUView) bool { return g == o }

func (n *NodeView) equal(o *NodeView) bool {
	return n.Name == o.Name && n.Pool == o.Pool && n.Ready == o.Ready && n.Eligible == o.Eligible &&
		n.TopologyGuessed == o.TopologyGuessed && slices.EqualFunc(n.GPUs, o.GPUs, GPUView.equal)
}

// ProjectView is a project's standing with its weight and the workspaces
// that wait (pending or preempted, in decision order).
type ProjectView struct {
	ProjectStatus
	Weight float64 `json:"weight"`
	// Waiting names the first DashboardWaiting of its waiting workspaces;
	// WaitingTotal counts them all.
	Waiting      []string `json:"waiting"`
	WaitingTotal int      `json:"waitingTotal"`
	// States counts all its workspaces per state.
	States map[State]int `json:"states"`
}

// QueueEntry is one workspace that wants to run and holds no GPUs.
type QueueEntry struct {
	Workspace string `json:"workspace"`
	Project   string `json:"project"`
	// Position is its place in the order the last decision considered the
	// waiting workspaces (1 first); 0 when the decision did not queue it.
	Position   int    `json:"position"`
	State      State  `json:"state"`
	ReasonKind string `json:"reasonKind,omitempty"`
	Reason     string `json:"reason,omitempty"`
	// GPUs is what it needs, over all its replicas.
	GPUs int    `json:"gpus"`
	Tier string `json:"tier,omitempty"`
	// QueuedSince is when it started waiting.
	QueuedSince time.Time `json:"queuedSince,omitzero"`
	// EstimatedStart is when berth expects it to start, where it can
	// tell: the victims it waits for are gone by the end of their grace
	// period, or else its likely start (WorkspaceStatus.LikelyStart: from
	// the run times predicted for what runs and what is ahead of it).
	// Nil: berth cannot estimate it (Estimate says why, when it knows).
	EstimatedStart *time.Time `json:"estimatedStart,omitempty"`
	// Estimate says how EstimatedStart was reached.
	Estimate string `json:"estimate,omitempty"`
}

// Event is one workspace transition on the dashboard's timeline.
type Event struct {
	// Seq numbers events from 1, in the order berth recorded them.
	Seq       uint64 `json:"seq"`
	Workspace string `json:"workspace"`
	Project   string `json:"project"`
	// Kind is what happened in a word: started, resumed, preempted (the
	// checkpoint signal was sent), vacated (its GPUs are free), stopped,
	// failed, or the new state in lower case (starting, pending, …).
	Kind string `json:"kind"`
	Transition
	// AtRisk is, for a preemption, the work done since the victim's last
	// checkpoint (what it loses unless it checkpoints within Grace).
	AtRisk Seconds `json:"atRiskSeconds,omitempty"`
	Grace  Seconds `json:"graceSeconds,omitempty"`
}

// eventKind names a transition for the timeline.
func eventKind(t Transition) string {
	switch t.To {
	case StateRunning:
		switch {
		case strings.HasPrefix(t.Reason, "resumed"):
			return "resumed"
		case t.From == StateRunning && strings.HasPrefix(t.Reason, "idle:"):
			return "idle" // an idle rule that only reports
		}
		return "started"
	case StatePreempting:
		return "preempted"
	case StateMoving:
		return "moving"
	case StatePreempted:
		return "vacated"
	case StateStopped:
		// A limit's stop (policies' limits.go writes these reasons).
		switch {
		case strings.HasPrefix(t.Reason, "time limit:"):
			return "time-limit"
		case strings.HasPrefix(t.Reason, "idle:"):
			return "idle"
		}
	}
	return strings.ToLower(string(t.To))
}

// Inputs are what a cycle saw and decided, kept for the dashboard: the
// set in force, the snapshot, the decision and the history (nil: not
// known yet). Whoever keeps one never mutates what it points to.
type Inputs struct {
	Set      *schema.Set
	Snapshot *drivers.Snapshot
	Decision *policies.Decision
	History  *drivers.History
}

// Events turns a cycle's transitions into timeline events (without
// Seq), with what is at risk and the grace of a preemption or a move
// from the cycle's inputs v. The events share nothing with ts.
func Events(ts []WorkspaceTransition, v Inputs) []Event {
	if len(ts) == 0 {
		return nil
	}
	out := make([]Event, 0, len(ts))
	for _, t := range ts {
		e := Event{Workspace: t.Workspace.String(), Project: t.Workspace.Project, Kind: eventKind(t.Transition), Transition: t.Transition}
		e.GPUs = slices.Clone(e.GPUs)
		if (t.To == StatePreempting || t.To == StateMoving) && v.Snapshot != nil {
			for _, a := range v.Snapshot.Allocs {
				if a.Workspace != t.Workspace {
					continue
				}
				since := a.StartedAt
				if a.LastCheckpoint.After(since) {
					since = a.LastCheckpoint
				}
				e.AtRisk = max(e.AtRisk, Seconds(t.At.Sub(since)))
			}
			if v.Set != nil {
				if w := v.Set.Workspace(t.Workspace); w != nil {
					e.Grace = Seconds(w.Spec.Checkpoint.GracePeriod)
				}
			}
		}
		out = append(out, e)
	}
	return out
}

// NewDashboard is the dashboard document of the status st (every
// workspace) and the cycle's inputs v, with events (oldest first) as
// given. It shares st's slices and events.
func NewDashboard(st Status, v Inputs, events []Event) Dashboard {
	d := Dashboard{Version: APIVersion, Berth: st.Berth, Cluster: st.Cluster, Revision: st.Revision, Attempted: st.Attempted,
		LastReconcile: st.LastReconcile, Workspaces: st.Workspaces, Nodes: []NodeView{}, Projects: []ProjectView{},
		Queue: []QueueEntry{}, Events: events}
	if d.Events == nil {
		d.Events = []Event{}
	}
	if v.Snapshot != nil {
		d.At = v.Snapshot.ObservedAt
		d.Nodes = nodeViews(v.Snapshot)
	}
	d.Queue = queue(st.Workspaces, v)
	d.WorkspacesTotal, d.QueueTotal = len(st.Workspaces), len(d.Queue)
	waiting := map[string][]string{}
	for _, q := range d.Queue {
		waiting[q.Project] = append(waiting[q.Project], q.Workspace)
	}
	states := map[string]map[State]int{}
	for _, pc := range st.Summary.Projects {
		states[pc.Name] = pc.States
	}
	for _, p := range st.Projects {
		w := waiting[p.Name]
		pv := ProjectView{ProjectStatus: p, Weight: 1, Waiting: w[:min(len(w), DashboardWaiting)], WaitingTotal: len(w), States: states[p.Name]}
		if v.Set != nil {
			if sp := v.Set.Project(p.Name); sp != nil {
				pv.Weight = policies.Weight(*sp)
			}
		}
		if pv.Waiting == nil {
			pv.Waiting = []string{}
		}
		if pv.States == nil {
			pv.States = map[State]int{}
		}
		d.Projects = append(d.Projects, pv)
	}
	if len(d.Queue) > DashboardQueue {
		d.Queue = d.Queue[:DashboardQueue]
	}
	if len(d.Workspaces) > DashboardAll {
		d.Workspaces = trimWorkspaces(d.Workspaces)
	}
	return d
}

// stateOrder is the order in which the page shows a project's workspaces
// (app.js's STATE_ORDER): those that need attention first.
var stateOrder = map[State]int{StateFailed: 0, StatePreempting: 1, StateMoving: 1, StatePreempted: 2, StatePending: 3, StateStarting: 4, StateRunning: 5, StateStopped: 6}

// trimWorkspaces keeps of ws (sorted by project, then name) what the page
// shows: per project the first DashboardChips in stateOrder, and every
// workspace that holds GPUs (the cluster view names them). The result
// keeps ws's order.
func trimWorkspaces(ws []WorkspaceStatus) []WorkspaceStatus {
	keep := make([]bool, len(ws))
	for from := 0; from < len(ws); {
		to := from
		for to < len(ws) && ws[to].Project == ws[from].Project {
			to++
		}
		idx := make([]int, 0, to-from)
		for i := from; i < to; i++ {
			idx = append(idx, i)
			keep[i] = len(ws[i].GPUs) > 0
		}
		slices.SortStableFunc(idx, func(a, b int) int {
			oa, ok := stateOrder[ws[a].State]
			if !ok {
				oa = 9
			}
			ob, ok := stateOrder[ws[b].State]
			if !ok {
				ob = 9
			}
			return oa - ob
		})
		for _, i := range idx[:min(len(idx), DashboardChips)] {
			keep[i] = true
		}
		from = to
	}
	out := []WorkspaceStatus{}
	for i, k := range keep {
		if k {
			out = append(out, ws[i])
		}
	}
	return out
}

// nodeViews draws snap's nodes with the workspace holding each GPU.
func nodeViews(snap *drivers.Snapshot) []NodeView {
	type holder struct {
		ref   schema.Ref
		phase drivers.AllocPhase
	}
	held := map[string]holder{} // node + "\x00" + GPU ID
	for _, a := range snap.Allocs {
		for _, g := range a.GPUs {
			held[a.Node+"\x00"+g] = holder{a.Workspace, a.Phase}
		}
	}
	out := make([]NodeView, 0, len(snap.Nodes))
	for _, n := range snap.Nodes {
		nv := NodeView{Name: n.Name, Pool: n.Pool, Ready: n.Ready, Eligible: n.Eligible, TopologyGuessed: n.TopologyGuessed,
			GPUs: make([]GPUView, 0, len(n.GPUs))}
		for _, g := range n.GPUs {
			gv := GPUView{ID: g.ID, Index: g.Index, Model: g.Model, Domain: g.Domain, NUMA: g.NUMA, Healthy: g.Healthy, HeldBy: g.HeldBy}
			if h, ok := held[n.Name+"\x00"+g.ID]; ok {
				gv.Workspace, gv.Project, gv.Phase = h.ref.String(), h.ref.Project, h.phase.String()
			}
			nv.GPUs = append(nv.GPUs, gv)
		}
		out = append(out, nv)
	}
	slices.SortFunc(out, func(a, b NodeView) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// queue lists the workspaces that want to run and hold no GPUs (Pending,
// Preempted, Failed waiting to restart), in the last decision's order.
func queue(ws []WorkspaceStatus, v Inputs) []QueueEntry {
	decisions := map[schema.Ref]*policies.WorkspaceDecision{}
	if v.Decision != nil {
		for i := range v.Decision.Workspaces {
			decisions[v.Decision.Workspaces[i].Ref] = &v.Decision.Workspaces[i]
		}
	}
	out := []QueueEntry{}
	for _, w := range ws {
		if w.State != StatePending && w.State != StatePreempted && w.State != StateFailed || w.ReasonKind == ReasonExited {
			continue
		}
		ref := w.Ref()
		var spec *schema.Workspace
		if v.Set != nil {
			spec = v.Set.Workspace(ref)
		}
		if spec == nil || spec.Spec.State != schema.DesiredRunning {
			continue
		}
		q := QueueEntry{Workspace: ref.String(), Project: ref.Project, State: w.State, ReasonKind: w.ReasonKind, Reason: w.Reason,
			GPUs: spec.Spec.Resources.GPUs * max(spec.Spec.Replicas, 1)}
		if t := v.Set.TierFor(spec); t != nil {
			q.Tier = t.Meta.Name
		}
		if v.History != nil {
			q.QueuedSince = v.History.QueuedSince[ref]
		}
		if d := decisions[ref]; d != nil {
			q.Position = d.Queue
			if d.Verdict == policies.VerdictStart && len(d.Preempts) > 0 {
				q.EstimatedStart, q.Estimate = victimsGone(d.Preempts, v)
			}
		}
		if l := w.LikelyStart; q.EstimatedStart == nil && l != nil {
			q.Estimate = likelyEstimate(l)
			if l.Known {
				at := l.Likely
				q.EstimatedStart = &at
			}
		}
		out = append(out, q)
	}
	slices.SortStableFunc(out, func(a, b QueueEntry) int {
		// Decided positions first, in order; the rest by name (already).
		switch {
		case a.Position == 0 && b.Position == 0:
			return 0
		case a.Position == 0:
			return 1
		case b.Position == 0:
			return -1
		}
		return cmp.Compare(a.Position, b.Position)
	})
	return out
}

// likelyEstimate says how a likely start was reached, for the queue's
// estimate (times on the cluster's clock).
func likelyEstimate(l *LikelyStart) string {
	s := likelyAt(l)
	if !l.OverdueAt.IsZero() {
		s += "; overdue at " + l.OverdueAt.UTC().Format("Jan 2 15:04")
	}
	return s
}

// likelyAt is likelyEstimate without the wait bound's clause.
func likelyAt(l *LikelyStart) string {
	if !l.Known {
		return l.estimate(time.Time{})
	}
	at := func(t time.Time) string { return t.UTC().Format("15:04") }
	s := "likely at " + at(l.Likely)
	if !l.Earliest.Equal(l.Latest) {
		s = "likely " + at(l.Earliest) + "–" + at(l.Latest)
	}
	switch {
	case l.PastRuns > 0 && l.Stated > 0:
		s += fmt.Sprintf(", from %s and %s", text.Plural(l.PastRuns, "past run"), text.Plural(l.Stated, "stated duration"))
	case l.PastRuns > 0:
		s += ", from " + text.Plural(l.PastRuns, "past run")
	case l.Stated > 0:
		s += ", from " + text.Plural(l.Stated, "stated duration")
	}
	return s
}

// victimsGone estimates when the victims a start waits for are gone: the
// end of the last one's grace period after its checkpoint signal.
func victimsGone(victims []schema.Ref, v Inputs) (*time.Time, string) {
	var latest time.Time
	for _, r := range victims {
		if v.History == nil || v.Set == nil {
			return nil, ""
		}
		p, ok := v.History.Preempted[r]
		w := v.Set.Workspace(r)
		if !ok || w == nil {
			return nil, ""
		}
		if end := p.At.Add(w.Spec.Checkpoint.GracePeriod); end.After(latest) {
			latest = end
		}
	}
	if latest.IsZero() {
		return nil, ""
	}
	names := make([]string, len(victims))
	for i, r := range victims {
		names[i] = r.String()
	}
	if len(names) == 1 {
		return &latest, "once " + names[0] + " ends its grace period"
	}
	return &latest, "once " + strings.Join(names, ", ") + " end their grace periods"
}
