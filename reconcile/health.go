package reconcile

import (
	"time"

	"github.com/berth-dev/berth/view"
)

// Health reports the age of the last successful cycle against
// Config.HealthMaxAge, from the model the last cycle published.
func (l *Loop) Health() view.Health {
	last, since := l.model.Load().LastOK, l.model.Load().LastOK
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
