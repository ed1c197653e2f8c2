package replay

import (
	"cmp"
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/plan"
	"github.com/berth-dev/berth/policies"
	"github.com/berth-dev/berth/replay/baseline"
	"github.com/berth-dev/berth/schema"
)

// Policy is a scheduler under test: a pure decision function.
type Policy struct {
	Name   string
	Rule   string
	Decide func(policies.Input) policies.Decision
	// NeverPreempts: the policy only starts work on free GPUs, so the
	// replay skips deciding while no node has room for a replica of any
	// waiting job (it could not start anything).
	NeverPreempts bool
	// HeadBlocks: nothing starts while the job queued first waits (strict
	// FIFO), so the replay also skips deciding while the nodes have no
	// room for all of that job's replicas, and decides on the head of the
	// queue only (narrow.go).
	HeadBlocks bool
	// Reserves: a waiting job may hold free GPUs for itself (berth's
	// head-of-queue reservation and starvation guard), which limits when
	// the replay may screen the queue (narrow.go).
	Reserves bool
	// Turns: the decision gives each queued job its turn
	// (WorkspaceDecision.Queue), which lets the replay narrow the queue
	// in more cycles (narrow.go).
	Turns bool
	// ReclaimsLive: the policy judges whether a project borrows as the
	// decision goes (the quota baseline; berth's reclaim), so a start can make that
	// project's running work reclaimable by a job inside its own quota
	// (narrow.go).
	ReclaimsLive bool
	// Labels: the policy reads the quota labels the history keeps
	// (History.Borrowing, berth's), so the replay's history step keeps
	// them as the loop's does; the baselines read none, and the replay
	// spends nothing on them.
	Labels bool
	// Attained: the policy orders by attained service (berth's, when the
	// specs' policy turns it on), so the replay keeps each preempted
	// job's run time (History.Ran) and every job that has run is in the
	// narrowed queue's window (narrow.go).
	Attained bool
}

// Policies are the four policies `berth simulate` compares, in report
// order.
func Policies() []Policy {
	return []Policy{
		{Name: "fifo", Rule: "one queue in submit order, first-fit, no priorities, no preemption; the head blocks", Decide: baseline.FIFO, NeverPreempts: true, HeadBlocks: true},
		{Name: "nomad", Rule: "priority order, bin-packing, preempts whole allocations ≥10 priority points lower; no quotas, no checkpoint awareness", Decide: baseline.Nomad, Turns: true},
		{Name: "quota", Rule: "Kueue-like: guaranteed quotas, borrowing, reclaim from borrowers, priority within a project; no fair share, no aging", Decide: baseline.Quota, Turns: true, ReclaimsLive: true},
		{Name: "berth", Rule: "berth's engine: tiers, quotas with borrowing and reclaim, decayed fair share, aging, checkpoint-aware victims, NVLink-aware packing", Decide: policies.Decide, Reserves: true, Turns: true, ReclaimsLive: true, Labels: true, Attained: true},
	}
}

// PolicyByName returns the named policy of Policies.
func PolicyByName(name string) (Policy, bool) {
	for _, p := range Policies() {
		if p.Name == name {
			return p, true
		}
	}
	return Policy{}, false
}

// Progress is how far one policy's replay is: at its start, every few
// thousand cycles, and at its end (Finished, with the jobs that could
// never run still not Done).
type Progress struct {
	Policy      string
	Now         time.Time // the simulated time
	Done, Total int       // jobs completed, of all
	Decided     int       // the cycles decided so far (the Timing's Cycles, at the end)
	Finished    bool
}

// Options tune a replay.
type Options struct {
	// Parallel is how many policies replay at once (default 1).
	Parallel int
	// Tick, when set, lets policies decide only on multiples of Tick from
	// the first submit, as a reconciler that runs every Tick would; jobs
	// still arrive and finish at their exact times. Zero: decide at every
	// event (exact, slower on long traces).
	Tick time.Duration
	// Verify: every Verify-th decision taken on a narrowed queue
	// (narrow.go) is checked against a decision on the whole queue, which
	// is then applied; the report counts the checks and differences. Zero:
	// no checks.
	Verify int
	// Progress, when set, is told each policy's Progress now and then,
	// from the goroutine replaying it.
	Progress func(Progress)
}

