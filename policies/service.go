package policies

// Rule: attained-service ordering (the policy's Service): short work
// first, inside the promise. A workspace's attained service is the
// GPU-time it has run with its spec, over all its runs (History.Ran
// times its GPUs); the policy's steps divide it into queues, numbered
// from 0, the least served. Within a project's queue and tier the less
// served go first; a waiting workspace that has waited, since it last
// ran, Promote times as long as it has run goes to queue 0.
//
// It grants one right (RightOrder, see orderRight): a waiting workspace
// takes the GPUs of a running one of the same tier in a later queue that
// checkpoints and is not interactive: its own team's when it is inside
// the team's quota, or borrowed work when it borrows too. Never another
// team's work inside its quota: that is the promise.
//
// Scenarios: testdata/service/.

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
)

// ordering reports whether attained-service ordering is on.
func (d *decider) ordering() bool { return len(d.policy.Service.Steps) > 0 }

// markService gives each workspace that queues, and each preemption
// candidate, its attained service and queue (band); a waiting one past
// the promotion knob goes to queue 0. It runs after markCandidates and
// sums up each project's most-served candidate that may yield (maxBand).
func (d *decider) markService(hist *drivers.History) {
	if !d.ordering() {
		return
	}
	sp := d.policy.Service
	for _, w := range d.ws {
		if w.spec == nil || w.stopped || w.proj < 0 || w.ordering == schema.OrderingOff {
			continue
		}
		queued := len(w.allocs) == 0
		if !queued && !w.candidate {
			continue
		}
		ran := ranFor(w.ref, w.spec, w.allocs, hist, d.now)
		w.served = ran.Hours() * float64(w.gpus*w.replicas)
		w.band = bandOf(sp.Steps, w.served)
		if queued {
			since := w.queuedSince
			if w.preempted != nil && w.preempted.At.After(since) {
				since = w.preempted.At
			}
			if at := PromotedAt(sp, ran, since); w.band > 0 && !at.IsZero() && !d.now.Before(at) {
				w.band = 0
			}
			continue
		}
		w.yields = yields(w.spec, w.ordering == schema.OrderingAll)
		if w.yields && w.band > 0 {
			p := d.projs[w.proj]
			p.maxBand = max(p.maxBand, w.band)
		}
	}
}

// PromotedAt is when a workspace that has run ran and waits since since
// (its last preemption, else when it queued) is promoted to queue 0:
// after waiting sp.Promote times its run; zero when never (no knob, or
// it has not run).
func PromotedAt(sp schema.ServicePolicy, ran time.Duration, since time.Time) time.Time {
	if sp.Promote <= 0 || ran <= 0 {
		return time.Time{}
	}
	return since.Add(time.Duration(sp.Promote * float64(ran)))
}

// bandOf is the queue of attained service served (GPU-hours): how many
// steps it has reached.
func bandOf(steps []float64, served float64) int {
	n := 0
	for n < len(steps) && served >= steps[n] {
		n++
	}
	return n
}

// yields reports whether a workspace may be preempted for ordering: it
// saves a checkpoint (an interval, or a signal with a grace to save on)
// and is not interactive (ports or a service: someone is at it), unless
// its tier's ordering is all.
func yields(w *schema.Workspace, interactive bool) bool {
	cp := w.Spec.Checkpoint
	if cp.Interval <= 0 && (cp.Signal == "" || cp.GracePeriod <= 0) {
		return false
	}
	return interactive || (len(w.Spec.Ports) == 0 && w.Spec.Service == nil)
}

// orderRight reports whether w may take running v's GPUs for ordering
// (RightOrder): same tier, v in a later queue and willing to yield, and
// either w is inside its quota and v is of its own project, or w borrows
// and v is borrowed work (borrowed: right's test) of any project. A
// borrower takes no in-quota work of its team (what it started would be
// borrowed work another team reclaims while the team's own waits): on
// the Philly replay, seed 1, steps 2, 8, 32, quota debt rose from 1,845
// to 3,464 GPU-hours when it could, and mean JCT by 0.5 h (seed 1) and
// 0.15 h (seed 2) when it could only where it then ran inside the quota.
func (d *decider) orderRight(w *wsState, inQuota bool, v *wsState, borrowed bool) bool {
	if !d.ordering() || !v.yields || w.tier != v.tier || v.band <= w.band {
		return false
	}
	if inQuota {
		return v.proj == w.proj
	}
	return borrowed
}

// mayOrder reports whether some candidate of project vp (index vi) might
// yield to w for ordering: errs only towards true, as mayPreemptAny does.
func (d *decider) mayOrder(w *wsState, inQuota bool, vi int, vp *projState, borrowed bool) bool {
	if !d.ordering() || vp.maxBand <= w.band {
		return false
	}
	if inQuota {
		return vi == w.proj
	}
	return borrowed
}

// orderWhy says why v yields to w for ordering.
func (d *decider) orderWhy(w, v *wsState) string {
	whose := "of its team"
	if v.proj != w.proj {
		whose = "on borrowed GPUs"
	}
	step := d.policy.Service.Steps[v.band-1]
	return fmt.Sprintf("yields to less-served work %s (ran %s GPU-h, past the %s GPU-h step)", whose, gpuHours(v.served), gpuHours(step))
}

// gpuHours writes GPU-hours for people: whole above 10, else one decimal.
func gpuHours(h float64) string {
	if h >= 10 {
		return strconv.FormatFloat(math.Floor(h), 'f', 0, 64)
	}
	return strconv.FormatFloat(math.Floor(h*10)/10, 'f', -1, 64)
}
