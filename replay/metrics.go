package replay

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/schema"
)

// meter integrates what the cluster does between cycles.
type meter struct {
	wl         *Workload
	capacity   int
	startDelay time.Duration
	start      time.Time
	last       time.Time
	tenantOf   map[string]int
	quota      []int
	// queued: GPUs each tenant waits for now; waitSizes: per tenant, its
	// waiting jobs by GPUs asked (all replicas), sizes ascending.
	queued    []int
	waitSizes [][]sizeCount
	held      []int // scratch: GPUs each tenant holds

	heldSec, workSec float64
	jainSum, jainSec float64
	// shareSum, shareSec: per tenant, the integral of its GPUs held over
	// its entitlement while jobs wait, and the time it counted.
	shareSum, shareSec []float64
	// entSum, entSec: per tenant, the integral of min(1, held ÷
	// entitlement) while it has demand, and the time it counted.
	entSum, entSec []float64
	// debt: per tenant, the GPU-seconds its in-quota demand waited while
	// other tenants held borrowed GPUs, beyond the reclaim grace;
	// debtSince: when that began (zero: it does not hold now).
	debt         []float64
	debtSince    []time.Time
	grace        time.Duration
	contendedSec float64
	bucket       time.Duration
	util         []float64 // working GPU-seconds per bucket
	decisions    []time.Duration
	// months: the replay's time per simulated month (month.go).
	months monthClock
	// whole, narrowed, verified, differed count the cycles decided on the
	// whole queue and on a narrowed one, the narrowed ones checked against
	// the whole queue, and those that differed.
	whole, narrowed, verified, differed int
	// workspaces: those the decisions took, summed (Timing.Workspaces).
	workspaces  int64
	preemptions int
	// orderPreemptions and orderLost (GPU-seconds): the preemptions for
	// attained-service ordering (policies.RightOrder) and the work they
	// lost.
	orderPreemptions int
	orderLost        float64
	limitStops       int // jobs stopped at their time limit
	peakQueue        int
	// kindOf is each GPU's row of wl.Kinds and weight, by GPU ID, where
	// the report tells kinds apart (nil: it does not, and the meter
	// spends nothing on them); kindSec and kindEqSec are each kind's
	// GPU-seconds held and GPU-equivalent-seconds held.
	kindOf             map[string]kindSlot
	kindSec, kindEqSec []float64
}

// kindSlot is a GPU's kind (its row of Workload.Kinds) and weight.
type kindSlot struct {
	row    int
	weight float64
}

// buckets is about how many points the utilization series has.
const buckets = 400

func newMeter(wl *Workload, spec sim.Spec, start time.Time) *meter {
	m := &meter{wl: wl, capacity: wl.Capacity, startDelay: spec.StartDelay, start: start, last: start, tenantOf: map[string]int{}}
	for _, p := range wl.Base.Projects {
		for ti, pi := range wl.Projects {
			if pi.Name == p.Meta.Labels["berth.dev/tenant"] {
				m.tenantOf[p.Meta.Name] = ti
			}
		}
	}
	for _, p := range wl.Projects {
		m.quota = append(m.quota, p.Quota)
	}
	m.queued = make([]int, len(wl.Projects))
	m.waitSizes = make([][]sizeCount, len(wl.Projects))
	m.shareSum, m.shareSec = make([]float64, len(wl.Projects)), make([]float64, len(wl.Projects))
	m.held = make([]int, len(wl.Projects))
	m.entSum, m.entSec = make([]float64, len(wl.Projects)), make([]float64, len(wl.Projects))
	m.debt, m.debtSince = make([]float64, len(wl.Projects)), make([]time.Time, len(wl.Projects))
	for _, j := range wl.Jobs {
		m.grace = max(m.grace, j.Grace)
	}
	if wl.kindsReported() {
		m.kindOf = map[string]kindSlot{}
		m.kindSec, m.kindEqSec = make([]float64, len(wl.Kinds)), make([]float64, len(wl.Kinds))
		for _, n := range spec.Nodes {
			for _, g := range n.GPUs {
				row := len(wl.gpuKinds) // of no kind
				var kind *schema.GPUKind
				for k := range wl.gpuKinds {
					if wl.gpuKinds[k].Matches(g.Model) {
						row, kind = k, &wl.gpuKinds[k]
						break
					}
				}
				if row < len(wl.Kinds) {
					m.kindOf[g.ID] = kindSlot{row: row, weight: drivers.Weight(kind, g.Model)}
				}
			}
		}
	}
	span := wl.Jobs[len(wl.Jobs)-1].Submit.Sub(start)
	m.bucket = max(time.Minute, (span / buckets).Round(time.Minute))
	return m
}

