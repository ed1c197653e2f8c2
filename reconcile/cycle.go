package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/plan"
	"github.com/berth-dev/berth/policies"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/source"
	"github.com/berth-dev/berth/view"
)

// cycle is one run of Loop.once: what its steps hand each other. Its
// steps are its methods, in the order once calls them; each reads what
// the steps before it left and leaves what the steps after it need.
type cycle struct {
	l *Loop
	// ctx carries the cycle's deadline; outer is Once's own context, which
	// the history is saved under once that deadline has passed.
	ctx, outer context.Context
	// leading: this replica leads (or is the only one); asked once, at
	// the start of the cycle. A follower observes and decides but never
	// applies, prunes or saves.
	leading bool
	// term is the election's term when leading was asked (0 without an
	// election).
	term uint64

	res Result
	// attemptedBefore is the refused revision the loop knew before the
	// cycle (tell: a refusal is told once).
	attemptedBefore *view.RevisionStatus
	rev             source.Revision // read
	prev            *schema.Set     // the set in force before this cycle (load)
	set             *schema.Set     // the set this cycle applies (load, guardMassPrune)
	snap            drivers.Snapshot
	now             time.Time // the cluster's time of snap
	// hist is the history as the cycle moves it on (Advance and
	// RecordDecision return new histories).
	hist drivers.History
	// ends are the runs that ended without berth stopping them: for good,
	// or retried after the node's fault (settleEnds).
	ends endsOutcome
	d    policies.Decision
	out  applyOutcome
	// err is what failed without stopping the cycle (apply, prune): what
	// was done is still recorded and saved, and the cycle fails with it.
	err error
}

// newCycle starts a cycle under ctx (with the cycle's deadline) and
// outer (Once's own context), asking once whether this replica leads.
func (l *Loop) newCycle(ctx, outer context.Context) *cycle {
	c := &cycle{l: l, ctx: ctx, outer: outer, attemptedBefore: l.attempted}
	c.leading = true
	if l.cfg.Leader != nil {
		st := l.cfg.Leader.LeaderStatus()
		c.leading, c.term = st.Leading, st.Term
	}
	l.following = !c.leading
	return c
}

// read reads the current revision from the source.
func (c *cycle) read() error {
	rev, err := c.l.cfg.Source.Read(c.ctx)
	if err != nil {
		return fmt.Errorf("read specs: %w", err)
	}
	c.rev = rev
	return nil
}

// load loads and validates the revision (Loop.load): an invalid one is
// refused and the last good one stays in force; with none in force the
// cycle stalls (*StalledError).
func (c *cycle) load() error {
	l := c.l
	c.prev = l.good
	set, err := l.load(c.rev)
	if err != nil {
		return err
	}
	return c.inForce(set)
}

// observe takes the cluster's snapshot; its time is the cycle's now. A
// failed observation applies nothing.
func (c *cycle) observe() error {
	snap, err := c.l.cfg.Cluster.Observe(c.ctx)
	if err != nil {
		return fmt.Errorf("observe cluster: %w", err)
	}
	c.snap, c.now = snap, snap.ObservedAt
	c.res.ObservedAt = c.now
	c.l.observedAt = c.now
	return nil
}

// guardMassPrune is deletion safety (Loop.adoptRevision, prune.go): a new
// revision that would stop or remove too many workspaces at once is
// refused and the previous one stays in force (with none, the cycle
// stalls).
func (c *cycle) guardMassPrune() error {
	if c.set == c.prev || c.set.Revision != c.rev.ID {
		return nil // nothing new to adopt
	}
	return c.inForce(c.l.adoptRevision(c.prev, c.set, &c.snap))
}

// advanceHistory loads the history from the Store, restores the memory
// of workspaces from its journal when this berth has just started or
// does not lead (journal.go), and advances the decayed usage to now.
//
// A leader that has led without a break since it last read or saved the
// history (the cycle before led too, under the same term: another leader
// in between would have had to take a new one) knows what the Store
// holds without reading it. Any other writer (a one-shot berth apply)
// makes the leader's next save fail its check-and-set, and the cycle
// after that reads again.
func (c *cycle) advanceHistory() error {
	l := c.l
	var hist drivers.History
	if l.saved != nil && l.restored && c.leading && c.term == l.savedTerm {
		hist = *l.saved
		if l.unsaved != nil {
			hist = *l.unsaved // the clock moved it since the save
		}
	} else {
		l.unsaved = nil
		var err error
		if hist, err = l.cfg.Store.LoadHistory(c.ctx); err != nil {
			return fmt.Errorf("load history: %w", err)
		}
		if c.leading {
			known := hist
			l.saved, l.savedTerm = &known, c.term
		}
	}
	if !l.restored || !c.leading {
		// A restarted berth, or one newly leading, continues from the
		// last writer's journal (journal.go); a follower shows it.
		l.restore(hist.Journal)
	}
	if !c.leading || !l.toldKnown {
		// The revision the last leader applied has been told (Loop.tell).
		l.told, l.toldKnown = hist.AppliedRevision, true
	}
	l.restored = c.leading
	c.hist = l.cfg.Advance(hist, c.set, &c.snap, c.now)
	return nil
}

