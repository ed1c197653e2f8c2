package reconcile

import (
	"encoding/json"
	"net/http"

	"github.com/berth-dev/berth/reconcile/ui"
	"github.com/berth-dev/berth/schema"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves the loop's HTTP API:
//
//	GET /api/v1/status                      the Status as JSON
//	GET /api/v1/workspaces/{project}/{name} a WorkspaceDetail as JSON
//	GET /healthz                            200 "ok" while the loop runs
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
		writeJSON(w, http.StatusOK, l.Status())
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
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
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
