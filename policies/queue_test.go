package policies

import (
	"slices"
	"testing"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
	"github.com/rogpeppe/go-internal/txtar"
)

// TestQueuePositions: in every scenario, the workspaces of existing
// projects that want to run and have no allocation (GPUs or not) are numbered 1…n (the order
// Decide considered them in), and nobody else has a number (a workspace
// a limit stopped for good, limits.go, does not want to run).
func TestQueuePositions(t *testing.T) {
	for _, file := range scenarioFiles(t) {
		ar, err := txtar.ParseFile(file)
		if err != nil {
			t.Fatal(err)
		}
		in, err := parseScenario(ar)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		held := map[schema.Ref]bool{}
		for _, a := range in.Snapshot.Allocs {
			held[a.Workspace] = true
		}
		var got []int
		for _, w := range Decide(in).Workspaces {
			spec := in.Specs.Workspace(w.Ref)
			_, limited := EndOf(w.Reason)
			queued := spec != nil && spec.Spec.State != schema.DesiredStopped && !held[w.Ref] && in.Specs.Project(w.Ref.Project) != nil && !limited
			if queued != (w.Queue > 0) {
				t.Errorf("%s: %s has queue place %d; want a place: %v", file, w.Ref, w.Queue, queued)
			}
			if w.Queue > 0 {
				got = append(got, w.Queue)
			}
		}
		slices.Sort(got)
		for i, q := range got {
			if q != i+1 {
				t.Errorf("%s: queue places %v, want 1…%d", file, got, len(got))
				break
			}
		}
	}
}

// TestQueueOrderTier: of two workspaces waiting beyond their quotas, the
// higher tier is considered first.
func TestQueueOrderTier(t *testing.T) {
	ar, err := txtar.ParseFile("testdata/walkthrough/2-high-arrives.txtar")
	if err != nil {
		t.Fatal(err)
	}
	in, err := parseScenario(ar)
	if err != nil {
		t.Fatal(err)
	}
	in.Snapshot = &drivers.Snapshot{ObservedAt: in.Now, Nodes: in.Snapshot.Nodes} // nothing runs: both wait to start
	places := map[string]int{}
	for _, w := range Decide(in).Workspaces {
		places[w.Ref.String()] = w.Queue
	}
	hi, med := places["high-priority-project/notebook"], places["medium-priority-project/train"]
	if hi != 1 || med != 2 {
		t.Errorf("queue places high %d, medium %d; want high first", hi, med)
	}
}
