package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/internal/clock"
	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/load"
	"github.com/berth-dev/berth/plan"
	"github.com/berth-dev/berth/policies"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/source"
	"github.com/berth-dev/berth/view"
)

// DecideFunc is the decision engine (policies.Decide).
type DecideFunc func(policies.Input) policies.Decision

// AdvanceFunc returns h with its decayed usage advanced to now from what
// snap shows running. It does not mutate h.
type AdvanceFunc func(h drivers.History, set *schema.Set, snap *drivers.Snapshot, now time.Time) drivers.History

// Clock is where the loop reads the time and waits for it: clock.Real,
// or a *clock.Manual (sim.ManualClock) that tests and the simulator move.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d has passed, like
	// time.After.
	After(d time.Duration) <-chan time.Time
}

// Config wires a Loop. Source, Cluster and Store are required; Load
// defaults to source.SpecLoader(Limits) and Decide to policies.Decide.
type Config struct {
	Source  source.Source
	Cluster drivers.Cluster
	Store   drivers.Store
	Load    source.LoadFunc
	Decide  DecideFunc
	// Limits bound the spec files the default Load reads (zero fields:
	// load's defaults); a file or tree over them makes the revision
	// invalid, so it is refused and the last good one stays in force.
	Limits load.Limits
	// Advance advances decayed usage (default: policies.AdvanceUsage with
	// the revision's half-life).
	Advance AdvanceFunc
	Logger  *slog.Logger
	// LogTransitionFields adds workspace, from and to as fields of each
	// transition's log record (for JSON logs); the message has them anyway.
	LogTransitionFields bool
	// Metrics receives the loop's figures; nil makes a private set.
	Metrics *view.Metrics
	// Clock times the loop (default clock.Real): its cycles, the waits
	// between them, the backoffs, and the age /healthz reports. The
	// decisions' now is the cluster's clock (a snapshot's ObservedAt).
	Clock Clock
	// ClusterName and BerthVersion are reported in the status.
	ClusterName  string
	BerthVersion string

	// Interval is the longest time between cycles (default 30s).
	Interval time.Duration
	// UsageInterval is the longest time a leader keeps in memory alone
	// a history that changed only with the clock (usage accrued and
	// decayed, AppliedAt, progress): default 5m. Saving it each cycle
	// would write to the cluster every Interval while nothing happens;
	// a crash loses at most this much accrued usage, which against a
	// half-life of days moves no one's fair share. Run saves it when it
	// stops.
	UsageInterval time.Duration
	// Debounce is how long the specs must be quiet after a change
	// before a cycle runs (default 200ms: the files of one commit or
	// editor save are written within milliseconds of each other).
	// ClusterDebounce is the same for the cluster's changes (default
	// 500ms: the events of berth's own writes and of Nomad's placements
	// come in bursts over a few hundred milliseconds, and each cycle
	// they start reads the whole fleet's state).
	Debounce, ClusterDebounce time.Duration
	// Settle is the time between cycles while something is on its way:
	// a workspace starting or stopping, a start waiting for its victims
	// (default 1s). While ClusterChanges watches the cluster, the progress
	// of what is on its way comes as the cluster's changes, and cycles
	// that wait for it come every SettleWatched instead (default 15s), a
	// safety net: a fleet whose allocations wait for clients that do not
	// answer costs Nomad nothing every second.
	Settle, SettleWatched time.Duration
	// BackoffMin and BackoffMax bound the wait after a failed cycle; it
	// doubles from min to max (defaults 1s and 1m).
	BackoffMin, BackoffMax time.Duration
	// CycleTimeout bounds one cycle (default DefaultCycleTimeout): a
	// cycle still running then is cut (the calls in flight end with its
	// context), what it applied is recorded and saved, and it fails: Run
	// backs off and the next cycle plans again from a fresh observation.
	// It is a last resort behind the deadlines of the source's and the
	// cluster's own calls.
	CycleTimeout time.Duration
	// HealthMaxAge is how old the last successful cycle may be before
	// /healthz fails with 503 (default DefaultHealthMaxAge); before the
	// first success it counts from New.
	HealthMaxAge time.Duration

	// PruneDelay is how long a workspace must stay out of the specs before
	// its job is purged (default plan.DefaultPruneDelay); until then it is only
	// stopped, and a revert brings it back with what it saved.
	PruneDelay time.Duration
	// AllowMassPrune applies revisions that stop or remove many managed
	// workspaces at once (CheckMassPrune); without it they are refused.
	AllowMassPrune bool
	// MassPrunePercent and MassPruneMin are the mass-prune threshold
	// (defaults 25 and 3: more than 25% and more than 3 workspaces).
	MassPrunePercent, MassPruneMin int
	// FeedBuffer is how many messages of the event feed a browser may
	// fall behind before it is dropped (default 64).
	FeedBuffer int

	// Parallelism is how many actions of a plan are applied at once
	// (default DefaultParallelism); results are recorded in plan order.
	Parallelism int
	// Leader, when not nil, says whether this replica leads (package
	// leader's Elector holds the election): a follower observes and
	// decides but never applies, prunes or saves, and reads the leader's
	// journal each cycle. Nil: this berth is the only one and always
	// writes.
	Leader Leadership
	// News, when not nil, is told what each cycle this replica led did
	// (Once's step 16, view.News): its events, the revision it put in
	// force or refused. It is called on the loop's goroutine, holding the
	// cycle's lock, so it must return at once: package notify's Notifier
	// only queues, and drops what its queue has no room for.
	News func(view.News)
	// ClusterChanges, when not nil, signals that the cluster changed
	// (the driver's watch): Run starts a cycle soon after, debounced like
	// spec changes, except while it backs off after a failed cycle, which
	// the cluster's changes (berth's own writes among them) never cut short.
	ClusterChanges <-chan struct{}
}

