package notify

import (
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
	"github.com/google/go-cmp/cmp"
)

func route(name string, spec schema.NotificationSpec) schema.Notification {
	if spec.SummarizeAbove == 0 {
		spec.SummarizeAbove = schema.DefaultSummarizeAbove
	}
	return schema.Notification{Meta: schema.Meta{Name: name}, Spec: spec}
}

// TestRoute: a route gets the events it asks for, of the projects and
// owners it names; revision events ignore projects and owners; a route
// that gets none has no batch; above summarizeAbove a batch is a
// summary.
func TestRoute(t *testing.T) {
	ev := func(event, ws, owner string) Event {
		e := Event{Event: event, Workspace: ws, Owner: owner}
		e.Project = refOf(ws).Project
		if ws == "" {
			e.Project = ""
		}
		return e
	}
	events := []Event{
		ev(schema.EventPreempted, "ml/a", "alice"),
		ev(schema.EventFailed, "ml/b", "bob"),
		ev(schema.EventMoved, "cv/c", "alice"),
		ev(schema.EventRevisionApplied, "", ""),
	}
	routes := []schema.Notification{
		route("alice", schema.NotificationSpec{Owners: []string{"alice"}}),
		route("cv-moves", schema.NotificationSpec{Projects: []string{"cv"}, Events: []string{schema.EventMoved}}),
		route("ml", schema.NotificationSpec{Projects: []string{"ml"}, Events: []string{schema.EventFailed, schema.EventPreempted, schema.EventRevisionApplied}}),
		route("nobody", schema.NotificationSpec{Projects: []string{"nlp"}, Events: []string{schema.EventFailed}}),
		route("tight", schema.NotificationSpec{SummarizeAbove: 3}),
	}
	got := map[string][]string{}
	summaries := map[string]*Summary{}
	for _, b := range Route(routes, events) {
		for _, e := range b.Events {
			got[b.Route.Meta.Name] = append(got[b.Route.Meta.Name], e.Event+" "+e.Workspace)
		}
		if b.Summary != nil {
			summaries[b.Route.Meta.Name] = b.Summary
		}
	}
	want := map[string][]string{
		"alice":    {"preempted ml/a", "moved cv/c", "revision-applied "},
		"cv-moves": {"moved cv/c"},
		"ml":       {"preempted ml/a", "failed ml/b", "revision-applied "},
		"tight":    {"preempted ml/a", "failed ml/b", "moved cv/c", "revision-applied "},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("routed (-want +got):\n%s", diff)
	}
	wantSum := map[string]*Summary{"tight": {Total: 4, Listed: 4,
		Events:   map[string]int{"preempted": 1, "failed": 1, "moved": 1, "revision-applied": 1},
		Projects: map[string]int{"ml": 2, "cv": 1}}}
	if diff := cmp.Diff(wantSum, summaries); diff != "" {
		t.Errorf("summaries (-want +got):\n%s", diff)
	}
}

// TestWorkspaceEvents: the timeline's kinds the table names become
// events (with the owner from the specs), the others do not; a stop
// whose end's class is time-limit or idle is that event; overdue waits
// are told once per wait; revisions applied and refused are events.
func TestWorkspaceEvents(t *testing.T) {
	set := &schema.Set{
		Workspaces: []schema.Workspace{
			{Meta: schema.Meta{Name: "a", Project: "ml"}, Spec: schema.WorkspaceSpec{Owner: "alice"}},
			{Meta: schema.Meta{Name: "b", Project: "ml"}},
			{Meta: schema.Meta{Name: "c", Project: "ml"}},
		},
		Policy: schema.DefaultPolicy(),
	}
	set.Policy.Spec.Aging.MaxWait = time.Hour
	queued := at.Add(-50 * time.Minute)
	hist := &drivers.History{QueuedSince: map[schema.Ref]time.Time{{Project: "ml", Name: "c"}: queued}}
	m := &view.Model{ObservedAt: at, Inputs: view.Inputs{Set: set, History: hist},
		Workspaces: []view.WorkspaceStatus{
			{Project: "ml", Name: "a", State: view.StatePreempting},
			{Project: "ml", Name: "b", State: view.StateStopped, LastEnd: &view.EndStatus{Class: "time-limit"}},
			{Project: "ml", Name: "c", State: view.StatePending, Reason: "no free GPU"},
		}}
	tl := func(ws, kind string, to view.State) view.Event {
		return view.Event{Workspace: ws, Project: "ml", Kind: kind, Transition: view.Transition{At: at, To: to}}
	}
	n := &Notifier{overdueTold: map[schema.Ref]time.Time{}}
	news := view.News{Model: m, Events: []view.Event{
		tl("ml/a", "preempted", view.StatePreempting), tl("ml/a", "started", view.StateRunning),
		tl("ml/b", "stopped", view.StateStopped), tl("ml/b", "idle", view.StateStopped),
		tl("ml/a", "resumed", view.StateRunning), tl("ml/a", "moving", view.StateMoving), tl("ml/a", "failed", view.StateFailed),
	}, Applied: &view.RevisionStatus{ID: "r2", LoadedAt: at}}
	names := func(evs []Event) []string {
		var out []string
		for _, e := range evs {
			out = append(out, e.Event+" "+e.Workspace+" "+e.Owner)
		}
		return out
	}
	want := []string{"preempted ml/a alice", "time-limit ml/b ", "idle ml/b ", "resumed ml/a alice", "moved ml/a alice", "failed ml/a alice", "revision-applied  "}
	if diff := cmp.Diff(want, names(n.Events(news))); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// ml/c passes its bound an hour after it queued: told once.
	later := func(d time.Duration) view.News {
		mm := *m
		mm.ObservedAt = at.Add(d)
		return view.News{Model: &mm}
	}
	if got := names(n.Events(later(5 * time.Minute))); len(got) != 0 {
		t.Errorf("before its bound: %v", got)
	}
	if diff := cmp.Diff([]string{"overdue ml/c "}, names(n.Events(later(11*time.Minute)))); diff != "" {
		t.Errorf("past its bound (-want +got):\n%s", diff)
	}
	if got := names(n.Events(later(20 * time.Minute))); len(got) != 0 {
		t.Errorf("told again: %v", got)
	}
	// A new wait (it ran, then queued again) is told again.
	hist.QueuedSince[schema.Ref{Project: "ml", Name: "c"}] = at
	if got := names(n.Events(later(61 * time.Minute))); len(got) != 1 {
		t.Errorf("a second wait: %v", got)
	}
	refused := n.Events(view.News{Model: m, Refused: &view.RevisionStatus{ID: "r3", Errors: []string{"a.yaml:1:1: bad"}}})
	if len(refused) != 1 || refused[0].Event != schema.EventRevisionRefused || refused[0].Errors[0] != "a.yaml:1:1: bad" {
		t.Errorf("refused: %+v", refused)
	}
}
