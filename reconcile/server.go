package reconcile

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/berth-dev/berth/reconcile/ui"
	"github.com/berth-dev/berth/schema"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves the loop's HTTP API:
//
//	GET /api/v1/status[?limit=N&after=P/W]  the Status as JSON, paged (statusQuery)
//	GET /api/v1/workspaces/{project}/{name} a WorkspaceDetail as JSON
//	GET /healthz                            a Health as JSON: 200 while cycles succeed, 503 once the last success is older than Config.HealthMaxAge
//	GET /metrics                            Prometheus metrics
//	GET /api/v1/events                      the dashboard's WebSocket feed (events.go)
//	GET /                                   the dashboard (reconcile/ui)
func (l *Loop) Handler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	gatherers := prometheus.Gatherers{l.cfg.Metrics.Registry, reg}

	mux := http.NewServeMux()
	if l.cfg.Routes != nil {
		l.cfg.Routes(mux) // POST /api/v1/hooks/git with the git source
	}
	mux.HandleFunc("GET /api/v1/status", func(w http.ResponseWriter, r *http.Request) {
		after, limit, err := statusQuery(r.URL.Query())
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"version": APIVersion, "error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, l.StatusPage(after, limit))
	})
	mux.HandleFunc("GET /api/v1/workspaces/{project}/{name}", func(w http.ResponseWriter, r *http.Request) {
		ref := schema.Ref{Project: r.PathValue("project"), Name: r.PathValue("name")}
		d, ok := l.Workspace(ref)
		if !ok {
			writeJSON(w, http.StatusNotFound, map[string]string{"version": APIVersion, "error": "no workspace " + ref.String() + " in the specs or the cluster"})
			return
		}
		writeJSON(w, http.StatusOK, d)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		h := l.Health()
		code := http.StatusOK
		if h.Status != HealthOK {
			code = http.StatusServiceUnavailable
		}
		writeJSON(w, code, h)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherers, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /api/v1/events", l.serveEvents)
	mux.Handle("GET /", ui.Handler())
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

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
	age := time.Since(since)
	h := Health{Status: HealthOK, LastSuccessAt: last, AgeSeconds: age.Round(time.Millisecond).Seconds(), MaxAgeSeconds: l.cfg.HealthMaxAge.Seconds()}
	if age > l.cfg.HealthMaxAge {
		h.Status = HealthStale
	}
	return h
}

// Paging of GET /api/v1/status.
const (
	// DefaultStatusLimit is how many workspaces the status lists when
	// the request sets no limit: a tree of up to this many is listed
	// whole, as before paging, and a larger one a page at a time (0.2 to
	// 0.5 MB of JSON per page: 459 KB of 100,000 workspaces in 100
	// projects) with Next set.
	DefaultStatusLimit = 1000
	// MaxStatusLimit is the most one page may list.
	MaxStatusLimit = 10000
)

// statusQuery reads the paging parameters of GET /api/v1/status: limit
// (1 to MaxStatusLimit; default DefaultStatusLimit) and after (a cursor,
// PROJECT/NAME, as the last page's next gives it).
func statusQuery(q url.Values) (schema.Ref, int, error) {
	limit := DefaultStatusLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxStatusLimit {
			return schema.Ref{}, 0, fmt.Errorf("limit %q: want a number of workspaces from 1 to %d", v, MaxStatusLimit)
		}
		limit = n
	}
	var after schema.Ref
	if v := q.Get("after"); v != "" {
		p, n, ok := strings.Cut(v, "/")
		if !ok || p == "" || n == "" || strings.Contains(n, "/") {
			return schema.Ref{}, 0, fmt.Errorf("after %q: want PROJECT/NAME, the next of the page before", v)
		}
		after = schema.Ref{Project: p, Name: n}
	}
	return after, limit, nil
}
