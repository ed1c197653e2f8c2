package reconcile

import "time"

// Health is what /healthz answers. It carries no error text: /healthz
// needs no token.
type Health struct {
	// Status is HealthOK or HealthStale.
	Status string `json:"status"`
	// LastSuccessAt is when the last successful cycle ended; absent
	// before the first.
	LastSuccessAt time.Time `json:"lastSuccessAt,omitzero"`
	// AgeSeconds is the time since then (since berth started, before the
	// first success); MaxAgeSeconds the most it may be (Config.HealthMaxAge).
	AgeSeconds    float64 `json:"ageSeconds"`
	MaxAgeSeconds float64 `json:"maxAgeSeconds"`
}

// Health statuses.
const (
	// HealthOK: a cycle succeeded within Config.HealthMaxAge.
	HealthOK = "ok"
	// HealthStale: none did (a hung or failing berth, an unreachable
	// cluster, or specs with no valid revision): restart it or look.
	HealthStale = "stale"
)

// Health reports the age of the last successful cycle against
// Config.HealthMaxAge.
func (l *Loop) Health() Health {
	l.mu.Lock()
	last, since := l.lastOK, l.lastOK
	l.mu.Unlock()
	if since.IsZero() {
		since = l.started
	}
	age := l.cfg.Clock.Now().Sub(since)
	h := Health{Status: HealthOK, LastSuccessAt: last, AgeSeconds: age.Round(time.Millisecond).Seconds(), MaxAgeSeconds: l.cfg.HealthMaxAge.Seconds()}
	if age > l.cfg.HealthMaxAge {
		h.Status = HealthStale
	}
	return h
}