// Run replays wl on cluster under each policy (each on a fresh cluster)
// and returns the report. Policies run in parallel up to opt.Parallel;
// the report does not depend on it.
func Run(wl *Workload, cluster sim.Spec, m Mapping, pols []Policy, opt Options) (*Report, error) {
	rep := newReport(wl, cluster, m)
	results := make([]PolicyResult, len(pols))
	errs := make([]error, len(pols))
	par := max(opt.Parallel, 1)
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	// Launched from the last: reports list berth, the costliest to
	// replay, last, and starting it first keeps both cores busy longest.
	for i := len(pols) - 1; i >= 0; i-- {
		p := pols[i]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			results[i], errs[i] = replayOne(wl, cluster, p, opt)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("replay %s: %w", pols[i].Name, err)
		}
	}
	rep.Policies = results
	rep.Tick = opt.Tick
	return rep, nil
}

type jobStatus int

const (
	jobFuture jobStatus = iota
	jobQueued
	jobRunning
	jobStopping
	jobDone
	// jobLimited: stopped at its time limit (Mapping.MaxRuntime) before
	// its work was done; it never runs again.
	jobLimited
)

// jobState is the replay's record of one job under one policy.
type jobState struct {
	status    jobStatus
	runStart  time.Time
	doneAt    time.Time // running: when its work is done; stopping: when its GPUs are free
	held      time.Duration
	firstRun  time.Time
	completed time.Time
	preempted int
	// inQuota: at its first start, its team's GPUs held then plus its
	// own fitted inside the team's quota.
	inQuota bool
	// ran is how long it ran over its runs before this one, each from its
	// start (as the decision counts a run: from its allocation's
	// StartedAt), what its time limit counts; atLimit: its
	// run ends (doneAt) at its time limit, not with its work done;
	// limited: it is stopping at its time limit.
	ran              time.Duration
	atLimit, limited bool
	// hasRan: History.Ran holds its record (replayer.ran lists it).
	hasRan bool
}

// replayer runs one policy over the workload.
type replayer struct {
	wl    *Workload
	pol   Policy
	spec  sim.Spec
	clock *sim.ManualClock
	cl    *sim.Cluster
	// set: the specs (its Workspaces only as wholeSet last built them);
	// live: the jobs in them now (arrived, not done), by Ref.
	set         schema.Set
	live        []int
	liveChanged bool
	refRank     []int          // each job's place in Ref order
	byRank      []int          // the job at each place in Ref order
	quota       map[string]int // each berth project's guaranteed GPUs
	hist        drivers.History
	jobs        []jobState
	tenant      map[string]int // berth project → index into wl.Projects
	freeBuf     []int
	// head: the first job (in submit order) that may still be waiting.
	head int
	// waitingBySize counts waiting jobs by GPUs per replica.
	waitingBySize map[int]int
	// classes: the waiting jobs by class (narrow.go).
	classes   map[classKey]*class
	classList []*class
	// subsets: the narrowed specs of each window try (subset), kept from
	// one decision to the next; subsetIdx, subsetBits and subsetWords
	// are scratch.
	subsets     [maxWindowTries]specsBuf
	subsetIdx   []int
	subsetBits  []uint64 // a bit per job, in Ref order
	subsetWords []uint64 // a bit per word of subsetBits
	windowBuf   []int
	// scratch: the memory each decision is built in (policies.Scratch).
	scratch policies.Scratch
	// ran lists the jobs History.Ran has a record of (and some done
	// since, whose hasRan is false), for windowJobs.
	ran []int
	// stamp and winStamp mark the jobs of the window windowJobs builds.
	stamp    []int32
	winStamp int32
	// starved: the job the last decision's starvation guard chose (zero:
	// none); classes refused under its guard start wide (classWindow).
	starved schema.Ref
	// teamHeld: the GPUs each tenant (index into wl.Projects) holds,
	// stopping victims included.
	teamHeld []int
	// limits: each job's time limit (schema.Set.MaxRuntime of its
	// workspace; nil: the specs set none).
	limits []time.Duration
	verify int
	m      *meter
	now    time.Time
	// removed counts the jobs removed since compactHistory last ran.
	removed int
}

