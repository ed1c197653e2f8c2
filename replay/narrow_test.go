package replay

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/berth-dev/berth/schema"
)

// TestSpecsBufUpdate: however the jobs listed change from one update to
// the next (some come, some go, most stay and shift), the buffer holds
// exactly the specs of the jobs listed, in order.
func TestSpecsBufUpdate(t *testing.T) {
	const n = 60
	all := make([]MappedJob, n)
	rank := make([]int, n)
	for i := range all {
		all[i].ID = fmt.Sprintf("j%02d", i)
		all[i].Ref = schema.Ref{Project: "p", Name: all[i].ID}
		rank[i] = i
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var b specsBuf
	var scratch []int
	for round := range 2000 {
		// Keep each job with a probability that changes from round to
		// round, so lists grow, shrink and shift by a little or a lot.
		keep := rng.Float64()
		if round%10 == 0 {
			keep = 1 - keep/10
		}
		jobs := scratch[:0]
		for ji := range n {
			if rng.Float64() < keep {
				jobs = append(jobs, ji)
			}
		}
		got := b.update(jobs, rank, all)
		if len(got) != len(jobs) {
			t.Fatalf("round %d: %d specs, want %d", round, len(got), len(jobs))
		}
		for k, ji := range jobs {
			if got[k].Meta.Name != all[ji].ID {
				t.Fatalf("round %d: place %d holds %s, want %s", round, k, got[k].Meta.Name, all[ji].ID)
			}
		}
		scratch = b.swap(jobs)
	}
}
