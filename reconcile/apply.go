package reconcile

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/plan"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
)

// DefaultParallelism is how many actions of a plan the loop applies at
// once unless Config.Parallelism says otherwise.
const DefaultParallelism = 32

// ActionFailure is an action the cluster did not carry out.
type ActionFailure struct {
	Action drivers.Action
	// Class is how the driver classified the error: "invalid",
	// "unplaceable", "conflict" or "transient".
	Class string
	Err   error
	// RetryAt is when the loop tries the action again at the latest;
	// zero for an invalid one, which waits for the specs to change.
	RetryAt time.Time
}

// Reason kinds of a workspace whose last action failed (see
// WorkspaceStatus.ReasonKind).
const (
	// ReasonKindUnplaceable: the cluster's scheduler cannot place it now.
	ReasonKindUnplaceable = "unplaceable"
	// ReasonKindApplyFailed: the cluster did not carry out its start or
	// update (a conflict or a transient error of that action).
	ReasonKindApplyFailed = "apply-failed"
)

// applyOutcome is what apply did, for Once.
type applyOutcome struct {
	applied  []drivers.Action // in plan order
	deferred []schema.Ref     // starts held back by their Wait
	failed   []ActionFailure
	retryAt  time.Time // earliest retry of a failed action; zero: none
	// err is a failure of the cluster as a whole (unreachable, ctx ended):
	// the actions not yet sent wait for the next cycle.
	err error
}

// apply applies p's actions. It is step 8 of Once.
//
//  1. A Wait holds back the Start of its workspace (deferred to a later
//     cycle); drivers never see it. So does the backoff of a workspace
//     started again after its node's fault (retrying, ends.go). A start or update the cluster refused
//     as invalid under this revision, or one whose workspace is backing
//     off after a failure, is not sent.
//  2. Stops and preemptions go first, then starts and updates: a start
//     never runs before the actions ahead of it in the plan have
//     returned. Within each wave up to Config.Parallelism actions are in
//     flight at once; they are independent (one workspace each).
//  3. Results are taken in plan order, so what is recorded and logged
//     does not depend on which call returned first. An action that failed
//     for its own workspace is recorded against it: invalid ones are not
//     retried until the revision changes, the others (unplaceable, a
//     conflict or transient error of that action) back off per workspace
//     (retries). A failure of the cluster as a whole (breaker) stops
//     sending (the calls in flight finish) and is returned.
func (l *Loop) apply(ctx context.Context, p plan.Plan, snap *drivers.Snapshot, retrying map[schema.Ref]retry) applyOutcome {
	var out applyOutcome
	now := l.cfg.Clock.Now()
	l.retry.observe(snap, now)

	// 1. What is sent, in two waves (plan.Plan.Waves: a Wait holds back
	// its Start).
	waves, held := p.Waves()
	out.deferred = held
	inPlan := map[schema.Ref]bool{}
	for _, a := range p.Actions {
		inPlan[a.Workspace] = true
	}
	for w, wave := range waves {
		send := wave[:0]
		for _, i := range wave {
			a := p.Actions[i]
			if r := retrying[a.Workspace]; a.Kind == drivers.ActionStart && !r.until.IsZero() {
				out.deferred = append(out.deferred, a.Workspace)
				out.retryAt = earliest(out.retryAt, r.until)
				continue // its node's fault's backoff (ends.go)
			}
			starts := a.Kind == drivers.ActionStart || a.Kind == drivers.ActionUpdate
			rej, refused := l.rejected[a.Workspace]
			if refused && rej.revision == p.Revision && starts {
				continue
			}
			if f := l.retry.byRef[a.Workspace]; f != nil && !l.retry.due(f, a, now, l.cfg.BackoffMin) {
				out.retryAt = earliest(out.retryAt, f.retryAt)
				l.log.Debug("not yet: "+plan.ActionLine(a)+" backs off after its last failure", "until", f.retryAt.Format(time.TimeOnly))
				continue
			}
			send = append(send, i)
		}
		waves[w] = send
	}
	l.retry.forget(inPlan)

	// 2. Send them.
	errs := make([]error, len(p.Actions))
	sent := make([]bool, len(p.Actions))
	var b breaker
	for _, wave := range waves {
		l.send(ctx, p.Actions, wave, errs, sent, &b)
		if b.stop.Load() {
			break
		}
	}

	// 3. Results in plan order.
	for i, a := range p.Actions {
		if !sent[i] {
			continue
		}
		err := errs[i]
		if err == nil {
			l.log.Debug("applied "+plan.ActionLine(a), "revision", a.Revision)
			out.applied = append(out.applied, a)
			delete(l.retry.byRef, a.Workspace)
			continue
		}
		err = fmt.Errorf("apply %s %s: %w", a.Kind, a.Workspace, err)
		if clusterWide(ctx, err) {
			if out.err == nil {
				out.err = err
			}
			continue
		}
		cls := drivers.ClassOf(err)
		if b.tripped.Load() && out.err == nil && cls == drivers.ClassTransient {
			out.err = fmt.Errorf("the cluster failed %d actions in a row; the rest of the plan waits for the next cycle: %w", b.failed.Load(), err)
		}
		class := cls.String()
		if cls == drivers.ClassInvalid {
			l.rejected[a.Workspace] = rejection{revision: p.Revision, reason: err.Error()}
			l.log.Error("the cluster refused "+a.Kind.String()+" of "+a.Workspace.String()+"; not retried until the specs change", "err", err.Error())
			out.failed = append(out.failed, ActionFailure{Action: a, Class: class, Err: err})
			continue
		}
		f := l.retry.failed(a, class, errs[i], l.cfg.Clock.Now(), l.cfg.BackoffMin, l.cfg.BackoffMax) // the status names the workspace already
		out.retryAt = earliest(out.retryAt, f.retryAt)
		out.failed = append(out.failed, ActionFailure{Action: a, Class: class, Err: err, RetryAt: f.retryAt})
		l.log.Warn(a.Kind.String()+" of "+a.Workspace.String()+" failed ("+class+"); the rest of the plan goes on",
			"attempt", f.tries, "retry", f.retryAt.Format(time.TimeOnly), "err", err.Error())
	}
	return out
}