// decide sorts the runs that ended into those ended for good and the
// node's faults retried (settleEnds, ends.go), runs the decision engine
// (a workspace whose run ended for good does not want to run) and
// records its preemptions and queue places in the history.
func (c *cycle) decide() {
	c.ends = c.l.settleEnds(c.set, &c.snap, c.now)
	c.d = c.l.cfg.Decide(policies.Input{Specs: plan.StopFinished(c.set, c.ends.finished), Snapshot: &c.snap, History: &c.hist, Now: c.now})
	c.hist = policies.RecordDecision(c.hist, c.set, c.d)
	c.l.cfg.Metrics.ObserveDecision(c.d)
}

// plan turns the decision into the plan's actions (plan.New, pure).
func (c *cycle) plan() {
	c.res.Plan = plan.New(c.set, &c.snap, c.d)
}

// apply applies the plan, the leader only (Loop.apply, apply.go): starts
// whose victims still hold their GPUs are held back, a failed action
// concerns its workspace alone, and a failure of the cluster as a whole
// leaves the rest for the next cycle (c.err).
func (c *cycle) apply() {
	if c.leading {
		c.out = c.l.apply(c.ctx, c.res.Plan, &c.snap, c.ends.retrying)
	}
	c.err = c.out.err
	c.res.Applied, c.res.Deferred, c.res.Failed, c.res.RetryAt = c.out.applied, c.out.deferred, c.out.failed, c.out.retryAt
	for _, a := range c.out.applied {
		if a.Kind == drivers.ActionPreempt {
			c.l.cfg.Metrics.Preempted(c.set, a.Workspace)
		}
	}
}

// record records each workspace's state and transitions (Loop.record),
// even after a failed apply: what was applied is done; then why those
// backing off after a failed action wait (noteFailures).
func (c *cycle) record() {
	c.res.Transitions = c.l.record(c.set, &c.snap, c.d, &c.hist, c.ends, c.out.applied, c.out.deferred, c.now)
	c.res.Transitions = c.l.noteFailures(c.res.Transitions, c.now)
}

// predict records the runs that completed in the history, predicts each
// workspace's run time and the queue's likely start (likely.go), and
// keeps the cycle's inputs for the dashboard.
func (c *cycle) predict() {
	l := c.l
	c.hist = policies.RecordRuns(c.hist, l.takeRuns())
	l.predictAll(c.set, &c.snap, c.d, &c.hist, c.now)
	l.keepView(c.set, &c.snap, &c.d, &c.hist)
}

// settle says whether the next cycle should come soon (Result.Settling):
// a start held back, the cluster failing, an allocation not yet running,
// or an action other than an update applied. A follower writes nothing
// and need not hurry.
func (c *cycle) settle() {
	settling := len(c.out.deferred) > 0 || c.err != nil
	for _, a := range c.snap.Allocs {
		if a.Phase != drivers.AllocRunning {
			settling = true
		}
	}
	for _, a := range c.out.applied {
		if a.Kind != drivers.ActionUpdate {
			settling = true
		}
	}
	c.res.Settling = settling && c.leading
}

// prune stops and, after PruneDelay, purges the workspaces out of the
// specs (Loop.prune, prune.go). Its failure fails the cycle unless the
// apply failed first.
func (c *cycle) prune() {
	if err := c.l.prune(c.ctx, c.set, &c.snap, c.now); err != nil && c.err == nil {
		c.err = err
	}
}

// save saves the history: the applied revision when the cycle has not
// failed, and the journal of workspaces (journal.go). It saves only when
// something but the clock moved it (usage decays and accrues, AppliedAt
// follows the cycle), or at least every UsageInterval so usage reaches
// the store; until then the history waits in Loop.unsaved, which the
// next cycle goes on from. A cycle cut by its deadline still saves what
// it did, within outer. It returns the cycle's error.
func (c *cycle) save() error {
	l := c.l
	if l.dry {
		return c.err // berth plan's cycle (DryRun) writes nothing
	}
	if c.err == nil {
		c.hist.AppliedRevision, c.hist.AppliedAt = c.set.Revision, c.now
	}
	c.hist.Journal = l.journal(c.now)
	kept := c.hist // the Loop's fields must not keep the whole cycle alive
	// A leader's cycle went on from l.saved, or from l.unsaved, which
	// differs from it only with the clock: one comparison tells.
	if l.saved != nil && sameHistory(c.hist, *l.saved) && l.cfg.Clock.Now().Sub(l.savedAt) < l.cfg.UsageInterval {
		l.unsaved = &kept
		return c.err
	}
	saveCtx := c.ctx
	if c.ctx.Err() != nil && c.outer.Err() == nil {
		saveCtx = c.outer
	}
	return errors.Join(c.err, l.saveHistory(saveCtx, &kept, c.term))
}

// inForce makes set the revision in force for the rest of the cycle; nil
// (the new revision refused with none before it) stalls the cycle.
func (c *cycle) inForce(set *schema.Set) error {
	c.res.Refused = c.l.refused()
	if set == nil {
		return &StalledError{Revision: c.rev.ID, Problems: c.res.Refused.Errors}
	}
	c.set = set
	c.res.Revision = set.Revision
	return nil
}