// DefaultCycleTimeout is Config.CycleTimeout's default: far above what a
// cycle takes (an apply of 1,000 workspaces on a real Nomad takes under a
// minute), so it cuts only a cycle that is stuck.
const DefaultCycleTimeout = 5 * time.Minute

// DefaultHealthMaxAge is Config.HealthMaxAge's default: two cycle
// timeouts, so one stuck cycle cut by its deadline, followed by a good
// one, never fails the health check.
const DefaultHealthMaxAge = 2 * DefaultCycleTimeout

// Loop keeps a cluster matching the specs. Once is one cycle; Run calls
// Once on changes and on an interval. The Loop is safe for concurrent use:
// the HTTP server reads its status while Run runs.
type Loop struct {
	cfg Config
	log *slog.Logger

	// cycle is the one lock: one Once (or Run's last save) at a time.
	// Every field below is the cycle's own; readers see none of them, only
	// the model the cycle publishes at its end (publishModel).
	cycle sync.Mutex
	model atomic.Pointer[view.Model]

	good    *schema.Set
	goodRev *view.RevisionStatus
	// observedAt is the cluster's time at the last observation.
	observedAt time.Time
	attempted  *view.RevisionStatus
	absent     map[schema.Ref]*absence // workspaces out of the specs (prune.go)
	records    map[schema.Ref]*record
	rejected   map[schema.Ref]rejection
	projects   []view.ProjectStatus
	// clusterGPUs are the cluster's GPUs by kind (view.ClusterGPUs).
	clusterGPUs []view.KindCapacity
	last        *view.CycleStatus
	view        view.Inputs // the last cycle's inputs, for the dashboard

	feed *feed // the dashboard's event feed (events.go)

	retry retries // failed actions and their backoff (apply.go); Once's only

	// started is when New made the loop; lastOK when the last cycle that
	// succeeded ended (zero before the first): what /healthz reports.
	started, lastOK time.Time
	// saved is the history the Store holds, as this berth last saved it
	// or, leading, read it, and savedAt when it last saved (Once's only;
	// saved is never mutated): a cycle that changed nothing but the
	// clock's fields (sameHistory) saves only once UsageInterval has
	// passed, and keeps its history in unsaved until then, for the next
	// cycle to go on from and Run to save when it stops.
	saved, unsaved *drivers.History
	savedAt        time.Time
	// savedTerm is the election's term when saved was saved or read
	// (cycle.term): a leader still in it does not read the history again
	// (advanceHistory).
	savedTerm uint64
	// restored: the memory of workspaces was read from the Store's
	// journal (journal.go); following: this cycle is a follower's (its
	// transitions are logged at debug: the leader logs them). Once's only.
	restored, following bool
	// dry: the cycle is berth plan's (DryRun); it saves no history.
	dry bool
	// runs are the runs that completed in this cycle's record, for
	// History.RunTimes (likely.go).
	runs []policies.Run
	// told is the revision last told applied to Config.News (tell), known
	// once toldKnown: from the history until this berth leads.
	told      string
	toldKnown bool
}