// breaker stops a plan that the cluster as a whole refuses: an error
// that concerns every workspace alike (unreachable), or as many transient
// failures in a row, with no success between them, as actions in flight
// (an overloaded or misconfigured cluster answering 5xx, 429 or 403 to
// everyone) is not worth repeating for the rest of the plan.
type breaker struct {
	stop    atomic.Bool // send no more
	tripped atomic.Bool // stopped for transient failures in a row
	failed  atomic.Int64
}

// note records one result; limit transient failures in a row trip it.
func (b *breaker) note(ctx context.Context, err error, limit int) {
	switch {
	case err == nil:
		b.failed.Store(0)
	case clusterWide(ctx, err):
		b.stop.Store(true)
	case drivers.ClassOf(err) == drivers.ClassTransient:
		if b.failed.Add(1) >= int64(limit) {
			b.tripped.Store(true)
			b.stop.Store(true)
		}
	}
}

// send applies the actions at idx, up to Config.Parallelism at a time,
// and returns when all it started have returned. errs and sent are
// indexed like actions. Once b stops, no further action is started.
func (l *Loop) send(ctx context.Context, actions []drivers.Action, idx []int, errs []error, sent []bool, b *breaker) {
	sem := make(chan struct{}, l.cfg.Parallelism)
	var wg sync.WaitGroup
	for _, i := range idx {
		sem <- struct{}{}
		if b.stop.Load() || ctx.Err() != nil {
			<-sem
			break
		}
		sent[i] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = l.cfg.Cluster.Apply(ctx, actions[i])
			b.note(ctx, errs[i], max(l.cfg.Parallelism, 4))
		}()
	}
	wg.Wait()
}

// clusterWide reports whether err concerns the cluster as a whole rather
// than one action: ctx ended, or the cluster could not be reached at all
// (a network error: every other action would fail the same way).
func clusterWide(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne)
}