func replayOne(wl *Workload, spec sim.Spec, pol Policy, opt Options) (PolicyResult, error) {
	progress, tick := opt.Progress, opt.Tick
	ctx := context.Background()
	if len(wl.Jobs) == 0 {
		return PolicyResult{Name: pol.Name, Rule: pol.Rule}, nil
	}
	start := wl.Jobs[0].Submit
	r := &replayer{wl: wl, pol: pol, spec: spec, clock: sim.NewManualClock(start), now: start,
		jobs: make([]jobState, len(wl.Jobs)), tenant: map[string]int{}, waitingBySize: map[int]int{},
		classes: map[classKey]*class{}, verify: opt.Verify}
	r.refRank, r.byRank = refRanks(wl)
	r.cl = sim.New(spec, r.clock)
	r.cl.KeepApplied(false) // the record would grow with every start and preemption
	r.set = *wl.Base
	r.set.Workspaces = nil
	r.hist = drivers.History{UsageAt: start, Usage: map[string]float64{}, QueuedSince: map[schema.Ref]time.Time{}, Preempted: map[schema.Ref]drivers.Preemption{}, Borrowing: map[schema.Ref]bool{}}
	if pol.Attained && len(r.set.Policy.Spec.Service.Steps) > 0 {
		r.hist.Ran = map[schema.Ref]drivers.RunTime{}
		r.stamp = make([]int32, len(wl.Jobs))
	}
	r.quota = map[string]int{}
	for _, p := range wl.Base.Projects {
		r.quota[p.Meta.Name] = p.Spec.Quota.GPUs
		for ti, pi := range wl.Projects {
			if pi.Name == p.Meta.Labels["berth.dev/tenant"] {
				r.tenant[p.Meta.Name] = ti
			}
		}
	}
	r.m = newMeter(wl, spec, start)
	r.teamHeld = make([]int, len(wl.Projects))
	r.limits = jobLimits(wl)
	halfLife := wl.Base.Policy.Spec.FairShare.HalfLife
	// prev is the last cycle's snapshot; spare, the array the next is
	// built on (ObserveInto): the one before it.
	var prev drivers.Snapshot
	var spare []drivers.Alloc
	next := 0 // next arrival
	done := 0
	var running []int // jobs holding GPUs (running or stopping), in Ref order (subset merges it)
	cycles, same := 0, 0
	if progress != nil {
		progress(Progress{Policy: pol.Name, Now: start, Total: len(wl.Jobs)})
	}
	for {
		// 1. Account for [prev cycle, now) and advance usage.
		r.m.months.at(r.now)
		r.m.interval(&prev, r.now, r.queuedGPUs())
		r.advanceUsage(&prev, halfLife)
		// 2. Jobs whose work is done finish; victims whose grace ended are gone.
		keep := running[:0]
		for _, ji := range running {
			js := &r.jobs[ji]
			if js.doneAt.After(r.now) {
				keep = append(keep, ji)
				continue
			}
			if js.status == jobRunning && js.atLimit {
				// At its time limit: stopped with its grace, as the
				// decision's limit stops it (policies' limits.go).
				if err := r.limitStop(ctx, ji); err != nil {
					return PolicyResult{}, err
				}
				keep = append(keep, ji)
				continue
			}
			js.held += js.doneAt.Sub(js.runStart)
			r.hold(ji, -1)
			if js.status == jobStopping && !js.limited {
				js.status = jobQueued // a victim, gone: it queues again
				r.queue(ji, +1)
				continue
			}
			// Done, or stopped at its time limit: it never starts again.
			// The simulator forgets the work it kept (its totals keep
			// it), or it would hold an entry for every job done.
			r.cl.Finish(wl.Jobs[ji].Ref)
			if err := r.cl.Apply(ctx, drivers.Action{Kind: drivers.ActionPurge, Workspace: wl.Jobs[ji].Ref}); err != nil {
				return PolicyResult{}, err
			}
			js.status, js.completed = jobDone, js.doneAt
			if js.limited {
				js.status = jobLimited
			}
			r.remove(ji)
			done++
		}
		running = keep
		// 3. Arrivals.
		for next < len(wl.Jobs) && !wl.Jobs[next].Submit.After(r.now) {
			r.insert(next)
			r.jobs[next].status = jobQueued
			r.hist.QueuedSince[wl.Jobs[next].Ref] = wl.Jobs[next].Submit
			r.queue(next, +1)
			next++
		}
		r.m.peakQueue = max(r.m.peakQueue, r.waitingJobs())
		// 4. Decide and apply, when someone waits: with no job waiting,
		// no policy starts or preempts anything.
		snap, err := r.cl.ObserveInto(ctx, spare)
		if err != nil {
			return PolicyResult{}, err
		}
		due := r.waiting() && (!pol.NeverPreempts || r.startable(&snap))
		owed := due && tick > 0 && r.now.Sub(start)%tick != 0 // a decision waits for the next tick
		if due && !owed {
			d, specs := r.decide(&snap, running)
			started, err := r.apply(ctx, specs, &snap, d, &running)
			if err != nil {
				return PolicyResult{}, err
			}
			r.record(d)
			for _, ji := range started {
				j, js := &wl.Jobs[ji], &r.jobs[ji]
				js.doneAt = r.now.Add(spec.StartDelay + j.Duration - resumedFrom(&snap, j.Ref))
				if lim := r.limitOf(ji); lim > 0 {
					if at := r.now.Add(max(0, lim-js.ran)); at.Before(js.doneAt) {
						js.doneAt, js.atLimit = at, true
					}
				}
			}
		}
		spare, prev = prev.Allocs, snap
		// 5. The next moment something changes.
		var at time.Time
		if next < len(wl.Jobs) {
			at = wl.Jobs[next].Submit
		}
		for _, ji := range running {
			if d := r.jobs[ji].doneAt; at.IsZero() || d.Before(at) {
				at = d
			}
		}
		if owed {
			boundary := start.Add((r.now.Sub(start)/tick + 1) * tick)
			if at.IsZero() || boundary.Before(at) {
				at = boundary
			}
		}
		cycles++
		if progress != nil && cycles%2048 == 0 {
			progress(Progress{Policy: pol.Name, Now: r.now, Done: done, Total: len(wl.Jobs), Decided: r.m.cycles()})
		}
		if at.IsZero() {
			break // nothing runs, nothing arrives: what still waits can never run
		}
		if !at.After(r.now) {
			if same++; same > 1000 {
				return PolicyResult{}, fmt.Errorf("%s: 1000 decisions at %s without time moving: the policy keeps preempting what it just started", pol.Name, r.now.Format(time.RFC3339))
			}
			continue // a victim that never started is gone already: decide again now
		}
		same = 0
		r.clock.Advance(at.Sub(r.now))
		r.now = at
	}
	if progress != nil {
		progress(Progress{Policy: pol.Name, Now: r.now, Done: done, Total: len(wl.Jobs), Decided: r.m.cycles(), Finished: true})
	}
	stats := r.cl.Stats()
	return r.m.result(pol, r.jobs, stats, r.now), nil
}