// New checks cfg and fills its defaults.
func New(cfg Config) (*Loop, error) {
	switch {
	case cfg.Source == nil:
		return nil, errors.New("reconcile: no source")
	case cfg.Cluster == nil:
		return nil, errors.New("reconcile: no cluster")
	case cfg.Store == nil:
		return nil, errors.New("reconcile: no store")
	}
	if cfg.Load == nil {
		cfg.Load = source.SpecLoader(cfg.Limits)
	}
	if cfg.Decide == nil {
		cfg.Decide = policies.Decide
	}
	if cfg.Advance == nil {
		cfg.Advance = func(h drivers.History, set *schema.Set, snap *drivers.Snapshot, now time.Time) drivers.History {
			return policies.AdvanceHistory(h, set, snap, now)
		}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.Interval, 30*time.Second)
	def(&cfg.UsageInterval, 5*time.Minute)
	def(&cfg.Debounce, 200*time.Millisecond)
	def(&cfg.ClusterDebounce, 500*time.Millisecond)
	def(&cfg.Settle, time.Second)
	def(&cfg.SettleWatched, 15*time.Second)
	def(&cfg.BackoffMin, time.Second)
	def(&cfg.BackoffMax, time.Minute)
	def(&cfg.PruneDelay, plan.DefaultPruneDelay)
	def(&cfg.CycleTimeout, DefaultCycleTimeout)
	def(&cfg.HealthMaxAge, DefaultHealthMaxAge)
	if cfg.Parallelism <= 0 {
		cfg.Parallelism = DefaultParallelism
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = view.NewMetrics()
	}
	leading := func() bool { return true } // alone, it writes
	if cfg.Leader != nil {
		// The lease can lapse mid-cycle: every write checks it.
		cfg.Cluster = fencedCluster{Cluster: cfg.Cluster, lead: cfg.Leader, clock: cfg.Clock}
		cfg.Store = fencedStore{Store: cfg.Store, lead: cfg.Leader, clock: cfg.Clock}
		leading = cfg.Leader.Leading
	}
	cfg.Metrics.Leader(leading)
	l := &Loop{cfg: cfg, log: cfg.Logger, records: map[schema.Ref]*record{}, rejected: map[schema.Ref]rejection{}, feed: newFeed(cfg.FeedBuffer),
		started: cfg.Clock.Now()}
	l.publishModel() // readers never find none
	return l, nil
}

// Metrics returns the loop's metrics.
func (l *Loop) Metrics() *view.Metrics { return l.cfg.Metrics }

// StalledError says the loop cannot go on until the specs change: there
// is no valid revision to apply.
type StalledError struct {
	Revision string
	Problems []string
}

func (e *StalledError) Error() string {
	return fmt.Sprintf("revision %s is invalid and no earlier revision is in force:\n%s", e.Revision, strings.Join(e.Problems, "\n"))
}

// Result is what one cycle did.
type Result struct {
	// Revision is the revision in force.
	Revision string
	// Refused is the newest revision when it was invalid (and not applied).
	Refused *view.RevisionStatus
	Plan    plan.Plan
	// Applied are the actions the cluster accepted, in order.
	Applied []drivers.Action
	// Deferred are workspaces whose start waits for victims to be gone.
	Deferred []schema.Ref
	// Failed are the actions the cluster did not carry out this cycle, in
	// plan order; each concerns its workspace alone (the rest of the plan
	// went on) and is retried with backoff, an invalid one only once the
	// specs change.
	Failed []ActionFailure
	// RetryAt is the earliest time a failed action is due again (zero when
	// none waits); Run runs a cycle by then.
	RetryAt time.Time
	// Transitions are the state changes this cycle recorded.
	Transitions []view.WorkspaceTransition
	// ObservedAt is the cluster's time of the cycle's snapshot (zero when
	// it did not get that far).
	ObservedAt time.Time
	// Settling: something is on its way (starting, stopping, waiting); the
	// next cycle should come soon.
	Settling bool
}

// Once runs one cycle. Its steps, as once and Once call them (cycle.go):
//
//  1. read the source;
//  2. load and validate the revision (an invalid one is refused and the
//     last good one stays in force; with none, the cycle stalls);
//  3. observe the cluster (a failed observation applies nothing; the
//     snapshot's time is the cycle's now);
//  4. guard the mass prune (a new revision that stops or removes too
//     many workspaces at once is refused);
//  5. advance the history (load it, restore the journal, advance the
//     decayed usage);
//  6. decide;
//  7. plan;
//  8. apply, the leader only, holding back starts whose victims still
//     hold their GPUs;
//  9. record states and transitions, even after a failed apply;
//  10. predict run times and likely starts (and keep the dashboard's view);
//  11. settle: say whether the next cycle should come soon;
//     a follower's cycle ends here: it never prunes or saves;
//  12. prune the workspaces out of the specs;
//  13. save the history;
//  14. report the cycle (status, metrics) and publish the read model
//     (view.Model: what StatusPage, Workspace, Health and the dashboard
//     read);
//  15. publish its transitions to the dashboards;
//  16. tell Config.News what the cycle did (a leader's cycle only).
//
// An action that fails for its own workspace (invalid, unplaceable, a
// conflict or transient error of that action) is reported in
// Result.Failed and retried with that workspace's backoff; the rest of
// the plan goes on. A failure of the cluster as a whole (unreachable)
// leaves the rest of the plan for the next cycle, which plans again from
// a fresh snapshot: actions already applied are not repeated. Errors wrap
// their cause; a *StalledError means only a new revision can help.
//
// A cycle that runs past Config.CycleTimeout is cut: its calls end with
// its context, what it applied is recorded and the history saved (within
// ctx, not the cycle's deadline), and it fails with an error that says
// so.
func (l *Loop) Once(ctx context.Context) (Result, error) {
	l.cycle.Lock()
	defer l.cycle.Unlock()
	started := l.cfg.Clock.Now()
	cycleCtx, cancel := context.WithTimeoutCause(ctx, l.cfg.CycleTimeout, errCycleTimeout)
	c, err := l.once(cycleCtx, ctx) // 1–13
	res := c.res
	cut := context.Cause(cycleCtx) == errCycleTimeout && ctx.Err() == nil
	cancel()
	if err != nil && cut {
		err = fmt.Errorf("the cycle ran for %s, its limit, and was cut (what it applied is kept; the next cycle observes again): %w", l.cfg.CycleTimeout, err)
	}
	l.report(res, err, started)       // 14
	l.publishModel()                  // 14
	evs := l.publish(res.Transitions) // 15
	l.tell(c, evs)                    // 16
	return res, err
}