// sizeCount counts a tenant's waiting jobs of one size.
type sizeCount struct{ gpus, jobs int }

func (m *meter) queue(j MappedJob, delta int) {
	ti, g := m.tenantOf[j.Ref.Project], j.PerGPUs*j.Replicas
	m.queued[ti] += delta * g
	sc := m.waitSizes[ti]
	i, ok := slices.BinarySearchFunc(sc, g, func(s sizeCount, g int) int { return cmp.Compare(s.gpus, g) })
	if !ok {
		sc = slices.Insert(sc, i, sizeCount{gpus: g})
	}
	sc[i].jobs += delta
	m.waitSizes[ti] = sc
}

// entitled is what tenant ti's quota entitles it to now, holding h: its
// GPUs held plus those of its waiting jobs that each fit in what its
// quota has left, at most its quota. A waiting job larger than that
// borrows: the quota never promised it.
func (m *meter) entitled(ti, h int) int {
	room := m.quota[ti] - h
	e := h
	for _, s := range m.waitSizes[ti] {
		if s.gpus > room {
			break
		}
		e += s.gpus * s.jobs
	}
	return min(e, m.quota[ti])
}

// decided counts a cycle whose decisions took d and took workspaces.
func (m *meter) decided(d time.Duration, took int) {
	m.decisions = append(m.decisions, d)
	m.workspaces += int64(took)
	m.months.decided(d, took)
}

// cycles counts the cycles decided, on the whole queue or not.
func (m *meter) cycles() int { return m.whole + m.narrowed }

// interval accounts for [m.last, now): the allocations of prev held their
// GPUs all of it, and worked from when they were running unless stopping.
func (m *meter) interval(prev *drivers.Snapshot, now time.Time, queued []int) {
	dt := now.Sub(m.last).Seconds()
	if dt <= 0 {
		return
	}
	clear(m.held)
	for i := range prev.Allocs {
		a := &prev.Allocs[i] // not copied: an allocation is large
		g := float64(len(a.GPUs))
		m.heldSec += g * dt
		m.held[m.tenantOf[a.Workspace.Project]] += len(a.GPUs)
		if m.kindOf != nil {
			for _, id := range a.GPUs {
				if k, ok := m.kindOf[id]; ok {
					m.kindSec[k.row] += dt
					m.kindEqSec[k.row] += k.weight * dt
				}
			}
		}
		if a.Phase == drivers.AllocStopping {
			continue
		}
		from := a.StartedAt.Add(m.startDelay)
		if from.Before(m.last) {
			from = m.last
		}
		if now.After(from) {
			m.work(from, now, g)
		}
	}
	m.promise(now, dt)
	// Fairness while someone waits: each tenant with demand against what
	// it is entitled to (its quota, or its demand when smaller).
	waiting := false
	for _, q := range queued {
		if q > 0 {
			waiting = true
			break
		}
	}
	if waiting {
		var sum, sq float64
		n := 0
		for ti := range m.held {
			e := min(m.held[ti]+queued[ti], m.quota[ti])
			if e <= 0 {
				continue
			}
			x := float64(m.held[ti]) / float64(e)
			m.shareSum[ti] += x * dt
			m.shareSec[ti] += dt
			sum += x
			sq += x * x
			n++
		}
		if n > 0 && sq > 0 {
			m.jainSum += sum * sum / (float64(n) * sq) * dt
			m.jainSec += dt
		}
		m.contendedSec += dt
	}
	m.last = now
}

