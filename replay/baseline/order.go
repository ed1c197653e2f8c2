package baseline

import "slices"

// inOrder calls yield for the workspaces of queue that keep passes (nil:
// all) in the order less gives, until yield returns false. queue is in
// specs order, so each project's workspaces are contiguous; each such run
// is sorted on its own (usually it already is: a project's workspaces
// queue in name order) and the runs are merged, so a long queue costs
// n·log(projects), and nothing past the point where yield stops.
func inOrder(queue []*work, less func(a, b *work) bool, passes func(*work) bool, yield func(*work) bool) {
	cmp := func(a, b *work) int {
		switch {
		case less(a, b):
			return -1
		case less(b, a):
			return 1
		}
		return 0
	}
	var h runHeap
	for i := 0; i < len(queue); {
		j := i + 1
		sorted := true
		for j < len(queue) && queue[j].proj == queue[i].proj {
			sorted = sorted && !less(queue[j], queue[j-1])
			j++
		}
		run := queue[i:j:j]
		if !sorted {
			run = slices.Clone(run)
			slices.SortStableFunc(run, cmp)
		}
		r := mergeRun{ws: run}
		if r.skip(passes) {
			h = append(h, r)
		}
		i = j
	}
	h.init(less)
	for len(h) > 0 {
		r := &h[0]
		if !yield(r.ws[r.pos]) {
			return
		}
		r.pos++
		if !r.skip(passes) {
			h[0] = h[len(h)-1]
			h = h[:len(h)-1]
		}
		h.down(0, less)
	}
}

// mergeRun is one sorted run being merged.
type mergeRun struct {
	ws  []*work
	pos int
}

// skip moves past workspaces that do not pass; false when none is left.
func (r *mergeRun) skip(passes func(*work) bool) bool {
	for r.pos < len(r.ws) && passes != nil && !passes(r.ws[r.pos]) {
		r.pos++
	}
	return r.pos < len(r.ws)
}

// runHeap is a min-heap of runs by their next workspace. Runs are never
// equal (each workspace is in one run, and less orders every pair), so
// the merge's order does not depend on how the heap breaks ties.
type runHeap []mergeRun

func (h runHeap) init(less func(a, b *work) bool) {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i, less)
	}
}

// down moves h[i] down to its place.
func (h runHeap) down(i int, less func(a, b *work) bool) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && less(h[c+1].ws[h[c+1].pos], h[c].ws[h[c].pos]) {
			c++
		}
		if !less(h[c].ws[h[c].pos], h[i].ws[h[i].pos]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}