// rejection is an action the cluster refused as invalid, for a revision.
type rejection struct {
	revision string
	reason   string
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// retries remembers, per workspace, the last failed action that is
// retried with backoff, and whether capacity was freed since. Only Once
// uses it (under Loop.cycle).
type retries struct {
	byRef map[schema.Ref]*failure
	// live holds the last snapshot's allocations ("project/name/replica@node"
	// → workspace) and usable nodes ("node NAME"), kept only while some
	// workspace backs off.
	live map[string]schema.Ref
	// freedAt is the last time an allocation of a workspace that is not
	// backing off went away, or a node became usable.
	freedAt time.Time
}

// failure is the last failure of one workspace's action.
type failure struct {
	key     string // the action's kind, workspace spec and placements
	class   string
	err     string
	at      time.Time
	tries   int
	retryAt time.Time
}

// actionKey identifies what an action asks of the cluster: a commit that
// changes another workspace leaves it alone.
func actionKey(a drivers.Action) string {
	key := fmt.Sprintf("%s %v", a.Kind, a.Placements)
	if a.Spec != nil {
		key += fmt.Sprintf(" %+v", a.Spec.Spec)
	}
	return key
}

// failed records a failure of a and returns it: the backoff doubles from
// min with each failure of the same action, up to max.
func (r *retries) failed(a drivers.Action, class string, err error, now time.Time, min, max time.Duration) *failure {
	if r.byRef == nil {
		r.byRef = map[schema.Ref]*failure{}
	}
	f := r.byRef[a.Workspace]
	key := actionKey(a)
	if f == nil || f.key != key {
		f = &failure{key: key}
		r.byRef[a.Workspace] = f
	}
	f.tries++
	f.class, f.err, f.at = class, err.Error(), now
	wait := min
	for i := 1; i < f.tries && wait < max; i++ {
		wait *= 2
	}
	f.retryAt = now.Add(wait)
	if f.retryAt.After(now.Add(max)) {
		f.retryAt = now.Add(max)
	}
	return f
}

// due reports whether a, whose workspace last failed with f, is to be
// sent now: it is another action (a changed spec or placement), its
// backoff is over, or it was unplaceable, capacity was freed since (by
// anything but the workspaces backing off: berth's own withdrawals do
// not count) and at least min has passed. Freed capacity does not help
// a conflict or a transient error: those wait out their backoff, however
// often the cluster changes.
func (r *retries) due(f *failure, a drivers.Action, now time.Time, min time.Duration) bool {
	return f.key != actionKey(a) || !now.Before(f.retryAt) ||
		(f.class == "unplaceable" && r.freedAt.After(f.at) && now.Sub(f.at) >= min)
}

// forget drops the failures of workspaces the plan no longer acts on
// (they run, were stopped, or left the specs).
func (r *retries) forget(inPlan map[schema.Ref]bool) {
	for ref := range r.byRef {
		if !inPlan[ref] {
			delete(r.byRef, ref)
		}
	}
}

// observe notes whether capacity was freed since the last snapshot: an
// allocation of a workspace that is not backing off went away, or a node
// became ready and eligible. It keeps nothing while no workspace backs off.
func (r *retries) observe(snap *drivers.Snapshot, now time.Time) {
	if len(r.byRef) == 0 {
		r.live = nil
		return
	}
	live := make(map[string]schema.Ref, len(snap.Allocs)+len(snap.Nodes))
	for _, a := range snap.Allocs {
		live[fmt.Sprintf("%s/%d@%s", a.Workspace, a.Replica, a.Node)] = a.Workspace
	}
	for _, n := range snap.Nodes {
		if n.Ready && n.Eligible {
			live["node "+n.Name] = schema.Ref{}
		}
	}
	if r.live != nil {
		for k, ref := range r.live {
			if _, still := live[k]; !still && ref != (schema.Ref{}) && r.byRef[ref] == nil {
				r.freedAt = now
			}
		}
		for k, ref := range live {
			if _, before := r.live[k]; !before && ref == (schema.Ref{}) {
				r.freedAt = now
			}
		}
	}
	r.live = live
}

// noteFailures shows, for each workspace backing off after a failed
// action and still Pending, why and until when: in its status and in the
// transition into Pending this cycle recorded (at now), if any. It
// returns ts with those transitions' reasons filled in.
func (l *Loop) noteFailures(ts []view.WorkspaceTransition, now time.Time) []view.WorkspaceTransition {
	if len(l.retry.byRef) == 0 {
		return ts
	}
	refs := make([]schema.Ref, 0, len(l.retry.byRef))
	for ref := range l.retry.byRef {
		refs = append(refs, ref)
	}
	slices.SortFunc(refs, func(a, b schema.Ref) int {
		if a.Less(b) {
			return -1
		}
		if b.Less(a) {
			return 1
		}
		return 0
	})
	for _, ref := range refs {
		f, rec := l.retry.byRef[ref], l.records[ref]
		if rec == nil || rec.status.State != view.StatePending {
			continue
		}
		rec.status.Reason, rec.status.ReasonKind = f.reason(), ReasonKindApplyFailed
		if f.class == "unplaceable" {
			rec.status.ReasonKind = ReasonKindUnplaceable
		}
		if n := len(rec.history); n > 0 && rec.history[n-1].To == view.StatePending && rec.history[n-1].At.Equal(now) {
			// A published model may hold this transition (a cycle before
			// at the same cluster time): replace the history, never edit it.
			rec.history = slices.Clone(rec.history)
			rec.history[n-1].Reason = rec.status.Reason
		}
		for i := range ts {
			if ts[i].Workspace == ref && ts[i].To == view.StatePending && ts[i].At.Equal(now) {
				ts[i].Reason = rec.status.Reason
			}
		}
	}
	return ts
}

// reason is the sentence a person reads in the workspace's status.
func (f *failure) reason() string {
	what := "the cluster did not start it"
	if f.class == "unplaceable" {
		what = "the cluster cannot place it now"
	}
	when := "tries again at " + f.retryAt.UTC().Format(time.TimeOnly) + " UTC"
	if f.class == "unplaceable" {
		when += ", or sooner when capacity is freed"
	}
	return fmt.Sprintf("%s: %s; berth %s (attempt %d)", what, f.err, when, f.tries)
}
