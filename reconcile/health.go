package reconcile

import (
	"time"

	"github.com/berth-dev/berth/view"
)

// Health reports the age of the last successful cycle against
// Config.HealthMaxAge.
func (l *Loop) Health() view.Health {
	l.mu.Lock()
	last, since := l.lastOK, l.lastOK
	l.mu.Unlock()
	if since.IsZero() {
		since = l.started
	}
	age := l.cfg.Clock.Now().Sub(since)
	h := view.Health{Status: view.HealthOK, LastSuccessAt: last, AgeSeconds: age.Round(time.Millisecond).Seconds(), MaxAgeSeconds: l.cfg.HealthMaxAge.Seconds()}
	if age > l.cfg.HealthMaxAge {
		h.Status = view.HealthStale
	}
	return h
}
