// Package plan is what a change would do, pure: New turns a decision into
// the ordered actions that move the cluster toward it (stops,
// preemptions, waits for victims to be gone, starts, updates);
// CheckMassPrune is the guard against a revision that would stop or
// remove too many workspaces at once; NewReport is `berth plan`'s report:
// the spec changes between two revisions and their consequences on an
// observed snapshot, rendered as text, Markdown (pull-request comments)
// or JSON.
//
// The consequences are not decided here: they are the decision and plan
// of the loop's own cycle, run dry on the head revision
// (reconcile.DryRun), so a report says what berth reconcile does.
//
// It reads no clock and does no I/O: the loop (package reconcile) and
// `berth plan` call it with what they observed.
package plan
