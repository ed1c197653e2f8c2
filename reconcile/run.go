package reconcile

import (
	"context"
	"errors"
	"time"

	"github.com/berth-dev/berth/drivers"
)

// Run calls Once now, then whenever changes signals (debounced: it waits
// until the specs have been quiet for Debounce, the cluster for
// ClusterDebounce) and at least every
// Interval; sooner (every Settle, or SettleWatched while ClusterChanges
// watches the cluster) while something is on its way, and by
// the time a failed action is due again (Result.RetryAt). Config.
// ClusterChanges starts a cycle like changes does.
//
// After a failed cycle it waits with backoff, doubling from BackoffMin to
// BackoffMax, unless the specs change: neither the cluster's changes
// (berth's own writes are among them) nor a failed action due again cut
// it short. After a conflict (the cluster changed under berth) it
// observes again after Settle; a conflict that repeats backs off the
// same way, doubling from Settle, and is logged as a warning. An invalid
// revision with nothing in force waits for a change. Run returns nil
// when ctx ends, once it has saved the history the last cycles kept in
// memory (Config.UsageInterval). changes may be nil.
func (l *Loop) Run(ctx context.Context, changes <-chan struct{}) error {
	defer l.stop(ctx)
	var backoff time.Duration
	conflicts := 0
	for {
		if ctx.Err() != nil {
			return nil
		}
		res, err := l.Once(ctx)
		if ctx.Err() != nil {
			return nil
		}
		next := l.cfg.Interval
		cluster := l.cfg.ClusterChanges
		var stalled *StalledError
		switch {
		case errors.As(err, &stalled):
			backoff, conflicts = 0, 0
			l.log.Error("no valid revision to apply; waiting for the specs to change", "revision", stalled.Revision)
		case err != nil && drivers.ClassOf(err) == drivers.ClassConflict:
			backoff = 0
			conflicts++
			next = l.cfg.Settle
			for i := 1; i < conflicts && next < l.cfg.BackoffMax; i++ {
				next *= 2
			}
			next = min(next, l.cfg.BackoffMax)
			cluster = nil
			msg := "the cluster changed under berth; observing again"
			if conflicts > 1 {
				// Once is news; again and again is a problem to look at.
				l.log.Warn(msg, "in", next.String(), "conflicts", conflicts, "err", err.Error())
			} else {
				l.log.Info(msg, "in", next.String(), "err", err.Error())
			}
		case err != nil:
			conflicts = 0
			if backoff == 0 {
				backoff = l.cfg.BackoffMin
			} else {
				backoff = min(2*backoff, l.cfg.BackoffMax)
			}
			next = backoff
			cluster = nil
			l.log.Warn("reconcile failed; retrying", "in", backoff.String(), "err", err.Error())
		default:
			backoff, conflicts = 0, 0
			if res.Settling {
				next = l.cfg.Settle
				if cluster != nil {
					next = max(next, l.cfg.SettleWatched) // its changes start the cycles
				}
			}
			// A failed action due again before then: its own backoff. After
			// a failed cycle the cycle's backoff wins: an action is never
			// retried sooner than the log says.
			if !res.RetryAt.IsZero() {
				next = min(next, max(0, res.RetryAt.Sub(l.cfg.Clock.Now())))
			}
		}
		if !l.wait(ctx, changes, cluster, next) {
			return nil
		}
	}
}

// stopSaveTimeout bounds the save of the history when Run stops.
const stopSaveTimeout = 5 * time.Second

// stop is Run's end: it saves the history the last cycles kept in memory
// (saveUnsaved), within stopSaveTimeout of ctx ending.
func (l *Loop) stop(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopSaveTimeout)
	defer cancel()
	if err := l.saveUnsaved(ctx); err != nil {
		l.log.Warn("the history's usage since its last save is lost: " + err.Error())
	}
}

// wait returns after d, or sooner once changes have been quiet after the
// first one (at most Interval after it): for Debounce after a change of
// the specs, ClusterDebounce after one of the cluster, whichever came
// last; changes never make it wait longer than d. It returns false when
// ctx ended. A nil channel never signals.
func (l *Loop) wait(ctx context.Context, changes, cluster <-chan struct{}, d time.Duration) bool {
	timer := l.cfg.Clock.After(d)
	var quietFor time.Duration
	select {
	case <-ctx.Done():
		return false
	case <-timer:
		return true
	case _, ok := <-changes:
		if !ok {
			changes = nil
		}
		quietFor = l.cfg.Debounce
	case _, ok := <-cluster:
		if !ok {
			cluster = nil
		}
		quietFor = l.cfg.ClusterDebounce
	}
	quiet := l.cfg.Clock.After(quietFor)
	// Files that never stop changing still get a cycle every Interval.
	limit := l.cfg.Clock.After(l.cfg.Interval)
	for {
		select {
		case <-ctx.Done():
			return false
		case <-quiet:
			return true
		case <-limit:
			return true
		case <-timer:
			return true
		case _, ok := <-changes:
			if !ok {
				changes = nil
				continue
			}
			quiet = l.cfg.Clock.After(l.cfg.Debounce)
		case _, ok := <-cluster:
			if !ok {
				cluster = nil
				continue
			}
			quiet = l.cfg.Clock.After(l.cfg.ClusterDebounce)
		}
	}
}

// MergeChanges returns a channel that signals when any of chans does,
// until ctx ends. Nil channels are left out.
func MergeChanges(ctx context.Context, chans ...<-chan struct{}) <-chan struct{} {
	out := make(chan struct{}, 1)
	for _, c := range chans {
		if c == nil {
			continue
		}
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case _, ok := <-c:
					if !ok {
						return
					}
					select {
					case out <- struct{}{}:
					default:
					}
				}
			}
		}()
	}
	return out
}