// apply carries out decision d, made on specs, as the loop's cycle does:
// plan.New (plan.NewWith) turns it into actions, sent by
// the loop's rule (plan.Plan.Waves): preemptions first, then the starts
// no Wait holds back. A victim that never started working (or has no
// grace) is gone at once, which snap, from before the preemptions, does
// not show: then the cluster is observed and d planned again, as the
// loop's next cycle would at the same instant (it decides again too),
// so its preemptor may start in this same pass. snap is left the
// cluster as it is after the actions. started lists the jobs started.
func (r *replayer) apply(ctx context.Context, specs *schema.Set, snap *drivers.Snapshot, d policies.Decision, running *[]int) (started []int, err error) {
	if !acts(d) {
		// Nothing to plan: the replay's specs never change and every job
		// holding GPUs is decided, so plan.New would update and stop
		// nothing (checked wherever it plans).
		return nil, nil
	}
	p := plan.NewWith(specs, snap, d, planOptions)
	waves, _ := p.Waves()
	gone := false // a victim is gone at once
	for _, i := range waves[0] {
		a := &p.Actions[i]
		if a.Kind != drivers.ActionPreempt {
			return nil, fmt.Errorf("%s %s: the replay's specs want every job running, and it decides on every one that holds GPUs", a.Kind, a.Workspace)
		}
		g, err := r.preempted(ctx, a, decisionOf(d, a.Workspace), running)
		if err != nil {
			return nil, err
		}
		gone = gone || g
	}
	if gone {
		if *snap, err = r.cl.ObserveInto(ctx, snap.Allocs); err != nil {
			return nil, err
		}
		p = plan.NewWith(specs, snap, d, planOptions)
		waves, _ = p.Waves()
	}
	for _, i := range waves[1] {
		a := &p.Actions[i]
		if a.Kind != drivers.ActionStart {
			return nil, fmt.Errorf("%s %s: the replay never changes a job's spec or tier", a.Kind, a.Workspace)
		}
		if ji, ok := r.start(ctx, a, running); ok {
			started = append(started, ji)
		}
	}
	if len(started) > 0 || len(waves[0]) > 0 && !gone {
		if *snap, err = r.cl.ObserveInto(ctx, snap.Allocs); err != nil {
			return nil, err
		}
	}
	return started, nil
}

