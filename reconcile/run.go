package reconcile

import (
	"context"
	"errors"
	"time"
)

// Run calls Once now, then whenever changes signals (debounced: it waits
// until changes have been quiet for Debounce) and at least every
// Interval; sooner (every Settle) while something is on its way. After a
// failed cycle it waits with backoff, doubling from BackoffMin to
// BackoffMax, unless the specs change; after a conflict (the cluster
// changed under berth) it observes again after Settle. An invalid revision with nothing
// in force waits for a change. Run returns nil when ctx ends. changes may
// be nil.
func (l *Loop) Run(ctx context.Context, changes <-chan struct{}) error {
	var backoff time.Duration
	for {
		if ctx.Err() != nil {
			return nil
		}
		res, err := l.Once(ctx)
		if ctx.Err() != nil {
			return nil
		}
		next := l.cfg.Interval
		var stalled *StalledError
		switch {
		case errors.As(err, &stalled):
			backoff = 0
			l.log.Error("no valid revision to apply; waiting for the specs to change", "revision", stalled.Revision)
		case err != nil && hasClass(err, "conflict"):
			backoff = 0
			next = l.cfg.Settle
			l.log.Info("the cluster changed under berth; observing again", "err", err.Error())
		case err != nil:
			if backoff == 0 {
				backoff = l.cfg.BackoffMin
			} else {
				backoff = min(2*backoff, l.cfg.BackoffMax)
			}
			next = backoff
			l.log.Warn("reconcile failed; retrying", "in", backoff.String(), "err", err.Error())
		default:
			backoff = 0
			if res.Settling {
				next = l.cfg.Settle
			}
		}
		if !l.wait(ctx, changes, next) {
			return nil
		}
	}
}

// wait returns after d, or once changes have been quiet for Debounce
// after the first one (at most Interval after it); false when ctx ended.
func (l *Loop) wait(ctx context.Context, changes <-chan struct{}, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	case _, ok := <-changes:
		if !ok {
			changes = nil
		}
	}
	quiet := time.NewTimer(l.cfg.Debounce)
	defer quiet.Stop()
	// Files that never stop changing still get a cycle every Interval.
	limit := time.NewTimer(l.cfg.Interval)
	defer limit.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-quiet.C:
			return true
		case <-limit.C:
			return true
		case _, ok := <-changes:
			if !ok {
				changes = nil
				continue
			}
			quiet.Reset(l.cfg.Debounce)
		}
	}
}