// tell is Once's step 16: it hands Config.News the cycle's events and
// the revision it put in force or refused, when this replica led the
// cycle, even when nothing happened (a wait passes its bound with the
// clock alone: package notify looks at every cycle's model). A revision is told applied once: the
// loop remembers the last one told (told), which a follower, and a
// berth before its first history, take from the history's
// AppliedRevision, so neither a restart nor a new leader tells of the
// last leader's revision again. A refusal is told on the cycle that
// refused it (attempted changed to it).
func (l *Loop) tell(c *cycle, evs []view.Event) {
	n := view.News{Events: evs}
	if rev := l.goodRev; c.leading && l.toldKnown && rev != nil && rev.ID != l.told {
		r := *rev
		n.Applied, l.told = &r, rev.ID
	}
	if a := l.attempted; a != nil && (c.attemptedBefore == nil || c.attemptedBefore.ID != a.ID) {
		n.Refused = l.refused()
	}
	if l.cfg.News == nil || !c.leading || l.dry {
		return
	}
	n.Model = l.model.Load()
	l.cfg.News(n)
}

// errCycleTimeout is the cause of a cycle's context cut by CycleTimeout.
var errCycleTimeout = errors.New("the reconcile cycle ran past its limit")

// once is Once's steps 1 to 13 under ctx (with the cycle's deadline);
// outer is Once's own context, which the history is saved under once the
// cycle's deadline has passed. Each step is a method of cycle (cycle.go);
// once returns the cycle as far as it went.
func (l *Loop) once(ctx, outer context.Context) (*cycle, error) {
	c := l.newCycle(ctx, outer)
	if err := c.read(); err != nil { // 1
		return c, err
	}
	if err := c.load(); err != nil { // 2
		return c, err
	}
	if err := c.observe(); err != nil { // 3
		return c, err
	}
	if err := c.guardMassPrune(); err != nil { // 4
		return c, err
	}
	if err := c.advanceHistory(); err != nil { // 5
		return c, err
	}
	c.decide()  // 6
	c.plan()    // 7
	c.apply()   // 8
	c.record()  // 9
	c.predict() // 10
	c.settle()  // 11
	if !c.leading {
		return c, nil // a follower writes nothing
	}
	c.prune()          // 12
	return c, c.save() // 13
}

// report is Once's step 14: it counts the cycle in the metrics and keeps
// it as the status's last reconcile (lastOK, for /healthz, when it
// succeeded).
func (l *Loop) report(res Result, err error, started time.Time) {
	end := l.cfg.Clock.Now()
	l.cfg.Metrics.ObserveCycle(end.Sub(started), err)
	l.last = &view.CycleStatus{At: res.ObservedAt, Duration: view.Seconds(end.Sub(started)), Actions: len(res.Applied)}
	if err != nil {
		l.last.Error = err.Error()
	} else {
		l.lastOK = end
	}
}

// saveHistory saves h, which a cycle led under term made, and keeps it
// as what the Store holds; a failed save forgets what the Store holds, so
// the next cycle reads it again.
func (l *Loop) saveHistory(ctx context.Context, h *drivers.History, term uint64) error {
	l.unsaved = nil
	if err := l.cfg.Store.SaveHistory(ctx, *h); err != nil {
		l.saved = nil
		return fmt.Errorf("save history: %w", err)
	}
	l.saved, l.savedAt, l.savedTerm = h, l.cfg.Clock.Now(), term
	return nil
}

// saveUnsaved saves the history a cycle kept from the Store because only
// the clock had moved it (cycle.save), when there is one: Run's last
// step, so a berth that stops cleanly loses no usage.
func (l *Loop) saveUnsaved(ctx context.Context) error {
	l.cycle.Lock()
	defer l.cycle.Unlock()
	if l.unsaved == nil {
		return nil
	}
	return l.saveHistory(ctx, l.unsaved, l.savedTerm)
}

// limitEnds are the ends of the reasons a limit stops a workspace for,
// by the reason's kind as the status writes it.
var limitEnds = map[string]drivers.EndClass{
	policies.ReasonTimeLimit.String(): drivers.EndTimeLimit,
	policies.ReasonIdle.String():      drivers.EndIdle,
}