// record is the replay's history step: each workspace of d keeps the
// quota label d gave it, as the loop's RecordDecision keeps it
// (policies.RecordAdmission), so a running job stays admitted inside its
// quota or borrowing as it was admitted. d holds every job that holds
// GPUs (subset), so no running job's label is left behind. The queue
// places and preemption records are kept as the jobs arrive, start and
// are preempted (RecordDecision would forget the places of the jobs a
// narrowed queue leaves out).
func (r *replayer) record(d policies.Decision) {
	if !r.pol.Labels {
		return
	}
	for i := range d.Workspaces {
		policies.RecordAdmission(r.hist.Borrowing, &d.Workspaces[i])
	}
}

// planOptions: the replay's specs and priorities never change, and it
// decides every job that holds GPUs (plan.Options.Settled), so a plan
// costs what the decision starts and preempts, as reading the verdicts
// did.
var planOptions = plan.Options{Settled: true}

// acts reports whether d starts or preempts anything.
func acts(d policies.Decision) bool {
	for i := range d.Workspaces {
		if v := d.Workspaces[i].Verdict; v == policies.VerdictStart || v == policies.VerdictPreempt {
			return true
		}
	}
	return false
}

// preempted applies Preempt a and records it: the job stops, at once
// (gone) when it never started working or has no grace.
func (r *replayer) preempted(ctx context.Context, a *drivers.Action, wd *policies.WorkspaceDecision, running *[]int) (gone bool, err error) {
	ji, ok := r.job(a.Workspace)
	if !ok || r.jobs[ji].status != jobRunning {
		return false, fmt.Errorf("preempt %s: the plan preempts a job the replay does not see running", a.Workspace)
	}
	if wd != nil && wd.Right == policies.RightOrder {
		r.m.orderPreemptions++
		r.m.orderLost += r.cl.AtRisk(a.Workspace)
	}
	if err := r.cl.Apply(ctx, *a); err != nil {
		return false, err
	}
	js := &r.jobs[ji]
	js.preempted++
	r.m.preemptions++
	js.ran += max(0, r.now.Sub(js.runStart))
	js.atLimit = false
	if a.By != (schema.Ref{}) {
		r.hist.Preempted[a.Workspace] = drivers.Preemption{Victim: a.Workspace, By: a.By, At: r.now}
	}
	if r.hist.Ran != nil {
		// Attained-service ordering reads it (policies.ranFor).
		r.hist.Ran[a.Workspace] = drivers.RunTime{Ran: js.ran, At: r.now}
		if !js.hasRan {
			js.hasRan = true
			r.ran = append(r.ran, ji)
		}
	}
	js.status = jobStopping
	js.doneAt = r.now.Add(r.wl.Jobs[ji].Grace)
	if r.now.Before(js.runStart.Add(r.spec.StartDelay)) || !js.doneAt.After(r.now) {
		// It never started working (or has no grace): the simulator
		// drops it at once.
		js.held += r.now.Sub(js.runStart)
		r.hold(ji, -1)
		js.status = jobQueued
		r.queue(ji, +1)
		*running = slices.DeleteFunc(*running, func(k int) bool { return k == ji })
		return true, nil
	}
	return false, nil
}

