package view

import (
	"slices"
	"time"

	"github.com/berth-dev/berth/schema"
)

// Model is what the loop knows at the end of a cycle, as its readers see
// it: the status of every workspace, the projects, the last cycle, the
// revisions and the dashboard's inputs. The loop builds a new one at the
// end of every cycle and publishes it whole; a published Model is never
// mutated, by the loop or by anyone reading it, so readers need no lock.
// What it shares with the loop (a workspace's GPUs and history, the
// cycle's inputs) the loop never writes again: it replaces, it does not
// edit. The methods return copies a caller may keep and change.
type Model struct {
	// Berth and Cluster are reported in the status.
	Berth, Cluster string
	// Revision is the revision in force (nil before the first);
	// Attempted the last one refused, while it differs from it.
	Revision, Attempted *RevisionStatus
	// LastReconcile is the last completed cycle; LastOK when the last one
	// that succeeded ended, on the loop's clock (zero before the first).
	LastReconcile *CycleStatus
	LastOK        time.Time
	// ObservedAt is the cluster's time at the last observation: the now
	// of the explanations.
	ObservedAt time.Time
	Projects   []ProjectStatus
	// ClusterGPUs are the cluster's GPUs by kind at the last observation
	// (drivers.GPUsByKind), where the specs declare kinds.
	ClusterGPUs []KindCapacity
	// Workspaces are every workspace berth knows, sorted by project, then
	// name; Histories[i] is Workspaces[i]'s history, oldest first.
	Workspaces []WorkspaceStatus
	Histories  [][]Transition
	// Inputs are the last cycle's set, snapshot, decision and history,
	// for the dashboard.
	Inputs Inputs
}

// Page is the status listing the workspaces after after (in project,
// then name order; the zero Ref: from the first), at most limit of them
// (0 or less: all). Next names the last one listed when more follow;
// Summary counts every workspace. Source and Leader are left for the
// caller, who asks them now. The caller owns the copy.
func (m *Model) Page(after schema.Ref, limit int) Status {
	s := Status{Version: APIVersion, Clock: "cluster", Berth: m.Berth, Cluster: m.Cluster,
		Projects: slices.Clone(m.Projects), Workspaces: []WorkspaceStatus{}}
	if s.Projects == nil {
		s.Projects = []ProjectStatus{}
	}
	for i := range s.Projects {
		s.Projects[i].Kinds = slices.Clone(s.Projects[i].Kinds)
	}
	s.ClusterGPUs = slices.Clone(m.ClusterGPUs)
	if m.Revision != nil {
		r := *m.Revision
		s.Revision = &r
	}
	if m.Attempted != nil {
		a := *m.Attempted
		a.Errors = slices.Clone(a.Errors)
		s.Attempted = &a
	}
	if m.LastReconcile != nil {
		c := *m.LastReconcile
		s.LastReconcile = &c
	}
	s.Summary = m.summarize()
	from := 0
	if after != (schema.Ref{}) {
		from, _ = slices.BinarySearchFunc(m.Workspaces, after, func(w WorkspaceStatus, target schema.Ref) int {
			if r := w.Ref(); r.Less(target) || r == target {
				return -1
			}
			return 1
		})
	}
	to := len(m.Workspaces)
	if limit > 0 && from+limit < to {
		to = from + limit
		s.Next = m.Workspaces[to-1].Ref().String()
	}
	for _, w := range m.Workspaces[from:to] {
		s.Workspaces = append(s.Workspaces, w.clone())
	}
	return s
}

// clone is w with nothing shared: its GPUs and what its pointers point
// to are copies.
func (w WorkspaceStatus) clone() WorkspaceStatus {
	w.GPUs = slices.Clone(w.GPUs)
	w.Endpoints = slices.Clone(w.Endpoints)
	if w.PreemptedBy != nil {
		by := *w.PreemptedBy
		w.PreemptedBy = &by
	}
	if w.RunTime != nil {
		rt := *w.RunTime
		w.RunTime = &rt
	}
	if w.LikelyStart != nil {
		ls := *w.LikelyStart
		w.LikelyStart = &ls
	}
	if w.LastEnd != nil {
		e := *w.LastEnd
		w.LastEnd = &e
	}
	if w.GPUUse != nil {
		u := *w.GPUUse
		w.GPUUse = &u
	}
	return w
}

// summarize counts the workspaces.
func (m *Model) summarize() *StatusSummary {
	sum := &StatusSummary{Workspaces: len(m.Workspaces), States: map[State]int{}, Projects: []ProjectCount{}}
	for _, w := range m.Workspaces {
		sum.States[w.State]++
		if n := len(sum.Projects); n == 0 || sum.Projects[n-1].Name != w.Project {
			sum.Projects = append(sum.Projects, ProjectCount{Name: w.Project, States: map[State]int{}})
		}
		p := &sum.Projects[len(sum.Projects)-1]
		p.Workspaces++
		p.States[w.State]++
	}
	return sum
}

// Workspace is one workspace's status, history and explanation (at
// ObservedAt); false when the model has no such workspace. The caller
// owns the copy.
func (m *Model) Workspace(ref schema.Ref) (WorkspaceDetail, bool) {
	i, ok := slices.BinarySearchFunc(m.Workspaces, ref, func(w WorkspaceStatus, target schema.Ref) int { return w.Ref().Compare(target) })
	if !ok {
		return WorkspaceDetail{}, false
	}
	w := m.Workspaces[i].clone()
	h := slices.Clone(m.Histories[i])
	d := WorkspaceDetail{Version: APIVersion, Workspace: w, History: h, Explanation: Explain(w, h, m.ObservedAt)}
	if d.History == nil {
		d.History = []Transition{}
	}
	if d.Explanation == nil {
		d.Explanation = []string{}
	}
	return d, true
}

// News is what one cycle did that the people it concerns may be told
// (package notify sends it): the cycle's timeline events and the
// revision it put in force or refused. The loop hands it over at the end
// of each cycle this replica led, whatever happened in it (a follower's cycles tell nothing: the
// leader tells), after the model is published. It is the loop's own
// record, not a second one: Events are the events the dashboard's feed
// got, Applied and Refused the revisions the status shows. The receiver
// must not mutate it.
type News struct {
	// Events are the cycle's events, oldest first, numbered as the feed
	// numbers them.
	Events []Event
	// Applied is the revision the cycle put in force, once: not again on
	// the next cycle, nor after a restart or a change of leader when it
	// is the one the last leader applied (the history's). Nil otherwise.
	Applied *RevisionStatus
	// Refused is the revision the cycle refused (invalid, or stopping
	// too many workspaces at once), with its errors, on the cycle that
	// first refused it. Nil otherwise.
	Refused *RevisionStatus
	// Model is the read model the cycle published: the specs in force
	// (Inputs.Set), the history and every workspace's status.
	Model *Model
}
