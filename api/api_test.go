package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/reconcile"
	"github.com/berth-dev/berth/schema/schematest"
	"github.com/berth-dev/berth/source"
	"github.com/berth-dev/berth/view"
)

// emptyLoop is a loop over an empty spec directory on a simulated
// cluster, before its first cycle.
func emptyLoop(t *testing.T, cfg reconcile.Config) *reconcile.Loop {
	t.Helper()
	spec, err := sim.Parse([]byte(schematest.TwoGPUs))
	if err != nil {
		t.Fatal(err)
	}
	c := sim.New(*spec, sim.NewScaledClock(1))
	cfg.Source, cfg.Cluster, cfg.Store = source.DirSource{Dir: t.TempDir()}, c, c
	l, err := reconcile.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// A status query the API cannot read is answered 400 with what to send.
func TestStatusQuery(t *testing.T) {
	h := Handler(emptyLoop(t, reconcile.Config{}), nil)
	for path, msg := range map[string]string{
		"/api/v1/status?limit=0":      `limit "0": want a number of workspaces from 1 to 10000`,
		"/api/v1/status?limit=10001":  `limit "10001": want a number of workspaces from 1 to 10000`,
		"/api/v1/status?limit=many":   `limit "many": want a number of workspaces from 1 to 10000`,
		"/api/v1/status?after=p0":     `after "p0": want PROJECT/NAME, the next of the page before`,
		"/api/v1/status?after=p0/a/b": `after "p0/a/b": want PROJECT/NAME, the next of the page before`,
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		body := rec.Body.Bytes()
		if rec.Code != http.StatusBadRequest {
			t.Errorf("GET %s: %d, want 400", path, rec.Code)
		}
		var e struct{ Version, Error string }
		json.Unmarshal(body, &e)
		if e.Error != msg || e.Version != view.APIVersion {
			t.Errorf("GET %s: %s, want the error %q", path, body, msg)
		}
	}
}

// /healthz answers 200 while the loop's health is ok and 503 once it is
// stale (no successful cycle within HealthMaxAge).
func TestHealthz(t *testing.T) {
	for maxAge, want := range map[time.Duration]int{time.Hour: http.StatusOK, time.Nanosecond: http.StatusServiceUnavailable} {
		l := emptyLoop(t, reconcile.Config{HealthMaxAge: maxAge})
		time.Sleep(time.Millisecond)
		rec := httptest.NewRecorder()
		Handler(l, nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		var body view.Health
		if err := json.Unmarshal(rec.Body.Bytes(), &body); rec.Code != want || err != nil || body.Status != l.Health().Status {
			t.Errorf("max age %s: %d %s (%v), want %d and the loop's health", maxAge, rec.Code, rec.Body, err, want)
		}
	}
}
