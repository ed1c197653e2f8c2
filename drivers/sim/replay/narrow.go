package replay

import (
	"reflect"
	"slices"
	"time"

	"github.com/berth-dev/berth/policies"
	"github.com/berth-dev/berth/reconcile/state"
	"github.com/berth-dev/berth/schema"
)

// Deciding on a narrowed queue.
//
// A policy is a pure function of the whole input: every call visits every
// waiting job, and on a busy stretch of a long trace thousands wait while
// one or two can start. The replay gives the policy a narrowed input
// (every job holding GPUs, but only some of the waiting ones) where the
// policy's own rules make the outcome (what starts where, what is
// preempted) provably the same as on the whole queue:
//
//   - Strict FIFO (Policy.HeadBlocks): a decision starts a prefix of the
//     queue, at most one job per free GPU, and the first job that does not
//     fit blocks the rest. The first free+1 waiting jobs (and any submitted
//     at the same instant as the last of them) decide exactly as the whole
//     queue.
//   - Every policy, a screen: waiting jobs of one class (same project,
//     shape and checkpoint interval) have the same rights and needs, and
//     the one queued first comes first in its project's order. The screen
//     decides on one job per class. When none of them can start or preempt
//     on the cluster as it is, no job of the queue can: a failed attempt
//     leaves the cluster as it was, so each job meets the cluster the
//     screen's job of its class met. That holds as long as a waiting job
//     cannot hold free GPUs for itself; berth's reservations can, so for a
//     policy that Reserves the screen is used only when no GPU is free
//     (nothing to reserve). The cycle then needs no decision on the whole
//     queue.
//
// Options.Verify decides on the whole queue as well every Nth narrowed
// decision and counts the cycles whose outcome differs (the whole queue's
// decision is applied then). The tests verify every one.

// classKey groups waiting jobs whose admission a policy cannot tell apart.
type classKey struct {
	project        string
	gpus, replicas int
	checkpoint     time.Duration
}

// class is the jobs of one classKey waiting now, queued first first.
type class struct {
	waiting []int
}

func (r *replayer) classOf(ji int) *class {
	j := &r.wl.Jobs[ji]
	k := classKey{j.Ref.Project, j.PerGPUs, j.Replicas, j.Spec.Spec.Checkpoint.Interval}
	c := r.classes[k]
	if c == nil {
		c = &class{}
		r.classes[k] = c
		r.classList = append(r.classList, c)
	}
	return c
}

// queuedBefore is the order of a project's queue between jobs of one
// class: time queued (their submit time), then name.
func (r *replayer) queuedBefore(a, b int) bool {
	ja, jb := &r.wl.Jobs[a], &r.wl.Jobs[b]
	if !ja.Submit.Equal(jb.Submit) {
		return ja.Submit.Before(jb.Submit)
	}
	return ja.Ref.Less(jb.Ref)
}

// classJoin and classLeave keep the class lists as jobs queue and start.
func (r *replayer) classJoin(ji int) {
	c := r.classOf(ji)
	i, _ := slices.BinarySearchFunc(c.waiting, ji, func(x, t int) int {
		if r.queuedBefore(x, t) {
			return -1
		}
		return 1
	})
	c.waiting = slices.Insert(c.waiting, i, ji)
}

func (r *replayer) classLeave(ji int) {
	c := r.classOf(ji)
	if i := slices.Index(c.waiting, ji); i >= 0 {
		c.waiting = slices.Delete(c.waiting, i, i+1)
	}
}

// decide runs the policy for this cycle, on a narrowed queue where that is
// exact (see above), and returns its decision. The meter gets the time the
// cycle's deciding took (a screen and a decision on the whole queue, where
// the screen found work), checks against the whole queue aside.
func (r *replayer) decide(snap *state.Snapshot, running []int) policies.Decision {
	t0 := time.Now()
	free := 0
	for _, f := range r.freeByNode(snap) {
		free += f
	}
	in := policies.Input{Snapshot: snap, History: &r.hist, Now: r.now}
	var narrow []int
	switch {
	case r.pol.HeadBlocks:
		narrow = r.fifoWindow(free + 1)
	case !r.pol.Reserves || free == 0:
		for _, c := range r.classList {
			if len(c.waiting) > 0 {
				narrow = append(narrow, c.waiting[0])
			}
		}
	}
	if narrow == nil {
		return r.decideWhole(in, t0)
	}
	set := r.subset(running, narrow)
	in.Specs = &set
	d := r.pol.Decide(in)
	if !r.pol.HeadBlocks && acts(d) {
		return r.decideWhole(in, t0) // the screen found work: decide on the whole queue
	}
	r.m.decided(time.Since(t0))
	r.m.narrowed++
	if r.verify > 0 && r.m.narrowed%r.verify == 0 {
		in.Specs = &r.set
		whole := r.pol.Decide(in)
		r.m.verified++
		if !sameOutcome(d, whole) {
			r.m.differed++
		}
		return whole
	}
	return d
}

// decideWhole decides on every job; the cycle began at t0.
func (r *replayer) decideWhole(in policies.Input, t0 time.Time) policies.Decision {
	in.Specs = &r.set
	d := r.pol.Decide(in)
	r.m.decided(time.Since(t0))
	r.m.whole++
	return d
}

// fifoWindow returns the first n waiting jobs in FIFO order, and every
// other job submitted at the same instant as the last of them.
func (r *replayer) fifoWindow(n int) []int {
	var out []int
	for k := r.head; k < len(r.jobs); k++ {
		if len(out) >= n && !r.wl.Jobs[k].Submit.Equal(r.wl.Jobs[out[len(out)-1]].Submit) {
			break
		}
		if r.jobs[k].status == jobQueued {
			out = append(out, k)
		}
	}
	return out
}

// subset is the specs with only the workspaces of the jobs given.
func (r *replayer) subset(running, waiting []int) schema.Set {
	set := r.set
	ws := r.subsetBuf[:0]
	for _, ji := range running {
		ws = append(ws, r.wl.Jobs[ji].Spec)
	}
	for _, ji := range waiting {
		ws = append(ws, r.wl.Jobs[ji].Spec)
	}
	slices.SortFunc(ws, func(a, b schema.Workspace) int {
		ra, rb := a.Ref(), b.Ref()
		if ra.Less(rb) {
			return -1
		}
		if rb.Less(ra) {
			return 1
		}
		return 0
	})
	r.subsetBuf = ws
	set.Workspaces = ws
	return set
}

// acts reports whether d starts or preempts anything.
func acts(d policies.Decision) bool {
	for i := range d.Workspaces {
		if v := d.Workspaces[i].Verdict; v == policies.VerdictStart || v == policies.VerdictPreempt {
			return true
		}
	}
	return false
}

// sameOutcome reports whether a and b start the same workspaces at the same
// placements after the same preemptions (reasons and queue positions
// aside: a narrowed queue words them differently).
func sameOutcome(a, b policies.Decision) bool {
	return reflect.DeepEqual(outcome(a), outcome(b))
}

func outcome(d policies.Decision) []policies.WorkspaceDecision {
	var out []policies.WorkspaceDecision
	for _, w := range d.Workspaces {
		if w.Verdict != policies.VerdictStart && w.Verdict != policies.VerdictPreempt {
			continue
		}
		w.Reason, w.Queue = policies.Reason{}, 0
		out = append(out, w)
	}
	return out
}
