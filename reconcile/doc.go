// Package reconcile is berth's loop: read the specs (a Source), load and
// validate them, observe the cluster (a Cluster), decide (policies), plan
// the actions that close the gap, apply them, and record every
// workspace's state, its transitions and the reconciler's history (a
// Store). Loop.Once is one cycle; Loop.Run schedules it on file changes
// and an interval. Loop.Handler serves the status over HTTP, and the live
// dashboard (reconcile/ui) with its WebSocket feed of changes (events.go).
//
// Sources: DirSource (a directory, watched by WatchDir) and GitSource (a
// branch of a git repository, cloned shallow into a private directory on
// disk and fetched; force-pushes reported; OpenPGP-signed commits optionally
// required; a Webhook pokes it). Deletion safety: a revision that would
// stop or remove too many workspaces at once is refused (CheckMassPrune),
// and a workspace left out of the specs is only stopped until PruneDelay
// has passed, then purged. NewReport is `berth plan`: spec changes and
// their consequences on an observed snapshot, pure.
//
// The plan (NewPlan) is a pure function of the decision and the snapshot.
// The loop is the only place that reads the clock, and it reads the
// cluster's: a snapshot's ObservedAt is the decision's now.
//
// It must never talk to a cluster except through Cluster, import a
// driver, apply an invalid revision, or apply anything after a failed
// observation, purge a workspace before PruneDelay, or put a git
// secret in a log line, a status or an error. See README.md for the pipeline and the glossary.
package reconcile
