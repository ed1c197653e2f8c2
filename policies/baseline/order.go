package baseline

import (
	"container/heap"
	"slices"
)

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
	h := &runHeap{less: less}
	for i := 0; i < len(queue); {
		j := i + 1
		for j < len(queue) && queue[j].proj == queue[i].proj {
			j++
		}
		run := queue[i:j:j]
		if !slices.IsSortedFunc(run, cmp) {
			run = slices.Clone(run)
			slices.SortStableFunc(run, cmp)
		}
		r := &mergeRun{ws: run}
		if r.skip(passes) {
			h.runs = append(h.runs, r)
		}
		i = j
	}
	heap.Init(h)
	for h.Len() > 0 {
		r := h.runs[0]
		if !yield(r.ws[r.pos]) {
			return
		}
		r.pos++
		if r.skip(passes) {
			heap.Fix(h, 0)
		} else {
			heap.Pop(h)
		}
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

type runHeap struct {
	runs []*mergeRun
	less func(a, b *work) bool
}

func (h *runHeap) Len() int { return len(h.runs) }
func (h *runHeap) Less(i, j int) bool {
	a, b := h.runs[i], h.runs[j]
	return h.less(a.ws[a.pos], b.ws[b.pos])
}
func (h *runHeap) Swap(i, j int) { h.runs[i], h.runs[j] = h.runs[j], h.runs[i] }
func (h *runHeap) Push(x any)    { h.runs = append(h.runs, x.(*mergeRun)) }
func (h *runHeap) Pop() any {
	r := h.runs[len(h.runs)-1]
	h.runs = h.runs[:len(h.runs)-1]
	return r
}
