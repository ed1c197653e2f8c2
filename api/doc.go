// Package api is berth's HTTP surface: Handler serves what the loop
// (package reconcile) exposes — the status, a workspace's detail,
// /healthz, the Prometheus metrics, the dashboard (api/ui) and its
// WebSocket event feed — and mounts the git webhook (Webhook), which
// pokes the git source when a forge reports a push. RequireToken and
// RequireLocalHost guard it; NewServer bounds what clients can hold.
//
// The loop owns no mux and imports none of this: what it serves it
// exposes as methods (Loop.StatusPage, Loop.Workspace, Loop.Health,
// Loop.Metrics, Loop.Subscribe).
package api
