// Package state holds the observed world: cluster snapshots (nodes, GPUs
// with their NVLink domains and NUMA nodes, allocations), the history the
// reconciler carries between decisions, and the actions a driver applies.
//
// It is a leaf shared by policies, reconcile and the drivers. It must never
// do I/O, read a clock, or import any berth package but schema.
package state