// jobLimits is each job's time limit, from its workspace's spec in the
// workload's specs (schema.Set.MaxRuntime); nil when they set none.
func jobLimits(wl *Workload) []time.Duration {
	if !wl.Base.HasRuntimeLimits() {
		return nil
	}
	out := make([]time.Duration, len(wl.Jobs))
	for i := range wl.Jobs {
		w := wl.Jobs[i].Workspace()
		out[i] = wl.Base.MaxRuntime(&w).Max
	}
	return out
}

// limitOf is job ji's time limit (0: none).
func (r *replayer) limitOf(ji int) time.Duration {
	if r.limits == nil {
		return 0
	}
	return r.limits[ji]
}

// limitStop stops running job ji at its time limit, as the loop stops
// it: a stop with its grace, its GPUs free once the grace is over, and
// it never runs again (jobLimited).
func (r *replayer) limitStop(ctx context.Context, ji int) error {
	ref := r.wl.Jobs[ji].Ref
	if err := r.cl.Apply(ctx, drivers.Action{Kind: drivers.ActionStop, Workspace: ref, Reason: "time limit"}); err != nil {
		return err
	}
	js := &r.jobs[ji]
	js.ran += max(0, r.now.Sub(js.runStart))
	js.status, js.atLimit, js.limited = jobStopping, false, true
	js.doneAt = r.now.Add(r.wl.Jobs[ji].Grace)
	r.m.limitStops++
	return nil
}

// start applies Start a and records it; ok is false when the cluster
// refused it (its GPUs are not free yet: decided again when they are).
func (r *replayer) start(ctx context.Context, a *drivers.Action, running *[]int) (ji int, ok bool) {
	ji, ok = r.job(a.Workspace)
	if !ok || r.jobs[ji].status != jobQueued {
		return 0, false
	}
	if err := r.cl.Apply(ctx, *a); err != nil {
		return 0, false
	}
	j := &r.wl.Jobs[ji]
	js := &r.jobs[ji]
	if js.firstRun.IsZero() {
		js.firstRun = r.now
		js.inQuota = r.teamHeld[r.m.tenantOf[j.Ref.Project]]+j.PerGPUs*j.Replicas <= r.m.quota[r.m.tenantOf[j.Ref.Project]]
	}
	r.hold(ji, +1)
	js.status, js.runStart = jobRunning, r.now
	delete(r.hist.Preempted, a.Workspace)
	r.queue(ji, -1)
	*running = r.inRefOrder(*running, ji)
	return ji, true
}

// resumedFrom returns the work that ref's run in snap resumed from (its
// allocations are found by binary search: snap's are sorted by
// workspace).
func resumedFrom(snap *drivers.Snapshot, ref schema.Ref) time.Duration {
	if own := drivers.AllocsOf(snap.Allocs, ref); len(own) > 0 {
		return own[0].ResumedFrom
	}
	return 0
}

// hold counts job ji's GPUs taken (+1) or given back (-1) by its team.
func (r *replayer) hold(ji, delta int) {
	j := &r.wl.Jobs[ji]
	r.teamHeld[r.m.tenantOf[j.Ref.Project]] += delta * j.PerGPUs * j.Replicas
}

// insert adds job ji's workspace to the specs.
func (r *replayer) insert(ji int) {
	r.live = r.inRefOrder(r.live, ji)
	r.liveChanged = true
}

// inRefOrder inserts job ji into jobs, kept in Ref order.
func (r *replayer) inRefOrder(jobs []int, ji int) []int {
	i, _ := slices.BinarySearchFunc(jobs, ji, r.cmpJobs)
	return slices.Insert(jobs, i, ji)
}