// sameHistory reports whether a and b differ at most in what moves with
// the clock alone: UsageAt, Usage, AppliedAt, the run times of limited
// workspaces (Ran), the idle readings (Idle) and the journal's
// LastProgress (sameJournalEntry): those are saved with the usage, every
// UsageInterval, not each cycle. Every other field of
// drivers.History is compared (TestSameHistorySeesEveryField keeps it so).
func sameHistory(a, b drivers.History) bool {
	samePreemption := func(x, y drivers.Preemption) bool {
		return x.Victim == y.Victim && x.By == y.By && x.At.Equal(y.At) && x.Reason == y.Reason
	}
	return a.AppliedRevision == b.AppliedRevision &&
		maps.EqualFunc(a.QueuedSince, b.QueuedSince, time.Time.Equal) &&
		maps.EqualFunc(a.Preempted, b.Preempted, samePreemption) &&
		maps.Equal(a.Borrowing, b.Borrowing) &&
		maps.EqualFunc(a.RunTimes, b.RunTimes, slices.Equal) &&
		maps.EqualFunc(a.Journal, b.Journal, sameJournalEntry) &&
		maps.EqualFunc(a.Ended, b.Ended, func(x, y drivers.Ended) bool {
			return x.Class == y.Class && x.At.Equal(y.At) && x.SpecHash == y.SpecHash && x.Reason == y.Reason
		})
}

// load returns the Set to apply: the new revision when valid (not yet in
// force: adoptRevision decides), else the last good one (nil when there is none).
// Only I/O failures are errors.
func (l *Loop) load(rev source.Revision) (*schema.Set, error) {
	good, attempted := l.good, l.attempted
	if good != nil && good.Revision == rev.ID {
		l.setAttempted(nil)
		return good, nil
	}
	if attempted != nil && attempted.ID == rev.ID {
		return good, nil // refused already; it has not changed
	}
	var (
		set      *schema.Set
		problems = slices.Clone(rev.Problems)
		err      error
	)
	if len(problems) == 0 {
		set, problems, err = l.cfg.Load(rev.FS, rev.Root)
	}
	if err != nil {
		return nil, fmt.Errorf("load revision %s: %w", rev.ID, err)
	}
	if set == nil {
		// Refused before this cycle observes: at the cluster's time of the
		// last observation (the status's one clock), or this machine's
		// before the first.
		now := l.observedAt
		if now.IsZero() {
			now = l.cfg.Clock.Now()
		}
		if len(problems) == 0 {
			problems = []string{"the specs are invalid"}
		}
		l.setAttempted(&view.RevisionStatus{ID: rev.ID, LoadedAt: now, Errors: slices.Clone(problems)})
		l.cfg.Metrics.Revision(rev.ID, false)
		kept := "no earlier revision is in force"
		if good != nil {
			kept = good.Revision + " stays in force"
		}
		l.log.Warn("revision "+rev.ID+" refused; "+kept, "errors", strings.Join(problems, "; "))
		return good, nil
	}
	set.Revision = rev.ID // the source names revisions; before anyone else sees the set
	return set, nil       // in force once adopted (prune.go)
}

func (l *Loop) setAttempted(a *view.RevisionStatus) {
	l.attempted = a
}

