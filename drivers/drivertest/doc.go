// Package drivertest is the conformance suite every cluster driver
// passes: observation is complete, sorted and stable; Start places a
// workspace on exactly the node and GPUs chosen; Stop and Preempt make
// its allocations Stopping, then gone; applying an action twice is
// applying it once; a gang places every replica; errors are classified
// (drivers.ClassOf) as invalid or conflict; a GPU utilization reading
// (drivers.Alloc.Use) is on a running allocation only, one percent per
// GPU at most, and, where the harness can set it, the one set.
//
// A driver's test calls Run with a Factory that builds the driver over a
// fresh cluster of the given nodes:
//
//	func TestConformance(t *testing.T) {
//		drivertest.Run(t, func(t *testing.T, nodes []drivers.Node) drivertest.Harness {
//			c := sim.New(nodes) // or a fake Nomad server
//			return drivertest.Harness{Cluster: c, Settle: c.Settle, Exact: true}
//		})
//	}
//
// It is test support: it imports testing and must never be imported by
// production code.
package drivertest