// remove takes job ji's workspace out of the specs.
func (r *replayer) remove(ji int) {
	if i, ok := slices.BinarySearchFunc(r.live, ji, r.cmpJobs); ok {
		r.live = slices.Delete(r.live, i, i+1)
		r.liveChanged = true
	}
	ref := r.wl.Jobs[ji].Ref
	delete(r.hist.QueuedSince, ref)
	delete(r.hist.Preempted, ref)
	delete(r.hist.Borrowing, ref)
	delete(r.hist.Ran, ref)
	r.jobs[ji].hasRan = false
	r.removed++
	if r.removed >= max(refillMin, refillFactor*len(r.hist.QueuedSince)) {
		r.compactHistory()
	}
}

// compactHistory runs once refillFactor times as many jobs as wait, and
// at least refillMin, were removed since it last ran (variables for
// TestRefilledHistory).
var refillMin, refillFactor = 1024, 2

// compactHistory copies the history's maps of workspaces into fresh
// ones. A Go map that entries leave and join for months does not stay
// as quick to search as a fresh one of the same size: a deletion can
// leave a tombstone that later searches must step over, and the map
// sweeps only those no entry needs. On the tiled year as first built
// (3 times the single trace's decisions, over 3.35 times its
// workspaces), berth's lookups in them took 4.4 times the single trace's
// time; copied every 4,096 cycles, 3 times. The copies hold the same
// entries, and nothing reads a map's order.
func (r *replayer) compactHistory() {
	r.removed = 0
	r.hist.QueuedSince = refilled(r.hist.QueuedSince)
	r.hist.Preempted = refilled(r.hist.Preempted)
	r.hist.Borrowing = refilled(r.hist.Borrowing)
	r.hist.Ran = refilled(r.hist.Ran)
}

// refilled returns a fresh map holding m's entries (nil for nil).
// maps.Clone would copy m's tables as they are, tombstones and all.
func refilled[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return nil
	}
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// cmpJobs orders jobs by their workspaces' Refs, as specs are.
func (r *replayer) cmpJobs(a, b int) int { return cmp.Compare(r.refRank[a], r.refRank[b]) }

// job returns the job whose workspace is ref, by a binary search in Ref
// order: a map from Ref held for every job of a long trace was scanned
// by the garbage collector in every cycle.
func (r *replayer) job(ref schema.Ref) (int, bool) {
	k, ok := slices.BinarySearchFunc(r.byRank, ref, func(ji int, ref schema.Ref) int { return r.wl.Jobs[ji].Ref.Compare(ref) })
	if !ok {
		return -1, false
	}
	return r.byRank[k], true
}

// refRanks returns each job's place among all jobs in Ref order, and
// the job at each place.
func refRanks(wl *Workload) (rank, byRef []int) {
	byRef = make([]int, len(wl.Jobs))
	for i := range byRef {
		byRef[i] = i
	}
	slices.SortFunc(byRef, func(a, b int) int { return wl.Jobs[a].Ref.Compare(wl.Jobs[b].Ref) })
	rank = make([]int, len(wl.Jobs))
	for k, ji := range byRef {
		rank[ji] = k
	}
	return rank, byRef
}

// wholeSet returns the specs with every job's workspace, built from live
// when it changed since the last call.
func (r *replayer) wholeSet() *schema.Set {
	if r.liveChanged {
		r.set.Workspaces = r.set.Workspaces[:0]
		for _, ji := range r.live {
			r.set.Workspaces = append(r.set.Workspaces, r.wl.Jobs[ji].Workspace())
		}
		r.liveChanged = false
	}
	return &r.set
}

// advanceUsage decays usage to now and adds what prev's allocations used
// since the last cycle (they held their GPUs all that time).
func (r *replayer) advanceUsage(prev *drivers.Snapshot, halfLife time.Duration) {
	h := policies.AdvanceUsage(drivers.History{UsageAt: r.hist.UsageAt, Usage: r.hist.Usage}, *prev, r.now, halfLife, r.set.Kinds)
	r.hist.Usage, r.hist.UsageAt = h.Usage, h.UsageAt
}

