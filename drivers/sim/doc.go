// Package sim is a GPU cluster in memory with its own clock: nodes, GPUs
// with their NVLink domains and NUMA nodes, and workspaces that make
// progress, checkpoint, and lose the work since their last checkpoint when
// they are stopped without enough grace to save it.
//
// A *Cluster is what `berth reconcile --cluster sim:FILE` and `make run`
// drive, the fake for every test shaped like a cluster, and the engine of
// trace replay. It observes complete snapshots and applies idempotent
// actions, like the Nomad driver, and keeps the reconciler's history in
// memory. Faults can be injected for the loop's tests.
//
// It must never talk to a real cluster, read the wall clock except through
// a ScaledClock, or import reconcile or policies (it implements the
// reconciler's interfaces structurally).
package sim
