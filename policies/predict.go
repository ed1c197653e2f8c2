package policies

// Rule: run-time prediction (the seed's "predictive priorities"). How long
// a workspace's run will take, from the run times berth saw complete
// (History.RunTimes) and the owner's own statement (expectedDuration),
// with its uncertainty. Nothing in Decide reads it; the queue's likely
// start (likely.go) does.

import (
	"slices"
	"strconv"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
)

// RunTimeSamples is how many recent run times History.RunTimes keeps per
// key: enough for a 10th and a 90th percentile, few enough that a team's
// history follows what it runs now.
const RunTimeSamples = 32

// MinRunTimeSamples is how many runs a key needs before Predict trusts it
// over a broader one (the owner's over the project's, one size over all
// sizes).
const MinRunTimeSamples = 3

// Run is one completed run, for RecordRuns.
type Run struct {
	Project, Owner string
	// GPUs are the GPUs of all its replicas.
	GPUs int
	// Took is how long it ran: its work (progress) where the driver
	// reports it, else the time it spent running, over all its runs.
	Took time.Duration
}

// runKeys are the History.RunTimes keys a run of project, owner and gpus
// counts under, the most specific first, with what each means for people:
// its owner's runs of its size, its owner's runs, its project's runs of
// its size, its project's runs. A workspace without an owner has only the
// project's two.
func runKeys(project, owner string, gpus int) ([]string, []string) {
	n := strconv.Itoa(gpus)
	if owner == "" {
		return []string{project + "//" + n, project}, runBasis[2:]
	}
	return []string{project + "/" + owner + "/" + n, project + "/" + owner, project + "//" + n, project}, runBasis
}

var runBasis = []string{"its owner's runs of its size", "its owner's runs", "its project's runs of its size", "its project's runs"}

// RecordRuns returns h with runs added to RunTimes, each under its keys
// (runKeys), keeping the last RunTimeSamples per key. h is not changed;
// the result shares no slice it changed with h. Runs that took no time
// are skipped.
func RecordRuns(h drivers.History, runs []Run) drivers.History {
	if len(runs) == 0 {
		return h
	}
	out := h
	out.RunTimes = make(map[string][]time.Duration, len(h.RunTimes)+4)
	for k, v := range h.RunTimes {
		out.RunTimes[k] = v
	}
	for _, r := range runs {
		if r.Took <= 0 {
			continue
		}
		keys, _ := runKeys(r.Project, r.Owner, r.GPUs)
		for _, k := range keys {
			old := out.RunTimes[k]
			n := min(len(old), RunTimeSamples-1)
			s := make([]time.Duration, 0, n+1)
			s = append(append(s, old[len(old)-n:]...), r.Took)
			out.RunTimes[k] = s
		}
	}
	return out
}

// RunTime is a prediction of how long one run of a workspace takes: the
// run times berth saw complete under the most specific history that has
// MinRunTimeSamples (else the broadest that has any), and the owner's
// statement. The zero RunTime knows nothing.
//
// How they combine: the statement is the owner's word for this
// workspace, so it sets the median; the history gives the spread around
// it (each of its quantiles scaled by stated/history median). With a
// statement and no history the prediction is the statement, without a
// spread; with history and no statement, the history's own quantiles.
type RunTime struct {
	// Samples are the run times of the history used, sorted; shared:
	// never change them.
	Samples []time.Duration
	// Basis says which history Samples are ("its owner's runs of its
	// size", …); empty when none.
	Basis string
	// Stated is the workspace's expectedDuration; zero when not stated.
	Stated time.Duration
}

// Known reports whether r predicts anything.
func (r RunTime) Known() bool { return len(r.Samples) > 0 || r.Stated > 0 }

// Quantile returns the q-quantile (0 ≤ q ≤ 1) of the run time; zero when
// nothing is known. Nearest rank over the samples.
func (r RunTime) Quantile(q float64) time.Duration {
	if len(r.Samples) == 0 {
		return r.Stated
	}
	v := nearestRank(r.Samples, q)
	if r.Stated > 0 {
		return scale(v, r.Stated, nearestRank(r.Samples, 0.5))
	}
	return v
}

