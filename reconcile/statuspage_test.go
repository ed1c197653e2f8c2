package reconcile

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/berth-dev/berth/schema"
	"github.com/google/go-cmp/cmp"
)

// statusOf GETs path from h and decodes the status, checking the code.
func statusOf(t *testing.T, h http.Handler, path string, code int) (Status, []byte) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code != code {
		t.Fatalf("GET %s: %d, want %d: %s", path, rec.Code, code, rec.Body)
	}
	var st Status
	if code == http.StatusOK {
		if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
			t.Fatal(err)
		}
	}
	return st, rec.Body.Bytes()
}

// loopWith returns a loop that knows n workspaces in 3 projects, every
// fourth Running and the rest Pending.
func loopWith(t *testing.T, n int) *Loop {
	h := newHarness(t, testSets{"r1": withWorkspaces()}, "r1")
	for i := range n {
		ref := schema.Ref{Project: fmt.Sprintf("p%d", i%3), Name: fmt.Sprintf("w%05d", i)}
		st := StatePending
		if i%4 == 0 {
			st = StateRunning
		}
		h.loop.records[ref] = &record{status: WorkspaceStatus{Project: ref.Project, Name: ref.Name, State: st}}
	}
	return h.loop
}

// A small tree's status lists every workspace, as before paging; a large
// one's lists DefaultStatusLimit with a cursor, and the pages together
// list each workspace once, in order. The summary always counts all.
func TestStatusPages(t *testing.T) {
	small := loopWith(t, 7).Handler()
	st, _ := statusOf(t, small, "/api/v1/status", http.StatusOK)
	if len(st.Workspaces) != 7 || st.Next != "" {
		t.Errorf("a tree of 7: %d workspaces listed, next %q; want all 7, no next", len(st.Workspaces), st.Next)
	}

	const n = 2*DefaultStatusLimit + 500
	l := loopWith(t, n)
	h := l.Handler()
	st, body := statusOf(t, h, "/api/v1/status", http.StatusOK)
	if len(st.Workspaces) != DefaultStatusLimit || st.Next == "" {
		t.Fatalf("a tree of %d: %d listed, next %q; want %d and a next", n, len(st.Workspaces), st.Next, DefaultStatusLimit)
	}
	t.Logf("first page of %d workspaces: %d bytes", n, len(body))
	want := &StatusSummary{Workspaces: n, States: map[State]int{StateRunning: 625, StatePending: 1875}, Projects: []ProjectCount{
		{Name: "p0", Workspaces: 834, States: map[State]int{StateRunning: 209, StatePending: 625}},
		{Name: "p1", Workspaces: 833, States: map[State]int{StateRunning: 208, StatePending: 625}},
		{Name: "p2", Workspaces: 833, States: map[State]int{StateRunning: 208, StatePending: 625}},
	}}
	if diff := cmp.Diff(want, st.Summary); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	var all []string
	pages := 0
	for path := "/api/v1/status?limit=700"; ; {
		page, _ := statusOf(t, h, path, http.StatusOK)
		pages++
		for _, w := range page.Workspaces {
			all = append(all, w.Ref().String())
		}
		if diff := cmp.Diff(want, page.Summary); diff != "" {
			t.Fatalf("page %d's summary (-want +got):\n%s", pages, diff)
		}
		if page.Next == "" {
			break
		}
		if page.Next != all[len(all)-1] {
			t.Fatalf("next %q, want the last listed, %q", page.Next, all[len(all)-1])
		}
		path = "/api/v1/status?limit=700&after=" + page.Next
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
	page, _ := statusOf(t, h, "/api/v1/status?limit=1&after=p0/w00001", http.StatusOK)
	if len(page.Workspaces) != 1 || page.Workspaces[0].Ref().String() != "p0/w00003" {
		t.Errorf("after p0/w00001: %v, want p0/w00003", page.Workspaces)
	}

	for path, msg := range map[string]string{
		"/api/v1/status?limit=0":      `limit "0": want a number of workspaces from 1 to 10000`,
		"/api/v1/status?limit=10001":  `limit "10001": want a number of workspaces from 1 to 10000`,
		"/api/v1/status?limit=many":   `limit "many": want a number of workspaces from 1 to 10000`,
		"/api/v1/status?after=p0":     `after "p0": want PROJECT/NAME, the next of the page before`,
		"/api/v1/status?after=p0/a/b": `after "p0/a/b": want PROJECT/NAME, the next of the page before`,
	} {
		_, body := statusOf(t, h, path, http.StatusBadRequest)
		var e struct{ Version, Error string }
		json.Unmarshal(body, &e)
		if e.Error != msg || e.Version != APIVersion {
			t.Errorf("GET %s: %s, want the error %q", path, body, msg)
		}
	}
}
