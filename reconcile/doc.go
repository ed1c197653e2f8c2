// Package reconcile is berth's loop: read the specs (a source.Source),
// load and validate them, observe the cluster (a drivers.Cluster), decide
// (policies), plan the actions that close the gap (package plan), apply
// them, and record every workspace's state, its transitions and the
// reconciler's history (a drivers.Store). Loop.Once is one cycle; Loop.Run
// schedules it on spec changes, cluster changes and an interval.
//
// What the loop knows it exposes as methods — StatusPage, Workspace,
// Health, Metrics, and Subscribe for the dashboard's event feed — and
// package api serves them over HTTP; the loop owns no mux. Their types,
// and how they are built (the explanations, the likely starts, the
// dashboard's document, the metrics), are package view's: at the end of
// each cycle the loop publishes a view.Model, an immutable value, and
// those methods read only it. One lock, the cycle's, guards everything
// else the loop holds. With several
// replicas, only the one that leads (Config.Leader, package leader)
// writes: every write goes through a fence (fence.go).
//
// Deletion safety: a revision that would stop or remove too many
// workspaces at once is refused (plan.CheckMassPrune), and a workspace
// left out of the specs is only stopped until PruneDelay has passed, then
// purged.
//
// The loop is the only place that reads the clock, and it reads the
// cluster's: a snapshot's ObservedAt is the decision's now. Its own
// timing (when cycles run, the waits between them, backoffs, /healthz's
// age) it reads from Config.Clock, never from package time, so a test or
// the simulator can move it.
//
// It must never talk to a cluster except through Cluster, apply an
// invalid revision, apply anything after a failed observation, purge a
// workspace before PruneDelay, or put a git secret in a log line, a
// status or an error. README.md in this folder draws the cycle.
package reconcile