// promise accounts for [m.last, now) what the quotas promise, with
// m.held and the waiting jobs as they were all of it: each tenant's
// entitlement met (min(1, held ÷ entitled) while it is entitled to
// anything: its in-quota demand, see entitled), and its quota debt (GPUs
// of its in-quota demand that wait while other tenants hold borrowed
// GPUs, once that has lasted longer than the reclaim grace).
func (m *meter) promise(now time.Time, dt float64) {
	borrowed := 0
	for ti, h := range m.held {
		borrowed += max(h-m.quota[ti], 0)
	}
	for ti, h := range m.held {
		e := m.entitled(ti, h)
		if e <= 0 {
			m.debtSince[ti] = time.Time{}
			continue
		}
		m.entSum[ti] += min(1, float64(h)/float64(e)) * dt
		m.entSec[ti] += dt
		unmet, others := e-min(h, e), borrowed-max(h-m.quota[ti], 0)
		if unmet <= 0 || others <= 0 {
			m.debtSince[ti] = time.Time{}
			continue
		}
		if m.debtSince[ti].IsZero() {
			m.debtSince[ti] = m.last
		}
		from := m.debtSince[ti].Add(m.grace)
		if from.Before(m.last) {
			from = m.last
		}
		if now.After(from) {
			m.debt[ti] += float64(min(unmet, others)) * now.Sub(from).Seconds()
		}
	}
}

// work adds g GPUs working over [from, to) to the integral and the series.
func (m *meter) work(from, to time.Time, g float64) {
	m.workSec += g * to.Sub(from).Seconds()
	for from.Before(to) {
		b := int(from.Sub(m.start) / m.bucket)
		end := m.start.Add(time.Duration(b+1) * m.bucket)
		if end.After(to) {
			end = to
		}
		for len(m.util) <= b {
			m.util = append(m.util, 0)
		}
		m.util[b] += g * end.Sub(from).Seconds()
		from = end
	}
}

// result summarizes one policy's replay.
func (m *meter) result(pol Policy, jobs []jobState, st sim.Stats, end time.Time) PolicyResult {
	res := PolicyResult{Name: pol.Name, Rule: pol.Rule, Jobs: len(jobs), Preemptions: m.preemptions, PeakQueue: m.peakQueue,
		OrderPreemptions: m.orderPreemptions, OrderLost: m.orderLost / 3600}
	if len(jobs) > 0 {
		res.PreemptionsPerJob = float64(m.preemptions) / float64(len(jobs))
	}
	var jct []float64
	waits := map[string][]float64{}
	var last time.Time
	res.Teams = make([]TeamResult, len(m.wl.Projects))
	for ti, p := range m.wl.Projects {
		res.Teams[ti].Project = p.Name
		if m.shareSec[ti] > 0 {
			res.Teams[ti].Share = m.shareSum[ti] / m.shareSec[ti]
			res.Teams[ti].ShareHours = m.shareSec[ti] / 3600
		}
		res.Teams[ti].QuotaDebt = m.debt[ti] / 3600
		res.QuotaDebt += m.debt[ti] / 3600
		if m.entSec[ti] > 0 {
			e := m.entSum[ti] / m.entSec[ti]
			res.Teams[ti].EntitlementMet, res.Teams[ti].EntitlementHours = e, m.entSec[ti]/3600
			if res.MinEntitlement == 0 || e < res.MinEntitlement {
				res.MinEntitlement = e
			}
		}
	}
	inQuota, borrowed := map[string][]float64{}, map[string][]float64{}
	for i, js := range jobs {
		j := m.wl.Jobs[i]
		var wait time.Duration
		if js.status == jobLimited {
			// Stopped at its time limit: no completion; its wait is
			// until then.
			res.LimitStopped++
			res.LimitWorkHours += (j.Duration - js.ran).Hours() * float64(j.PerGPUs*j.Replicas)
			wait = js.completed.Sub(j.Submit) - js.held
		} else if js.status == jobDone {
			res.Completed++
			jct = append(jct, js.completed.Sub(j.Submit).Seconds())
			t := &res.Teams[m.tenantOf[j.Ref.Project]]
			t.Completed++
			t.JCTMean += (js.completed.Sub(j.Submit).Seconds() - t.JCTMean) / float64(t.Completed)
			wait = js.completed.Sub(j.Submit) - js.held
			if js.completed.After(last) {
				last = js.completed
			}
		} else {
			res.Unfinished++
			wait = end.Sub(j.Submit) - js.held
		}
		if js.preempted > 0 {
			res.PreemptedJobs++
		}
		waits[j.Tier] = append(waits[j.Tier], wait.Seconds())
		switch {
		case js.firstRun.IsZero():
		case js.inQuota:
			inQuota[j.Tier] = append(inQuota[j.Tier], wait.Seconds())
		default:
			borrowed[j.Tier] = append(borrowed[j.Tier], wait.Seconds())
		}
	}
	res.JCT = summarize(jct)
	for _, t := range m.wl.tiers() {
		w := waits[t]
		s := summarize(w)
		res.Wait = append(res.Wait, TierWait{Tier: t, Jobs: len(w), P50: s.P50, P99: s.P99, Max: s.Max, Mean: s.Mean, CDF: cdf(w)})
		res.MaxWait = math.Max(res.MaxWait, s.Max)
		res.QuotaWait = append(res.QuotaWait, QuotaWait{Tier: t, InQuota: waitSummary(inQuota[t]), Borrowed: waitSummary(borrowed[t])})
	}
	busy := last.Sub(m.start).Seconds()
	res.BusySeconds = busy
	capSec := float64(m.capacity) * m.last.Sub(m.start).Seconds()
	res.GPUHours = GPUHours{
		Capacity:  capSec / 3600,
		Delivered: (st.GPUSecondsDelivered - st.GPUSecondsLost) / 3600,
		Lost:      st.GPUSecondsLost / 3600,
		Overhead:  (m.heldSec - m.workSec) / 3600,
		Idle:      (capSec - m.heldSec) / 3600,
		Worked:    m.workSec / 3600,
	}
	if res.GPUHours.Delivered > 0 {
		res.LostShare = res.GPUHours.Lost / res.GPUHours.Delivered
	}
	if m.kindOf != nil {
		span := m.last.Sub(m.start).Seconds()
		for i, k := range m.wl.Kinds {
			u := KindUse{Kind: k.Name, BusyGPUHours: m.kindSec[i] / 3600, AvailableGPUHours: float64(k.GPUs) * span / 3600,
				BusyEquivalentHours: m.kindEqSec[i] / 3600, AvailableEquivalentHours: k.Equivalents * span / 3600}
			if u.AvailableGPUHours > 0 {
				u.Utilization = u.BusyGPUHours / u.AvailableGPUHours
			}
			res.Kinds = append(res.Kinds, u)
		}
	}
	if busy > 0 {
		res.Utilization = st.GPUSecondsDelivered / (float64(m.capacity) * busy)
	}
	if m.jainSec > 0 {
		res.Fairness = m.jainSum / m.jainSec
	}
	res.ContendedHours = m.contendedSec / 3600
	res.Series = Series{BucketSeconds: m.bucket.Seconds()}
	for _, u := range m.util {
		res.Series.Utilization = append(res.Series.Utilization, round4(u/(float64(m.capacity)*m.bucket.Seconds())))
	}
	ds := make([]float64, len(m.decisions))
	for i, d := range m.decisions {
		ds[i] = d.Seconds() * 1000
	}
	s := summarize(ds)
	res.Timing = Timing{Decisions: m.whole, P50Millis: s.P50, P99Millis: s.P99, TotalSeconds: s.Mean * float64(len(ds)) / 1000,
		Narrowed: m.narrowed, Verified: m.verified, Differed: m.differed, Workspaces: m.workspaces, Months: m.months.done()}
	return res
}

