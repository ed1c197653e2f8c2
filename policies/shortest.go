package policies

// Rule: shortest predicted first (an experiment, off unless
// Input.ShortestFirst). Within a project's queue, among workspaces of one
// tier and one aging step below the maximum, the one with the shortest
// predicted median run time (Predict) goes first; unknown run times go
// last. A workspace at maximum aging is first come, first served again,
// so the reordering is bounded by aging: a long run waits at most as
// long as its aging takes to reach the maximum before it is back in
// arrival order. `berth simulate --policies berth,berth-sjf` measures it.

import (
	"cmp"
	"math"
	"time"
)

// predictQueue fills d.pred for every queued workspace when the input asks
// for ShortestFirst; otherwise it leaves d.pred nil.
func (d *decider) predictQueue(queued func(*wsState) bool) {
	if !d.in.ShortestFirst {
		return
	}
	d.pred = make([]time.Duration, len(d.ws))
	var cache PredictCache
	for i, w := range d.ws {
		if !queued(w) {
			continue
		}
		d.pred[i] = time.Duration(math.MaxInt64)
		if r := cache.Predict(d.in.History, w.spec); r.Known() {
			d.pred[i] = r.Quantile(0.5)
		}
	}
}

// shorterFirst orders a and b, of one tier and aging boost, by predicted
// run time while their aging is below its maximum; 0 when ShortestFirst
// is off or does not tell them apart.
func (d *decider) shorterFirst(a, b *wsState) int {
	if d.pred == nil || a.boost >= d.policy.Aging.MaxBoost {
		return 0
	}
	return cmp.Compare(d.pred[a.idx], d.pred[b.idx])
}
