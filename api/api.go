package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/berth-dev/berth/api/ui"
	"github.com/berth-dev/berth/reconcile"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves the loop's HTTP API:
//
//	GET /api/v1/status[?limit=N&after=P/W]  the Status as JSON, paged (statusQuery)
//	GET /api/v1/workspaces/{project}/{name} a WorkspaceDetail as JSON
//	GET /healthz                            a Health as JSON: 200 while cycles succeed, 503 once the last success is older than the loop's HealthMaxAge
//	GET /metrics                            Prometheus metrics: the loop's, Go's and the process's
//	GET /api/v1/events                      the dashboard's WebSocket feed (events.go)
//	GET /                                   the dashboard (api/ui)
//
// routes, when not nil, adds routes (the git webhook: Webhook.Routes).
func Handler(l *reconcile.Loop, routes func(mux *http.ServeMux)) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	gatherers := prometheus.Gatherers{l.Metrics().Registry, reg}

	mux := http.NewServeMux()
	if routes != nil {
		routes(mux)
	}
	mux.HandleFunc("GET /api/v1/status", func(w http.ResponseWriter, r *http.Request) {
		after, limit, err := statusQuery(r.URL.Query())
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, l.StatusPage(after, limit))
	})
	mux.HandleFunc("GET /api/v1/workspaces/{project}/{name}", func(w http.ResponseWriter, r *http.Request) {
		ref := schema.Ref{Project: r.PathValue("project"), Name: r.PathValue("name")}
		d, ok := l.Workspace(ref)
		if !ok {
			writeError(w, http.StatusNotFound, "no workspace "+ref.String()+" in the specs or the cluster")
			return
		}
		writeJSON(w, http.StatusOK, d)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		h := l.Health()
		code := http.StatusOK
		if h.Status != view.HealthOK {
			code = http.StatusServiceUnavailable
		}
		writeJSON(w, code, h)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherers, promhttp.HandlerOpts{}))
	mux.Handle("GET /api/v1/events", events(l))
	mux.Handle("GET /", ui.Handler())
	return mux
}

// writeError answers code with an error document: {"version", "error"}.
func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"version": view.APIVersion, "error": msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// statusQuery reads the paging parameters of GET /api/v1/status: limit
// (1 to view.MaxStatusLimit; default view.DefaultStatusLimit) and after (a cursor,
// PROJECT/NAME, as the last page's next gives it).
func statusQuery(q url.Values) (schema.Ref, int, error) {
	limit := view.DefaultStatusLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > view.MaxStatusLimit {
			return schema.Ref{}, 0, fmt.Errorf("limit %q: want a number of workspaces from 1 to %d", v, view.MaxStatusLimit)
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