// record derives each workspace's state from the decision, the snapshot,
// what was applied and the preemption records in hist (read only), and
// appends transitions. The state and its reason are nextState's
// (record.go); record keeps the books: the records, the work lost on a
// resume, the transitions and their log, the completed runs, the
// projects' status and the metrics.
func (l *Loop) record(set *schema.Set, snap *drivers.Snapshot, d policies.Decision, hist *drivers.History,
	ends endsOutcome, applied []drivers.Action, deferred []schema.Ref, now time.Time) []view.WorkspaceTransition {
	decisions := map[schema.Ref]*policies.WorkspaceDecision{}
	for i := range d.Workspaces {
		decisions[d.Workspaces[i].Ref] = &d.Workspaces[i]
	}
	allocs := drivers.ByWorkspace(snap.Allocs)
	acted := map[schema.Ref]drivers.Action{}
	for _, a := range applied {
		if a.Kind != drivers.ActionUpdate {
			acted[a.Workspace] = a
		}
	}
	waiting := map[schema.Ref]bool{}
	for _, r := range deferred {
		waiting[r] = true
	}
	finished, retrying := ends.finished, ends.retrying

	refs := map[schema.Ref]bool{}
	for _, w := range set.Workspaces {
		refs[w.Ref()] = true
	}
	for r := range allocs {
		refs[r] = true
	}
	for r := range l.records {
		refs[r] = true
	}
	var out []view.WorkspaceTransition
	for _, ref := range schema.SortedRefs(refs) {
		rec := l.records[ref]
		known := rec != nil
		if !known {
			rec = &record{status: view.WorkspaceStatus{Project: ref.Project, Name: ref.Name}}
		}
		prev := rec.status.State
		st := rec.status
		spec := set.Workspace(ref)
		own := allocs[ref]
		pre, wasPreempted := hist.Preempted[ref]
		if len(own) > 0 {
			st.Progress = view.Seconds(own[0].Progress)
			st.Revision = own[0].Revision
			if !drivers.AllStopping(own) && rec.gone {
				kept := own[0].ResumedFrom
				lost := max(0, rec.lastProgress-kept)
				st.WorkLost += view.Seconds(lost)
				l.cfg.Metrics.Lost(set, ref, lost)
				rec.gone = false
				rec.resumed = resumedText(wasPreempted, kept, lost, rec.lastProgress > 0 || own[0].Progress > 0)
			}
			rec.lastProgress = st.Progress.D()
		} else if rec.held {
			rec.gone = true
		}
		a, didAct := acted[ref]
		ended, hasEnded := finished[ref]
		rt, retried := retrying[ref]
		rj := l.rejected[ref]
		next := nextState(stateInput{Prev: prev, PrevReason: rec.status.Reason, PrevReasonKind: rec.status.ReasonKind,
			Held: rec.held, Resumed: rec.resumed, Spec: spec, Decision: decisions[ref], Allocs: own,
			Acted: a, DidAct: didAct, Waiting: waiting[ref], Preempted: pre, WasPreempted: wasPreempted,
			Ended: ended, HasEnded: hasEnded, Retry: rt, Retrying: retried,
			Rejected: rj.revision == set.Revision, RejectedReason: rj.reason})
		failed := next.Failed
		rec.held = len(own) > 0
		rec.resumed = next.Resumed
		st.State, st.Reason, st.ReasonKind, st.PreemptedBy = next.State, next.Reason, next.ReasonKind, next.PreemptedBy
		st.Node, st.GPUs, st.Decision = next.Node, next.GPUs, next.Decision
		if spec != nil {
			st.GPUKind = spec.Spec.Resources.GPUKind
		}
		if !known && spec == nil && len(own) == 0 {
			continue // gone from the specs before berth saw it
		}
		if failed && st.State != view.StateFailed {
			t := view.Transition{At: now, From: prev, To: view.StateFailed, Reason: reasonFailed,
				Progress: st.Progress, WorkLost: st.WorkLost}
			rec.history = append(rec.history, t)
			out = append(out, view.WorkspaceTransition{Workspace: ref, Transition: t})
			l.logTransition(ref, t)
			prev = view.StateFailed
		}
		if class, ok := limitEnds[st.ReasonKind]; ok && st.State == view.StateStopped && st.State != prev {
			// A limit stopped it: its end, kept as the status keeps every
			// end.
			st.LastEnd = &view.EndStatus{Class: class.String(), At: now, Node: rec.status.Node, Message: st.Reason}
			if rec.status.State == view.StateRunning {
				st.LastEnd.RanFor = view.Seconds(max(0, now.Sub(rec.status.Since)))
			}
		}
		if wd := decisions[ref]; wd != nil && wd.Verdict == policies.VerdictRun && wd.Reason.Kind == policies.ReasonIdle && st.State == view.StateRunning {
			// Idle, and its rule only reports: said once a run, as a
			// transition to the state it stays in.
			if !rec.idleTold {
				t := view.Transition{At: now, From: prev, To: st.State, Reason: wd.Reason.Message, Node: st.Node,
					GPUs: slices.Clone(st.GPUs), Progress: st.Progress, WorkLost: st.WorkLost}
				rec.history = append(rec.history, t)
				out = append(out, view.WorkspaceTransition{Workspace: ref, Transition: t})
				l.logTransition(ref, t)
				rec.idleTold = true
			}
		} else if len(own) == 0 || st.State != view.StateRunning {
			rec.idleTold = false
		}
		if st.ReasonKind == view.ReasonWaiting && (st.Reason != rec.status.Reason || prev != view.StateStarting) {
			l.log.Warn("workspace waits to start: "+st.Reason, "workspace", ref.String(), "node", st.Node)
		}
		if st.State != prev {
			st.Since = now
			t := view.Transition{At: now, From: prev, To: st.State, Reason: st.Reason, Node: st.Node,
				GPUs: slices.Clone(st.GPUs), PreemptedBy: st.PreemptedBy, Progress: st.Progress, WorkLost: st.WorkLost}
			rec.history = append(rec.history, t)
			out = append(out, view.WorkspaceTransition{Workspace: ref, Transition: t})
			l.logTransition(ref, t)
			l.cfg.Metrics.Transition(set, ref, &t, rec.status.Since) // rec.status: as it was since prev
			if st.State == view.StateCompleted && spec != nil {
				end := ended.At
				if end.IsZero() || end.After(now) {
					end = now
				}
				l.runs = append(l.runs, completedRun(spec, rec, end)) // likely.go
			}
		}
		st.Endpoints = endpoints(spec, own)
		st.GPUUse = nil
		if st.State == view.StateRunning {
			st.GPUUse = view.UseOf(own)
		}
		rec.status = st
		l.records[ref] = rec
	}
	l.projects = projectStatus(set, snap, hist)
	l.clusterGPUs = drivers.GPUsByKind(set, snap)
	l.cfg.Metrics.ObserveStatus(func(yield func(*view.WorkspaceStatus) bool) {
		for _, rec := range l.records {
			if !yield(&rec.status) {
				return
			}
		}
	}, l.projects, now)
	return out
}

