// Package clock tells the time to code that must not read it directly:
// Real is the machine's clock, Manual one that moves only when told to
// (tests, and the simulator's trace replay).
//
// It is the one place that may read the wall clock on behalf of the
// loop; it imports no berth package.
package clock
