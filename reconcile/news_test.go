package reconcile

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
	"github.com/google/go-cmp/cmp"
)

// newsOf summarizes what the loop told: per cycle, the revision applied
// ("+ID"), refused ("!ID") and the events ("project/name kind").
func newsOf(n view.News) []string {
	var out []string
	if n.Applied != nil {
		out = append(out, "+"+n.Applied.ID)
	}
	if n.Refused != nil {
		out = append(out, "!"+n.Refused.ID)
	}
	for _, e := range n.Events {
		out = append(out, e.Workspace+" "+e.Kind)
	}
	return out
}

// TestNews: the loop tells Config.News what a cycle did: a revision put
// in force once (not again on the next cycle, nor after a restart that
// finds it applied in the history), a refused one once, with its errors,
// and the events numbered as the feed numbers them, with the model (a
// cycle where nothing happened too: a wait passes its bound with the
// clock alone); a follower tells nothing.
func TestNews(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sets := testSets{"r1": withWorkspaces(workspace("med", "train", schema.DesiredRunning))}
		h := newHarness(t, sets, "r1")
		var told [][]string
		var last view.News
		h.loop.cfg.News = func(n view.News) {
			if n.Model == nil {
				t.Error("told without the model")
			}
			if s := newsOf(n); len(s) > 0 {
				told = append(told, s)
				last = n
			}
		}
		ctx := t.Context()
		once := func() {
			t.Helper()
			if _, err := h.loop.Once(ctx); err != nil {
				t.Fatal(err)
			}
			h.sleep(10 * time.Second)
		}
		once() // r1 in force, train starting
		once() // train running
		once() // nothing happens
		h.source.set("r2-broken")
		once()
		if last.Refused == nil || len(last.Refused.Errors) != 1 || last.Model == nil || last.Model.Revision.ID != "r1" {
			t.Errorf("the refusal told %+v with model %+v", last.Refused, last.Model)
		}
		once() // refused already: not told again
		sets["r3"] = withWorkspaces(workspace("med", "train", schema.DesiredStopped))
		h.source.set("r3")
		once()
		want := [][]string{
			{"+r1", "med/train starting"},
			{"med/train started"},
			{"!r2-broken"},
			{"+r3", "med/train stopped"},
		}
		if diff := cmp.Diff(want, told); diff != "" {
			t.Errorf("told (-want +got):\n%s", diff)
		}
		if last.Events[0].Seq != 3 {
			t.Errorf("the stop's event is numbered %d, want 3 (the feed's number)", last.Events[0].Seq)
		}

		// A restarted berth finds r3 applied in the history: it tells
		// nothing of it.
		restarted, err := New(h.loop.cfg)
		if err != nil {
			t.Fatal(err)
		}
		told = nil
		if _, err := restarted.Once(ctx); err != nil {
			t.Fatal(err)
		}
		if len(told) != 0 {
			t.Errorf("a restarted berth told %v", told)
		}

		// A follower tells nothing, even of a new revision.
		follower := h.loop.cfg
		follower.Leader = &stubLead{leading: false}
		f, err := New(follower)
		if err != nil {
			t.Fatal(err)
		}
		sets["r4"] = withWorkspaces(workspace("med", "train", schema.DesiredRunning))
		h.source.set("r4")
		if _, err := f.Once(ctx); err != nil {
			t.Fatal(err)
		}
		calls := 0
		f.cfg.News = func(view.News) { calls++ }
		if _, err := f.Once(ctx); err != nil {
			t.Fatal(err)
		}
		if len(told) != 0 || calls != 0 {
			t.Errorf("a follower told %v (%d calls)", told, calls)
		}
	})
}