// tiers lists the workload's tiers, highest value first.
func (wl *Workload) tiers() []string {
	ts := append([]schema.PriorityTier(nil), wl.Base.Tiers...)
	sort.SliceStable(ts, func(i, j int) bool { return ts[i].Spec.Value > ts[j].Spec.Value })
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Meta.Name
	}
	return out
}

// Summary is a distribution in seconds (or milliseconds for timings).
type Summary struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

func waitSummary(xs []float64) WaitSummary {
	s := summarize(xs)
	return WaitSummary{Jobs: len(xs), P50: s.P50, P99: s.P99, Max: s.Max}
}

func summarize(xs []float64) Summary {
	if len(xs) == 0 {
		return Summary{}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	var sum float64
	for _, x := range s {
		sum += x
	}
	return Summary{Mean: sum / float64(len(s)), P50: quantile(s, 0.5), P90: quantile(s, 0.9), P99: quantile(s, 0.99), Max: s[len(s)-1]}
}

// quantile is the nearest-rank quantile of sorted s.
func quantile(s []float64, q float64) float64 {
	if len(s) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// cdf samples the distribution of xs at 101 quantiles (0%, 1%, … 100%).
func cdf(xs []float64) []float64 {
	if len(xs) == 0 {
		return nil
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	out := make([]float64, 101)
	for i := range out {
		out[i] = quantile(s, float64(i)/100)
	}
	return out
}

func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }
