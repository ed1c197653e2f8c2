package reconcile

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
	"github.com/google/go-cmp/cmp"
)

// page is l's status page after after, of at most limit workspaces
// (DefaultStatusLimit when 0, as GET /api/v1/status lists it), and its
// JSON.
func page(t *testing.T, l *Loop, after schema.Ref, limit int) (view.Status, []byte) {
	t.Helper()
	if limit == 0 {
		limit = view.DefaultStatusLimit
	}
	st := l.StatusPage(after, limit)
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return st, b
}

// loopWith returns a loop that knows n workspaces in 3 projects, every
// fourth Running and the rest Pending.
func loopWith(t *testing.T, n int) *Loop {
	h := newHarness(t, testSets{"r1": withWorkspaces()}, "r1")
	for i := range n {
		ref := schema.Ref{Project: fmt.Sprintf("p%d", i%3), Name: fmt.Sprintf("w%05d", i)}
		st := view.StatePending
		if i%4 == 0 {
			st = view.StateRunning
		}
		h.loop.records[ref] = &record{status: view.WorkspaceStatus{Project: ref.Project, Name: ref.Name, State: st}}
	}
	h.loop.publishModel() // as a cycle ends
	return h.loop
}

// A small tree's status lists every workspace, as before paging; a large
// one's lists DefaultStatusLimit with a cursor, and the pages together
// list each workspace once, in order. The summary always counts all.
func TestStatusPages(t *testing.T) {
	st, _ := page(t, loopWith(t, 7), schema.Ref{}, 0)
	if len(st.Workspaces) != 7 || st.Next != "" {
		t.Errorf("a tree of 7: %d workspaces listed, next %q; want all 7, no next", len(st.Workspaces), st.Next)
	}

	const n = 2*view.DefaultStatusLimit + 500
	l := loopWith(t, n)
	st, body := page(t, l, schema.Ref{}, 0)
	if len(st.Workspaces) != view.DefaultStatusLimit || st.Next == "" {
		t.Fatalf("a tree of %d: %d listed, next %q; want %d and a next", n, len(st.Workspaces), st.Next, view.DefaultStatusLimit)
	}
	t.Logf("first page of %d workspaces: %d bytes", n, len(body))
	want := &view.StatusSummary{Workspaces: n, States: map[view.State]int{view.StateRunning: 625, view.StatePending: 1875}, Projects: []view.ProjectCount{
		{Name: "p0", Workspaces: 834, States: map[view.State]int{view.StateRunning: 209, view.StatePending: 625}},
		{Name: "p1", Workspaces: 833, States: map[view.State]int{view.StateRunning: 208, view.StatePending: 625}},
		{Name: "p2", Workspaces: 833, States: map[view.State]int{view.StateRunning: 208, view.StatePending: 625}},
	}}
	if diff := cmp.Diff(want, st.Summary); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	var all []string
	pages := 0
	for after := (schema.Ref{}); ; {
		pg, _ := page(t, l, after, 700)
		pages++
		for _, w := range pg.Workspaces {
			all = append(all, w.Ref().String())
		}
		if diff := cmp.Diff(want, pg.Summary); diff != "" {
			t.Fatalf("page %d's summary (-want +got):\n%s", pages, diff)
		}
		if pg.Next == "" {
			break
		}
		if pg.Next != all[len(all)-1] {
			t.Fatalf("next %q, want the last listed, %q", pg.Next, all[len(all)-1])
		}
		p, n, _ := strings.Cut(pg.Next, "/")
		after = schema.Ref{Project: p, Name: n}
	}
	var whole []string
	for _, w := range l.Status().Workspaces {
		whole = append(whole, w.Ref().String())
	}
	if pages != 4 || len(whole) != n {
		t.Errorf("%d pages of 700 and %d in the whole status; want 4 and %d", pages, len(whole), n)
	}
	if diff := cmp.Diff(whole, all); diff != "" {
		t.Errorf("the pages together (-whole status +pages):\n%s", diff)
	}
	// A cursor of a workspace gone since lists those after where it was.
	gone, _ := page(t, l, schema.Ref{Project: "p0", Name: "w00001"}, 1)
	if len(gone.Workspaces) != 1 || gone.Workspaces[0].Ref().String() != "p0/w00003" {
		t.Errorf("after p0/w00001: %v, want p0/w00003", gone.Workspaces)
	}
}