func (r *replayer) queuedGPUs() []int { return r.m.queued }

// queue counts job ji joining (+1) or leaving (-1) the waiting jobs.
func (r *replayer) queue(ji int, delta int) {
	j := &r.wl.Jobs[ji]
	r.m.queue(*j, delta)
	r.waitingBySize[j.PerGPUs] += delta
	if delta > 0 {
		r.classJoin(ji)
	} else {
		r.classLeave(ji)
	}
}

// startable reports whether the free GPUs of snap could hold some
// waiting job: a node with room for one replica of it (for a policy whose
// head blocks: room for all the replicas of the head). It counts a
// node's free GPUs of every kind and model together, more than a job of
// one kind (or of none: whole GPUs only) may take: it may say a job could
// start when none can, which costs a decision, never that none could when
// one can.
func (r *replayer) startable(snap *drivers.Snapshot) bool {
	free := r.freeByNode(snap)
	fits := func(j MappedJob) bool {
		room := 0
		for _, f := range free {
			room += f / j.PerGPUs
		}
		return room >= j.Replicas
	}
	if r.pol.HeadBlocks {
		// The first queued job blocks the rest; it never leaves the queue
		// but by starting, so the head only moves forward.
		for r.head < len(r.jobs) && r.jobs[r.head].status != jobQueued && r.jobs[r.head].status != jobFuture {
			r.head++
		}
		if r.head < len(r.jobs) && r.jobs[r.head].status == jobQueued {
			// Jobs submitted at the same instant tie; FIFO breaks the tie
			// its own way, so any of them may be its head.
			at := r.wl.Jobs[r.head].Submit
			for k := r.head; k < len(r.jobs) && r.wl.Jobs[k].Submit.Equal(at); k++ {
				if r.jobs[k].status == jobQueued && fits(r.wl.Jobs[k]) {
					return true
				}
			}
			return false
		}
	}
	most := 0
	for _, f := range free {
		most = max(most, f)
	}
	for size, n := range r.waitingBySize {
		if n > 0 && size <= most {
			return true
		}
	}
	return false
}

// freeByNode counts the free usable GPUs of each node of snap.
func (r *replayer) freeByNode(snap *drivers.Snapshot) []int {
	free := r.freeBuf[:0]
	for i := range snap.Nodes {
		free = append(free, snap.Nodes[i].UsableGPUs())
	}
	i := -1 // the node of the allocation before: a job's replicas often share one
	for k := range snap.Allocs {
		a := &snap.Allocs[k] // not copied: an allocation is large
		if i < 0 || snap.Nodes[i].Name != a.Node {
			i = sort.Search(len(snap.Nodes), func(i int) bool { return snap.Nodes[i].Name >= a.Node })
			if i == len(snap.Nodes) || snap.Nodes[i].Name != a.Node {
				i = -1
				continue
			}
		}
		free[i] -= len(a.GPUs)
	}
	r.freeBuf = free
	return free
}

// waitingJobs counts the jobs waiting for GPUs.
func (r *replayer) waitingJobs() int {
	n := 0
	for _, c := range r.waitingBySize {
		n += c
	}
	return n
}

// waiting reports whether any job waits for GPUs.
func (r *replayer) waiting() bool {
	for _, q := range r.m.queued {
		if q > 0 {
			return true
		}
	}
	return false
}

// LimitGC sets the garbage collector for a replay, and returns what puts
// it back. A replay allocates a snapshot and a decision per event and
// keeps little: a few hundred bytes a job of the trace, and what runs
// and waits (berth over the first 40,000 Philly jobs: 41–53 MiB live
// after each collection; fifo over the Philly trace three times over:
// 94–103 MB). So it collects garbage only as the heap
// nears 512 MiB, not every time the heap doubles. Before, the limit was
// 2 GiB, and every trace long enough to allocate that much (the garbage
// grows with the events) peaked near 2 GiB of RSS whatever it kept.
func LimitGC() (restore func()) {
	percent := debug.SetGCPercent(-1)
	limit := debug.SetMemoryLimit(512 << 20)
	return func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	}
}
