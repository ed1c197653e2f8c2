package policies

// Rule: the queue's likely start. When each waiting workspace is likely
// to start, from the run times predicted (predict.go) for what runs and
// for what is ahead of it in the queue. An estimate for people: the
// decision never reads it.

import (
	"fmt"
	"strings"
	"time"

	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/schema"
)

// Holder is a workspace holding GPUs, for LikelyStarts: GPUs it holds,
// how long it has run (Elapsed, this run's work so far) and its run time.
// Leaving: it is stopping, and its GPUs are free as soon as it is gone.
type Holder struct {
	GPUs    int
	Elapsed time.Duration
	Run     RunTime
	Leaving bool
}

// Waiter is a workspace of the queue, for LikelyStarts: the GPUs of all
// its replicas and its run time.
type Waiter struct {
	Ref  schema.Ref
	GPUs int
	Run  RunTime
}

// Start is when a waiting workspace is likely to start, counted from the
// time LikelyStarts was asked at: Likely with every run time at its
// median, Low at its 10th percentile, High at its 90th. Known is false
// when it cannot say: UnknownRunning running workspaces and UnknownAhead
// workspaces ahead of it in the queue hold GPUs it needs and have no run
// time known (no completed run and no expectedDuration), or, with both
// zero, it needs more GPUs than the cluster has. PastRuns and Stated are
// what the estimate rests on: the past runs in the histories of the
// workspaces it waits behind (each history counted once) and how many of
// them stated an expectedDuration.
type Start struct {
	Ref               schema.Ref
	Known             bool
	Low, Likely, High time.Duration
	PastRuns, Stated  int
	UnknownRunning    int
	UnknownAhead      int
	// Quota: its project's quota and borrow limit hold it back, not
	// free GPUs; the estimate is the later of the cluster's and its
	// project's (QuotaBound).
	Quota bool
}

// QuotaBound combines a waiter's estimate on the cluster's GPUs (s) with
// its estimate on its project's quota (q: LikelyStarts run on the GPUs
// the project may still take and its own holders and waiters): it starts
// when both have room, so each figure is the later of the two, and it is
// unknown when either is.
func QuotaBound(s, q Start) Start {
	out := s
	out.Quota = true
	if !s.Known || !q.Known {
		out.Known = false
		out.Low, out.Likely, out.High = 0, 0, 0
		out.UnknownRunning = max(s.UnknownRunning, q.UnknownRunning)
		out.UnknownAhead = max(s.UnknownAhead, q.UnknownAhead)
		return out
	}
	out.Low, out.Likely, out.High = max(s.Low, q.Low), max(s.Likely, q.Likely), max(s.High, q.High)
	out.PastRuns, out.Stated = max(s.PastRuns, q.PastRuns), max(s.Stated, q.Stated)
	return out
}

// likelyQuantiles are the run-time quantiles of Start's Low, Likely and
// High.
var likelyQuantiles = [3]float64{0.1, 0.5, 0.9}

// LikelyStarts returns, for each waiter in queue order, when it is likely
// to start, given the free GPUs now and what holds the others: in queue
// order, each waiter starts once the GPUs free then, and those released
// by the holders and by the waiters started before it (each at its
// predicted end), are enough; it then holds them for its own predicted
// run time. So it assumes a workspace waits for those ahead of it (no
// backfill) and counts GPUs only (not nodes, topology, models or quotas):
// a small workspace that berth starts beside a big one starts sooner, and
// one held back by its project's quota later. It runs three times, every
// run time at its 10th, 50th and 90th percentile, for Low, Likely and
// High. Pure, O((holders+waiters)·log) and deterministic: the time comes
// in as the holders' Elapsed.
func LikelyStarts(free int, holders []Holder, queue []Waiter) []Start {
	out := make([]Start, len(queue))
	for i, w := range queue {
		out[i].Ref = w.Ref
		out[i].Known = true
	}
	for qi, q := range likelyQuantiles {
		ev := make(releases, 0, len(holders)+len(queue))
		avail := free
		unknownRunning, unknownAhead := 0, 0 // holding GPUs for ever
		for _, h := range holders {
			switch {
			case h.Leaving:
				ev.push(release{0, h.GPUs})
			case h.Run.Known():
				ev.push(release{h.Run.Remaining(h.Elapsed, q), h.GPUs})
			default:
				unknownRunning++
				ev.push(release{forever, h.GPUs})
			}
		}
		now := time.Duration(0)
		for i, w := range queue {
			s := &out[i]
			for avail < w.GPUs && len(ev) > 0 && ev[0].at != forever {
				r := ev.pop()
				now = max(now, r.at)
				avail += r.gpus
			}
			if avail < w.GPUs {
				// What it waits on never ends (as far as anyone knows).
				s.Known = false
				s.UnknownRunning, s.UnknownAhead = unknownRunning, unknownAhead
				// It holds nothing; those after it may still start.
				continue
			}
			switch qi {
			case 0:
				s.Low = now
			case 1:
				s.Likely = now
			case 2:
				s.High = now
			}
			avail -= w.GPUs
			if w.Run.Known() {
				ev.push(release{now + w.Run.Quantile(q), w.GPUs})
			} else {
				unknownAhead++
				ev.push(release{forever, w.GPUs})
			}
		}
	}
	// What each estimate rests on: the histories and statements of the
	// holders and of the waiters before it, each history counted once.
	seen := map[*time.Duration]bool{}
	runs, stated := 0, 0
	count := func(r RunTime) {
		if len(r.Samples) > 0 && !seen[&r.Samples[0]] {
			seen[&r.Samples[0]] = true
			runs += len(r.Samples)
		}
		if r.Stated > 0 {
			stated++
		}
	}
	for _, h := range holders {
		if !h.Leaving {
			count(h.Run)
		}
	}
	for i, w := range queue {
		out[i].PastRuns, out[i].Stated = runs, stated
		count(w.Run)
	}
	return out
}