// endedState is the state and reason of a workspace whose run ended for
// good (settleEnds): Completed when every task exited 0, else Failed with
// the exit code and the cluster's message, or, after the node's faults
// in a row, with the last one.
func endedState(e drivers.Exit) (view.State, string) {
	again := "; berth does not run it again until its spec changes (or it is set Stopped, then Running)"
	if !e.Failed {
		return view.StateCompleted, "its task exited 0" + again
	}
	if e.Class == drivers.EndNodeFault {
		return view.StateFailed, fmt.Sprintf("its runs ended by the node's fault %d times in a row, the last: %s", drivers.NodeFaultAttempts+1, faultWhere(e)) + again
	}
	r := "its task failed"
	if e.ExitCode != 0 {
		r = fmt.Sprintf("its task exited with code %d", e.ExitCode)
	}
	if e.Message != "" && e.Message != fmt.Sprintf("Exit Code: %d", e.ExitCode) {
		r += " (" + e.Message + ")"
	}
	if e.Restarts > 0 {
		r += fmt.Sprintf(" after %d restart(s)", e.Restarts)
	}
	return view.StateFailed, r + again
}

// resumedText says how a workspace came back after its allocations were
// gone: what berth knows, no more. Progress is known only where the
// driver reports it (the simulator); on Nomad it is not.
func resumedText(preempted bool, kept, lost time.Duration, known bool) string {
	switch {
	case known:
		return fmt.Sprintf("resumed from its checkpoint at %s of progress; %s of work lost", text.Seconds(kept), text.Seconds(lost))
	case preempted:
		return "resumed after its preemption, from what it saved at its checkpoint signal (the driver does not report progress)"
	}
	return "started again (the driver does not report progress)"
}

func preemptReason(a drivers.Action) string {
	if a.Reason != "" {
		return a.Reason
	}
	return "preempted by " + a.By.String()
}

func (l *Loop) logTransition(ref schema.Ref, t view.Transition) {
	from := string(t.From)
	if from == "" {
		from = "new"
	}
	attrs := []any{"workspace", ref.String(), "from", from, "to", string(t.To)}
	if t.Reason != "" {
		attrs = append(attrs, "reason", t.Reason)
	}
	if t.PreemptedBy != nil {
		attrs = append(attrs, "by", t.PreemptedBy.String())
	}
	if t.Node != "" {
		attrs = append(attrs, "node", t.Node, "gpus", strings.Join(drivers.ShortGPUs(t.GPUs), ","))
	}
	if t.Progress > 0 {
		attrs = append(attrs, "progress", t.Progress.D().Round(time.Second).String())
	}
	if t.WorkLost > 0 {
		attrs = append(attrs, "lost", t.WorkLost.D().Round(time.Second).String())
	}
	if !l.cfg.LogTransitionFields {
		attrs = attrs[6:] // the message says them
	}
	level := slog.LevelInfo
	if l.following {
		level = slog.LevelDebug
	}
	l.log.Log(context.Background(), level, fmt.Sprintf("%s: %s → %s", ref, from, t.To), attrs...)
}

