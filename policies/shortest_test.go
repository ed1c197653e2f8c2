package policies

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rogpeppe/go-internal/txtar"
)

// TestShortestFirst: with Input.ShortestFirst, a project's workspaces of
// one tier and aging step go by predicted run time, unknown last; at
// maximum aging, and without ShortestFirst, first come first served.
func TestShortestFirst(t *testing.T) {
	ar := txtar.Parse([]byte(`-- now --
2026-03-02T10:00:00Z
-- specs --
tier medium 50
project ml tier=medium
workspace ml/long gpus=4
workspace ml/short gpus=1
workspace ml/unknown gpus=2
workspace ml/old-long gpus=4
workspace ml/old-short gpus=1
-- cluster --
node n1 gpus=1
alloc ml/busy node=n1 gpus=0
-- history --
queued ml/unknown -3m
queued ml/long -2m
queued ml/short -1m
queued ml/old-long -3h
queued ml/old-short -2h
`))
	in, err := parseScenario(ar)
	if err != nil {
		t.Fatal(err)
	}
	in.History.RunTimes = map[string][]time.Duration{"ml//4": hours(8, 9, 10), "ml//1": hours(1, 1, 2)}
	order := func(in Input) []string {
		d := Decide(in)
		out := make([]string, 5)
		for _, w := range d.Workspaces {
			if w.Queue > 0 {
				out[w.Queue-1] = w.Ref.Name
			}
		}
		return out
	}
	// Aging: old-long and old-short at the maximum (first come, first
	// served); the three others in one aging step.
	if diff := cmp.Diff([]string{"old-long", "old-short", "unknown", "long", "short"}, order(in)); diff != "" {
		t.Errorf("without ShortestFirst (-want +got):\n%s", diff)
	}
	in.ShortestFirst = true
	if diff := cmp.Diff([]string{"old-long", "old-short", "short", "long", "unknown"}, order(in)); diff != "" {
		t.Errorf("with ShortestFirst (-want +got):\n%s", diff)
	}
}
