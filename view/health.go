package view

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