// projectStatus reports each project's quota, usage and share.
// A project whose quota names GPU kinds has an account per kind besides
// its gpus account (schema.Set.QuotaAccount): its top-level GPU figures
// are the gpus account's, and Kinds has each kind's.
func projectStatus(set *schema.Set, snap *drivers.Snapshot, hist *drivers.History) []view.ProjectStatus {
	type account struct{ project, kind string }
	used := map[account]int{}
	usedCPU, usedMem := map[string]int64{}, map[string]int64{}
	for i := range snap.Allocs {
		a := &snap.Allocs[i]
		used[account{a.Workspace.Project, set.QuotaAccount(a.Workspace, snap.ModelOf(a))}] += len(a.GPUs)
		// CPU and memory as the quota counts them: the spec's, per
		// allocation; what Nomad holds for one the specs no longer list.
		cpu, mem := a.CPUMHz, a.MemoryBytes
		if w := set.Workspace(a.Workspace); w != nil {
			cpu, mem = policies.QuotaPerReplica(w.Spec.Resources)
		}
		usedCPU[a.Workspace.Project] += cpu
		usedMem[a.Workspace.Project] += mem
	}
	var weights, usage float64
	for _, p := range set.Projects {
		weights += policies.Weight(p)
		usage += hist.Usage[p.Meta.Name]
	}
	out := make([]view.ProjectStatus, 0, len(set.Projects))
	for _, p := range set.Projects {
		ps := view.ProjectStatus{
			Name: p.Meta.Name, Tier: p.Spec.Tier, QuotaGPUs: p.Spec.Quota.GPUs,
			UsedGPUs: used[account{p.Meta.Name, ""}], DecayedUsage: hist.Usage[p.Meta.Name],
		}
		if b := p.Spec.BorrowLimit.GPUs; b >= 0 {
			ps.BorrowLimitGPUs = &b
		}
		if t := set.Tier(p.Spec.Tier); t != nil {
			ps.TierValue = t.Spec.Value
		}
		ps.BorrowedGPUs = max(0, ps.UsedGPUs-ps.QuotaGPUs)
		for _, k := range slices.Sorted(maps.Keys(p.Spec.Quota.Kinds)) {
			quota, borrow := p.Spec.AccountLimits(k)
			ks := view.KindQuotaStatus{Kind: k, QuotaGPUs: quota, UsedGPUs: used[account{p.Meta.Name, k}]}
			if borrow >= 0 {
				ks.BorrowLimitGPUs = &borrow
			}
			ks.BorrowedGPUs = max(0, ks.UsedGPUs-quota)
			ps.Kinds = append(ps.Kinds, ks)
		}
		if q := p.Spec.Quota.CPUMHz; q > 0 {
			ps.QuotaCPUMHz, ps.UsedCPUMHz = q, usedCPU[p.Meta.Name]
			ps.BorrowedCPUMHz = max(0, ps.UsedCPUMHz-q)
			if b := p.Spec.BorrowLimit.CPUMHz; b >= 0 {
				ps.BorrowLimitCPUMHz = &b
			}
		}
		if q := p.Spec.Quota.MemoryBytes; q > 0 {
			ps.QuotaMemoryBytes, ps.UsedMemoryBytes = q, usedMem[p.Meta.Name]
			ps.BorrowedMemoryBytes = max(0, ps.UsedMemoryBytes-q)
			if b := p.Spec.BorrowLimit.MemoryBytes; b >= 0 {
				ps.BorrowLimitMemoryBytes = &b
			}
		}
		if weights > 0 {
			ps.Share = policies.Weight(p) / weights
		}
		if usage > 0 {
			ps.UsageShare = ps.DecayedUsage / usage
		}
		out = append(out, ps)
	}
	return out
}

// Status returns the current status with every workspace; the caller
// owns the copy.
func (l *Loop) Status() view.Status { return l.StatusPage(schema.Ref{}, 0) }

// StatusPage is Status listing only the workspaces after after (in
// project, then name order; the zero Ref: from the first), at most limit
// of them (0 or less: all). Next names the last one listed when more
// follow; Summary always counts every workspace. It reads the model the
// last cycle published (view.Model.Page) and takes no lock of the loop's;
// the source's and the election's status are asked now.
func (l *Loop) StatusPage(after schema.Ref, limit int) view.Status {
	m := l.model.Load()
	s := m.Page(after, limit)
	s.Source = l.sourceStatus(m)
	if l.cfg.Leader != nil {
		ls := l.cfg.Leader.LeaderStatus()
		s.Leader = &ls
	}
	return s
}

// Workspace returns one workspace's status, history and explanation, as
// the last cycle published them; false when berth knows no such
// workspace.
func (l *Loop) Workspace(ref schema.Ref) (view.WorkspaceDetail, bool) {
	return l.model.Load().Workspace(ref)
}

// Model returns the read model the last cycle published. It is never
// mutated: the caller must not change it either (its methods return
// copies).
func (l *Loop) Model() *view.Model { return l.model.Load() }

// publishModel builds the read model of what the loop knows now and
// publishes it: Once's last step before the dashboards' delta. The
// model shares with the records only what the loop never writes again
// (it replaces a workspace's GPUs, pointers and history slices; it only
// appends to a history past the end the model holds).
func (l *Loop) publishModel() {
	refs := make([]schema.Ref, 0, len(l.records))
	for ref := range l.records {
		refs = append(refs, ref)
	}
	slices.SortFunc(refs, schema.Ref.Compare)
	m := &view.Model{Berth: l.cfg.BerthVersion, Cluster: l.cfg.ClusterName, Revision: l.goodRev, Attempted: l.attempted,
		LastReconcile: l.last, LastOK: l.lastOK, ObservedAt: l.observedAt, Projects: l.projects, ClusterGPUs: l.clusterGPUs, Inputs: l.view,
		Workspaces: make([]view.WorkspaceStatus, len(refs)), Histories: make([][]view.Transition, len(refs))}
	for i, ref := range refs {
		rec := l.records[ref]
		m.Workspaces[i], m.Histories[i] = rec.status, slices.Clip(rec.history)
	}
	l.model.Store(m)
}

// refused returns a copy of the newest refused revision, or nil. The
// copy shares nothing with the loop, so callers may keep it.
func (l *Loop) refused() *view.RevisionStatus {
	if l.attempted == nil {
		return nil
	}
	a := *l.attempted
	a.Errors = slices.Clone(a.Errors)
	return &a
}