// Remaining returns the q-quantile of the time left of a run that has
// run for elapsed: the quantile among the run times longer than elapsed,
// less elapsed. A run past every run time known may end at any moment or
// run as long again: its q-quantile is q·elapsed. Zero when nothing is
// known (see Known).
func (r RunTime) Remaining(elapsed time.Duration, q float64) time.Duration {
	if !r.Known() {
		return 0
	}
	if elapsed <= 0 {
		return r.Quantile(q)
	}
	if len(r.Samples) == 0 {
		if r.Stated > elapsed {
			return r.Stated - elapsed
		}
		return time.Duration(q * float64(elapsed))
	}
	// The samples (scaled to the statement) longer than elapsed.
	med := nearestRank(r.Samples, 0.5)
	at := func(i int) time.Duration {
		if r.Stated > 0 {
			return scale(r.Samples[i], r.Stated, med)
		}
		return r.Samples[i]
	}
	lo, _ := slices.BinarySearchFunc(r.Samples, elapsed, func(s, e time.Duration) int {
		v := s
		if r.Stated > 0 {
			v = scale(s, r.Stated, med)
		}
		if v <= e {
			return -1
		}
		return 1
	})
	n := len(r.Samples) - lo
	if n == 0 {
		return time.Duration(q * float64(elapsed))
	}
	return at(lo+rank(n, q)) - elapsed
}

// nearestRank is the q-quantile of sorted s (nearest rank).
func nearestRank(s []time.Duration, q float64) time.Duration {
	return s[rank(len(s), q)]
}

// rank is the index of the q-quantile among n sorted values.
func rank(n int, q float64) int {
	i := int(q*float64(n)+0.5) - 1
	return min(max(i, 0), n-1)
}

// scale returns v·num/den, without overflow for run times of years.
func scale(v, num, den time.Duration) time.Duration {
	if den <= 0 {
		return num
	}
	return time.Duration(float64(v) * float64(num) / float64(den))
}

// Predict returns the run-time prediction of ws from h (read only): see
// RunTime. The samples are sorted into a new slice; PredictCache shares
// them between workspaces of one key.
func Predict(h *drivers.History, ws *schema.Workspace) RunTime {
	return (&PredictCache{}).Predict(h, ws)
}

// PredictCache predicts many workspaces from one History, sorting each
// key's samples once. The zero value is ready; it must not outlive a
// change to the History it was used with.
type PredictCache struct {
	sorted map[string][]time.Duration
	// byKind memoizes the history chosen per project, owner and size.
	byKind map[predictKind]RunTime
}

type predictKind struct {
	project, owner string
	gpus           int
}

// Predict is the package's Predict, with c's sorted samples.
func (c *PredictCache) Predict(h *drivers.History, ws *schema.Workspace) RunTime {
	if h == nil || len(h.RunTimes) == 0 {
		return RunTime{Stated: ws.Spec.ExpectedDuration}
	}
	k := predictKind{ws.Meta.Project, ws.Spec.Owner, ws.Spec.Resources.GPUs * max(ws.Spec.Replicas, 1)}
	r, ok := c.byKind[k]
	if !ok {
		r = c.predict(h, k)
		if c.byKind == nil {
			c.byKind = map[predictKind]RunTime{}
		}
		c.byKind[k] = r
	}
	r.Stated = ws.Spec.ExpectedDuration
	return r
}

// predict chooses the history of kind k (see Predict).
func (c *PredictCache) predict(h *drivers.History, k predictKind) RunTime {
	var r RunTime
	keys, basis := runKeys(k.project, k.owner, k.gpus)
	best := -1
	for i, k := range keys {
		n := len(h.RunTimes[k])
		if n >= MinRunTimeSamples {
			best = i
			break
		}
		if n > 0 {
			best = i // the broadest with any, unless one has enough
		}
	}
	if best < 0 {
		return r
	}
	key := keys[best]
	s, ok := c.sorted[key]
	if !ok {
		s = slices.Clone(h.RunTimes[key])
		slices.Sort(s)
		if c.sorted == nil {
			c.sorted = map[string][]time.Duration{}
		}
		c.sorted[key] = s
	}
	r.Samples, r.Basis = s, basis[best]
	return r
}
