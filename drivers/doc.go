// Package drivers is the ground floor every layer above schema stands on:
// what a cluster looks like (Snapshot: nodes, GPUs with their NVLink
// domains and NUMA nodes, allocations; the History the reconciler carries
// between decisions), what can be done to it (Action, Fingerprint), the
// contract a cluster keeps (Cluster, Store), and how a driver fails (the
// error classes), so the loop knows what to do next without knowing which
// driver failed.
//
// It is shared by policies, reconcile, replay and the drivers. It must
// never do I/O, read a clock, or import any berth package but schema.
//
// The drivers themselves live below it: drivers/nomad (a real Nomad
// cluster through github.com/hashicorp/nomad/api) and drivers/sim (an
// in-memory cluster). drivers/drivertest is the conformance suite both
// pass. This tree never imports policies or reconcile (see deps_test.go).
package drivers
