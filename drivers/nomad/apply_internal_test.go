package nomad

import (
	"testing"

	"github.com/hashicorp/nomad/api"
)

// TestPlacedAll: only a complete evaluation that names every group with
// nothing queued, of a job that can hold no GPU, spares the allocation
// list; anything less (an older Nomad without QueuedAllocations, a
// group left queued, a blocked follow-up, a GPU to check) lists them.
func TestPlacedAll(t *testing.T) {
	done := func(q map[string]int) *api.Evaluation {
		return &api.Evaluation{Status: "complete", QueuedAllocations: q}
	}
	for name, c := range map[string]struct {
		ev     *api.Evaluation
		noGPUs map[string]bool
		want   bool
	}{
		"placed, no GPU":       {done(map[string]int{"replica-0": 0}), map[string]bool{"replica-0": true}, true},
		"placed, a GPU group":  {done(map[string]int{"replica-0": 0}), map[string]bool{"replica-0": false}, false},
		"one queued":           {done(map[string]int{"replica-0": 1}), map[string]bool{"replica-0": true}, false},
		"no QueuedAllocations": {done(nil), map[string]bool{"replica-0": true}, false},
		"a group not named":    {done(map[string]int{"replica-0": 0}), map[string]bool{"replica-0": true, "replica-1": true}, false},
		"failed":               {&api.Evaluation{Status: "failed", QueuedAllocations: map[string]int{"replica-0": 0}}, map[string]bool{"replica-0": true}, false},
		"blocked follow-up":    {&api.Evaluation{Status: "complete", BlockedEval: "b", QueuedAllocations: map[string]int{"replica-0": 0}}, map[string]bool{"replica-0": true}, false},
		"failed group metrics": {&api.Evaluation{Status: "complete", FailedTGAllocs: map[string]*api.AllocationMetric{"replica-0": {}}, QueuedAllocations: map[string]int{"replica-0": 0}}, map[string]bool{"replica-0": true}, false},
	} {
		if got := placedAll(c.ev, c.noGPUs); got != c.want {
			t.Errorf("%s: placedAll = %v, want %v", name, got, c.want)
		}
	}
}
