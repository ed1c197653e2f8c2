// Package text writes numbers, sizes and durations as berth's messages
// show them: the waiting reasons, berth plan's report, the status page,
// explain, the replay's report and the loader's diagnostics.
//
// Where one quantity is written two ways, each has its own function and
// the name says which: Bytes and CPU for a person ("1.5 GiB", "8 CPUs"),
// BytesQuantity and CPUQuantity as a spec writes them ("64Gi", "500m");
// Duration to the second ("1h30m", "45s"), RoughDuration rounded as an
// estimate deserves ("30h", "12d").
//
// The package is a leaf: it imports no berth package, does no I/O and
// reads no clock.
package text
