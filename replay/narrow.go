package replay

import (
	mathbits "math/bits"
	"reflect"
	"slices"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/policies"
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
//   - Every other policy, a window per class: waiting jobs of one class
//     (same project, tier, shape, GPU kind and checkpoint interval) have the same needs
//     and rights, and come in their class's order (queued first, first) in
//     the policy's queue. The window holds each class's first jobs, one
//     more than the free GPUs could start (jobs waiting to resume aside,
//     see below). When the window's decision preempts nothing and leaves
//     a job of every cut class waiting, the whole queue's decision starts
//     the same jobs at the same places: a decision that preempts nothing
//     only takes GPUs and quota as it goes, so once a job of a class
//     cannot start, no later one can, and a job that cannot start leaves
//     the cluster as it found it.
//   - A policy that reports each job's turn (Policy.Turns, berth) may
//     also preempt: victims free GPUs their preemptor may not all take,
//     and their projects hold less, so a cut class's last job in the
//     window must have had its turn after the last preemptor's.
//   - A policy that ReclaimsLive (the quota baseline) judges who borrows
//     as it goes: a start can make another project's running work
//     reclaimable. A cut class inside its quota must then have had its
//     turn after every start.
//   - A policy that Reserves lets a waiting job hold free GPUs for itself.
//     berth's head of the queue (the first gang that cannot start) only
//     takes GPUs from those after it, and the window's is the whole
//     queue's (a cut job comes after a job of its class that failed). Its
//     starvation guard reserves for the starved job (Decision.Starved)
//     just before the first job that does not outrank it (in-quota
//     before borrowing, then tier), and lets go at the starved job's
//     turn, where it may start or reserve again. When the decision names
//     a starved job and starts or holds anything, a cut job sees what its
//     class's last job in the window saw (less what starts took) unless
//     that last job came before the starved job's turn and either
//       - a start of its project came after it while it may have been
//         inside its quota (the jobs its project surely held then leave
//         room for it: mayFitQuota): the cut jobs may be beyond the
//         quota, rank otherwise and make the guard reserve elsewhere; a
//         job already beyond its quota stays beyond it, starts only add;
//       - or it is of the starved job's tier and the guard let go, at
//         the starved job's turn, of GPUs it neither started on nor held
//         again (Decision.GuardReleased): a cut job of that tier may
//         come after that turn and take them. A job of another tier that
//         came before comes before with all its class (the queue orders
//         by rank, then tier).
//     With nothing started or held, nothing was held at any point (the
//     starved job would hold GPUs again, having started nothing).
//
//   - berth holds a job waiting to resume back while the job of its
//     project that preempted it waits and has not had its turn: such a
//     job's waiting says nothing of its class, so it does not count as
//     the class's job left waiting (resumeHeld).
//   - A policy that orders by attained service (Policy.Attained) queues a
//     job that has run by the GPU-time it ran and how long it has waited
//     since, not in its class's order, and may preempt for a job that
//     has run less: every job waiting to resume is in the window, and
//     only jobs that never ran are cut, each class's in its own order
//     (they have run nothing, so they rank as their class's order says).
//
// A class that breaks a rule has all its jobs in the next window; after
// three windows (or a preemption by a policy without Turns) the policy
// decides on the whole queue. A class that broke the guard's rule starts
// with all its jobs in the first window of later cycles, while the guard
// names the same starved job: cut, it would break it again (berth's
// guard names one job for hours, and before this most of berth's cycles
// decided twice). Any window the rules accept decides as the whole queue,
// so which window a cycle starts from changes its cost, not its outcome.
//
// Options.Verify decides on the whole queue as well every Nth narrowed
// decision and counts the cycles whose outcome differs (the whole queue's
// decision is applied then). The tests verify every one.

// classKey groups waiting jobs whose admission a policy cannot tell apart.
type classKey struct {
	project        string
	tier           int // the workspace's own tier: a project's jobs differ in it
	gpus, replicas int
	checkpoint     time.Duration
	kind           string // the GPU kind it asks for: jobs of two kinds need other GPUs
}

// class is the jobs of one classKey waiting now, queued first first;
// window: how many of them this cycle's narrowed queue holds.
type class struct {
	waiting []int
	window  int
	// wideUnder: the starved job under whose guard a window of this
	// class last broke the guard's rule (windowDecides). While the guard
	// names that job, the class's first window holds all its jobs: cut, it
	// would break the rule again, and the cycle decide a second time.
	wideUnder schema.Ref
}

func (r *replayer) classOf(ji int) *class {
	j := &r.wl.Jobs[ji]
	k := classKey{j.Ref.Project, j.TierValue, j.PerGPUs, j.Replicas, j.Checkpoint, j.Kind}
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
// exact (see above), and returns its decision and the specs it decided
// on, which hold every job the decision names (until the next decide,
// which reuses them). The meter gets the time the
// cycle's deciding took (the window and, where the window could not
// decide, the whole queue), checks against the whole queue aside.
func (r *replayer) decide(snap *drivers.Snapshot, running []int) (out policies.Decision, specs *schema.Set) {
	defer func() { r.starved = starvedOf(out) }()
	t0 := time.Now()
	free := 0
	for _, f := range r.freeByNode(snap) {
		free += f
	}
	// Every decision of the cycle is built on r.scratch: the cycle keeps
	// only the last, and the one before it is done with by now.
	in := policies.Input{Snapshot: snap, History: &r.hist, Now: r.now, Scratch: &r.scratch}
	var narrow []int
	switch {
	case r.pol.HeadBlocks:
		narrow = r.fifoWindow(free + 1)
	default:
		narrow = r.classWindow(free)
	}
	set := r.subset(0, running, narrow)
	in.Specs = &set
	d := r.pol.Decide(in)
	took := len(set.Workspaces) // the workspaces the cycle's decisions took
	for try := 1; !r.pol.HeadBlocks; try++ {
		ok, widen := r.windowDecides(d, running)
		if ok {
			break
		}
		if !widen || try == maxWindowTries {
			return r.decideWhole(&in, t0, took), in.Specs
		}
		// The classes refused have all their jobs in the window this time.
		set = r.subset(try, running, r.windowJobs())
		in.Specs = &set
		d = r.pol.Decide(in)
		took += len(set.Workspaces)
	}
	r.m.decided(time.Since(t0), took)
	r.m.narrowed++
	if r.verify > 0 && r.m.narrowed%r.verify == 0 {
		in.Specs, in.Scratch = r.wholeSet(), nil // d is still read
		whole := r.pol.Decide(in)
		r.m.verified++
		if !sameOutcome(d, whole) {
			r.m.differed++
		}
		return whole, in.Specs
	}
	return d, in.Specs
}

// classWindow sets each class's window to its first jobs, one more than
// free GPUs could start, not counting jobs waiting to resume, and returns
// the jobs in the windows. A job waiting to resume says nothing of its
// class when it does not start (resumeHeld): had the window counted it,
// a class whose first jobs were preempted would be refused whenever its
// others all started, and decided again on all its jobs.
func (r *replayer) classWindow(free int) []int {
	for _, c := range r.classList {
		c.window = 0
		if len(c.waiting) == 0 {
			continue
		}
		if r.starved != (schema.Ref{}) && c.wideUnder == r.starved {
			c.window = len(c.waiting)
			continue
		}
		j := &r.wl.Jobs[c.waiting[0]]
		want := free/(j.PerGPUs*j.Replicas) + 1
		if len(r.hist.Preempted) == 0 && len(r.hist.Ran) == 0 {
			c.window = min(len(c.waiting), want)
			continue
		}
		for ; c.window < len(c.waiting) && want > 0; c.window++ {
			if !r.resumes(c.waiting[c.window]) {
				want--
			}
		}
	}
	return r.windowJobs()
}

// windowJobs returns the jobs in the classes' windows.
func (r *replayer) windowJobs() []int {
	out := r.windowBuf[:0]
	for _, c := range r.classList {
		out = append(out, c.waiting[:c.window]...)
	}
	if len(r.hist.Ran) > 0 {
		// Attained-service ordering: a job that has run queues by its
		// attained service and its wait since, not its class's order, so
		// every one waiting is in the window; those cut are jobs that
		// never ran, in their class's order.
		r.winStamp++
		for _, ji := range out {
			r.stamp[ji] = r.winStamp
		}
		keep := r.ran[:0]
		for _, ji := range r.ran {
			js := &r.jobs[ji]
			if !js.hasRan {
				continue // done: its record is gone
			}
			keep = append(keep, ji)
			if js.status == jobQueued && r.stamp[ji] != r.winStamp {
				out = append(out, ji)
			}
		}
		r.ran = keep
	}
	r.windowBuf = out
	return out
}

// resumes reports whether job ji has run before (waiting, it waits to
// resume).
func (r *replayer) resumes(ji int) bool {
	ref := r.wl.Jobs[ji].Ref
	if _, ok := r.hist.Preempted[ref]; ok {
		return true
	}
	_, ok := r.hist.Ran[ref]
	return ok
}

// windowDecides reports whether d, decided on the classes' windows, is
// the whole queue's: it preempts nothing (with Turns: nothing after any
// cut class's last job in the window had its turn) and, of every class
// the window cut, leaves a job waiting. Where a policy that Reserves names
// a starved job and the decision starts or holds anything, the guard's
// rule (see above) must hold too. When not, widen reports whether giving
// the classes that broke a rule all their jobs could help (it does so);
// a preemption by a policy without Turns cannot be helped.
func (r *replayer) windowDecides(d policies.Decision, running []int) (ok, widen bool) {
	started := map[*class]int{}
	lastStart := map[string]int{} // project → the queue position of its last start
	inert := true                 // starts and holds nothing
	lastPreempt := 0              // the queue position of the last start that preempts
	var starts []int              // the jobs started
	for i := range d.Workspaces {
		wd := &d.Workspaces[i]
		inert = inert && wd.Verdict != policies.VerdictStart && len(wd.Holding) == 0
		switch wd.Verdict {
		case policies.VerdictPreempt:
			if !r.pol.Turns {
				return false, false
			}
		case policies.VerdictStart:
			if ji, ok := r.job(wd.Ref); ok && r.jobs[ji].status == jobQueued {
				started[r.classOf(ji)]++
				lastStart[wd.Ref.Project] = max(lastStart[wd.Ref.Project], wd.Queue)
				starts = append(starts, ji)
			}
			if len(wd.Preempts) > 0 {
				lastPreempt = max(lastPreempt, wd.Queue)
			}
		}
	}
	starved, starvedTier := -1, 0
	if r.pol.Reserves && d.Starved != nil && !inert {
		starved = queuePos(d, *d.Starved)
		if ji, ok := r.job(*d.Starved); ok {
			starvedTier = r.wl.Jobs[ji].TierValue
		}
	}
	lastAny := 0 // the queue position of the last start
	for _, q := range lastStart {
		lastAny = max(lastAny, q)
	}
	var held map[string]int // by project, what its running jobs hold
	if r.pol.ReclaimsLive && lastAny > 0 {
		held = map[string]int{}
		for _, ji := range running {
			if j := &r.wl.Jobs[ji]; r.jobs[ji].status == jobRunning {
				held[j.Ref.Project] += j.PerGPUs * j.Replicas
			}
		}
	}
	var refused []*class
	for _, c := range r.classList {
		if c.window == len(c.waiting) {
			continue // nothing cut
		}
		last := &r.wl.Jobs[c.waiting[c.window-1]]
		q := 0
		if r.pol.Turns {
			q = queuePos(d, last.Ref)
		}
		switch {
		case starved >= 0 && q < starved && ((last.TierValue == starvedTier && d.GuardReleased) || (q <= lastStart[last.Ref.Project] && r.mayFitQuota(d, starts, last, q))):
			c.wideUnder = *d.Starved
			refused = append(refused, c)
		case started[c]+r.resumeHeld(d, c) >= c.window, // all started (or held back by a preemptor): the next might have
			lastPreempt > 0 && q <= lastPreempt,
			held != nil && q <= lastAny && held[last.Ref.Project]+last.PerGPUs*last.Replicas <= r.quota[last.Ref.Project]:
			refused = append(refused, c)
		}
	}
	for _, c := range refused {
		c.window = len(c.waiting)
	}
	return len(refused) == 0, len(refused) > 0
}

// mayFitQuota reports whether last, queued at q in d, may have fit in
// what its project's quota had left at its turn: whether the GPUs its
// project surely held then (its jobs d keeps running, and those of
// starts that started before q) leave room for it. A job beyond its
// quota at its turn, with no victim of its project after that (a
// preemption after q refuses the window anyway), stays beyond it, and so
// do the jobs of its class after it: its project's starts after q change
// neither their rank nor their rights.
func (r *replayer) mayFitQuota(d policies.Decision, starts []int, last *MappedJob, q int) bool {
	proj := last.Ref.Project
	held := 0
	for _, ji := range starts {
		j := &r.wl.Jobs[ji]
		if j.Ref.Project == proj && queuePos(d, j.Ref) < q {
			held += j.PerGPUs * j.Replicas
		}
	}
	for i := range d.Workspaces {
		wd := &d.Workspaces[i]
		if wd.Ref.Project == proj && wd.Verdict == policies.VerdictRun {
			for _, pl := range wd.Placements {
				held += len(pl.GPUs)
			}
		}
	}
	return held+last.PerGPUs*last.Replicas <= r.quota[proj]
}

// resumeHeld counts the jobs in c's window that d did not start and that
// wait to resume: berth holds such a job back while the job that
// preempted it waits to start, which the rest of its class are not, so
// its waiting says nothing about theirs.
func (r *replayer) resumeHeld(d policies.Decision, c *class) int {
	if len(r.hist.Preempted) == 0 {
		return 0
	}
	n := 0
	for _, ji := range c.waiting[:c.window] {
		ref := r.wl.Jobs[ji].Ref
		if _, ok := r.hist.Preempted[ref]; ok {
			if w := decisionOf(d, ref); w == nil || w.Verdict != policies.VerdictStart {
				n++
			}
		}
	}
	return n
}

// starvedOf is the job d's starvation guard chose (zero: none).
func starvedOf(d policies.Decision) schema.Ref {
	if d.Starved == nil {
		return schema.Ref{}
	}
	return *d.Starved
}

// maxWindowTries: how many windows a cycle tries, each widening the
// classes the last one refused, before deciding on the whole queue.
const maxWindowTries = 3

// queuePos is ref's place in d's queue (0: not found or not queued).
func queuePos(d policies.Decision, ref schema.Ref) int {
	if w := decisionOf(d, ref); w != nil {
		return w.Queue
	}
	return 0
}

// decisionOf is ref's entry in d (nil: not in it).
func decisionOf(d policies.Decision, ref schema.Ref) *policies.WorkspaceDecision {
	i, ok := slices.BinarySearchFunc(d.Workspaces, ref, func(w policies.WorkspaceDecision, t schema.Ref) int { return w.Ref.Compare(t) })
	if !ok {
		return nil
	}
	return &d.Workspaces[i]
}

// decideWhole decides on every job, setting in.Specs to them; the cycle
// began at t0, and its decisions on windows took took workspaces.
func (r *replayer) decideWhole(in *policies.Input, t0 time.Time, took int) policies.Decision {
	in.Specs = r.wholeSet()
	d := r.pol.Decide(*in)
	r.m.decided(time.Since(t0), took+len(in.Specs.Workspaces))
	r.m.whole++
	return d
}

// fifoWindow returns the first n waiting jobs in FIFO order, and every
// other job submitted at the same instant as the last of them. It stops
// at the first job not yet arrived (jobs arrive in order), not at the end
// of the trace.
func (r *replayer) fifoWindow(n int) []int {
	var out []int
	for k := r.head; k < len(r.jobs) && r.jobs[k].status != jobFuture; k++ {
		if len(out) >= n && !r.wl.Jobs[k].Submit.Equal(r.wl.Jobs[out[len(out)-1]].Submit) {
			break
		}
		if r.jobs[k].status == jobQueued {
			out = append(out, k)
		}
	}
	return out
}

// subset is the specs with only the workspaces of the jobs given:
// running (in Ref order, as replayOne keeps it) merged with waiting. Each
// window try (0 for the first) keeps its own specs from one decision to
// the next, since a widened window differs from a first one much more than
// first ones of consecutive decisions differ from each other.
func (r *replayer) subset(try int, running, waiting []int) schema.Set {
	// A bit per place in Ref order, set for each job given: reading the
	// set bits in order merges and sorts them at once, a fraction of what
	// sorting the window costs. A second level, a bit per word of the
	// first, says which words to read: reading every word, a word per 64
	// jobs of the trace, made a decision cost more the longer the trace.
	if r.subsetBits == nil {
		r.subsetBits = make([]uint64, (len(r.byRank)+63)/64)
		r.subsetWords = make([]uint64, (len(r.subsetBits)+63)/64)
	}
	bits, words := r.subsetBits, r.subsetWords
	for _, list := range [2][]int{running, waiting} {
		for _, ji := range list {
			k := r.refRank[ji]
			bits[k/64] |= 1 << (k % 64)
			words[k/4096] |= 1 << (k / 64 % 64)
		}
	}
	idx := r.subsetIdx[:0]
	for s, sword := range words {
		for ; sword != 0; sword &= sword - 1 {
			w := s*64 + mathbits.TrailingZeros64(sword)
			for word := bits[w]; word != 0; word &= word - 1 {
				idx = append(idx, r.byRank[w*64+mathbits.TrailingZeros64(word)])
			}
			bits[w] = 0
		}
		words[s] = 0
	}
	b := &r.subsets[try]
	ws := b.update(idx, r.refRank, r.wl.Jobs)
	r.subsetIdx = b.swap(idx)
	set := r.set
	set.Workspaces = ws
	return set
}

// specsBuf holds the specs of the jobs it lists, in Ref order, in ws.
type specsBuf struct {
	ws   []schema.Workspace
	jobs []int
	src  []int // update's scratch
}

// update makes b hold the specs of jobs (in Ref order; rank gives each
// job's place in it) and returns them. Most of the jobs were there the
// last time too, only shifted by those that came or went: those are
// moved within the buffer, in runs, and only the new ones are copied from
// the workload, whose specs lie far apart in memory and cost a cache miss
// each. Decide never writes its input, so what stays is still right.
func (b *specsBuf) update(jobs, rank []int, all []MappedJob) []schema.Workspace {
	prev := b.jobs
	n := len(jobs)
	if cap(b.ws) < n {
		ws := make([]schema.Workspace, len(prev), 2*n)
		copy(ws, b.ws[:len(prev)])
		b.ws = ws
	}
	ws := b.ws[:max(len(prev), n)]
	// src[k]: where the spec jobs[k] needs is now (-1: not there).
	src := b.src[:0]
	p := 0
	for _, ji := range jobs {
		for p < len(prev) && rank[prev[p]] < rank[ji] {
			p++
		}
		if p < len(prev) && prev[p] == ji {
			src = append(src, p)
			p++
		} else {
			src = append(src, -1)
		}
	}
	b.src = src
	// The specs that stay keep their order, so those moving left can move
	// from the left end without overwriting one not yet moved, and those
	// moving right from the right end. A run of neighbours moving by the
	// same shift is one copy.
	for k := 0; k < n; {
		s := src[k]
		if s <= k { // new, or stays in place, or moves right
			k++
			continue
		}
		e := k + 1
		for e < n && src[e] == s+e-k {
			e++
		}
		copy(ws[k:e], ws[s:s+e-k])
		k = e
	}
	for k := n - 1; k >= 0; {
		s := src[k]
		if s < 0 || s >= k { // new, or stays in place, or moved left
			k--
			continue
		}
		f := k - 1
		for f >= 0 && src[f] >= 0 && src[f] == s-(k-f) {
			f--
		}
		copy(ws[f+1:k+1], ws[s-(k-f-1):s+1])
		k = f
	}
	for k, s := range src {
		if s < 0 {
			ws[k] = all[jobs[k]].Workspace()
		}
	}
	return ws[:n]
}

// swap makes jobs the list of what b holds (update's argument) and returns
// the old list's memory, for reuse.
func (b *specsBuf) swap(jobs []int) []int {
	old := b.jobs
	b.jobs = jobs
	return old[:0]
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