// forever is the release time of GPUs held by a workspace whose run time
// nobody knows.
const forever = time.Duration(1<<63 - 1)

// release is GPUs becoming free at a time (from now).
type release struct {
	at   time.Duration
	gpus int
}

// releases is a min-heap of releases by time (no interface boxing: one
// estimate walks the whole queue).
type releases []release

func (r *releases) push(x release) {
	h := append(*r, x)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if h[p].at <= h[i].at {
			break
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
	*r = h
}

func (r *releases) pop() release {
	h := *r
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && h[l].at < h[m].at {
			m = l
		}
		if l+1 < n && h[l+1].at < h[m].at {
			m = l + 1
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*r = h
	return top
}

// String says s for people: "in 2h–5h (most likely 3h; from 14 past
// runs)", "in 6h (from 1 stated duration)" when the range is one
// figure, "now: …", or why it is unknown.
func (s Start) String() string {
	if s.Quota {
		q := s
		q.Quota = false
		if !s.Known && s.UnknownRunning == 0 && s.UnknownAhead == 0 {
			return "unknown: its project's quota holds it back, not free GPUs"
		}
		text := q.String()
		if !s.Known {
			return "unknown: its project's quota holds it back, not free GPUs;" + strings.TrimPrefix(text, "unknown:")
		}
		if s.High == 0 {
			return "now: its project's quota has room again"
		}
		return text + ", when its project's quota has room"
	}
	if !s.Known {
		switch {
		case s.UnknownRunning > 0 && s.UnknownAhead > 0:
			return fmt.Sprintf("unknown: no run time known for %s and %s ahead of it", text.Plural(s.UnknownRunning, "running workspace"), text.Plural(s.UnknownAhead, "workspace"))
		case s.UnknownRunning > 0:
			return fmt.Sprintf("unknown: no run time known for %s", text.Plural(s.UnknownRunning, "running workspace"))
		case s.UnknownAhead > 0:
			return fmt.Sprintf("unknown: no run time known for %s ahead of it in the queue", text.Plural(s.UnknownAhead, "workspace"))
		}
		return "unknown: it needs more GPUs than the cluster has"
	}
	if s.High == 0 {
		return "now: the GPUs it needs are free"
	}
	basis := ""
	switch {
	case s.PastRuns > 0 && s.Stated > 0:
		basis = fmt.Sprintf("from %s and %s", text.Plural(s.PastRuns, "past run"), text.Plural(s.Stated, "stated duration"))
	case s.PastRuns > 0:
		basis = "from " + text.Plural(s.PastRuns, "past run")
	case s.Stated > 0:
		basis = "from " + text.Plural(s.Stated, "stated duration")
	}
	lo, hi := text.RoughDuration(s.Low), text.RoughDuration(s.High)
	if lo == hi {
		if basis == "" {
			return "in " + hi
		}
		return fmt.Sprintf("in %s (%s)", hi, basis)
	}
	if basis != "" {
		basis = "; " + basis
	}
	return fmt.Sprintf("in %s–%s (most likely %s%s)", lo, hi, text.RoughDuration(s.Likely), basis)
}
