// Package drivers holds what every cluster driver shares: the
// classification of the errors a driver returns, so the reconcile loop
// knows what to do next without knowing which driver failed.
//
// The drivers themselves live below it: drivers/nomad (a real Nomad
// cluster through github.com/hashicorp/nomad/api) and drivers/sim (an
// in-memory cluster). drivers/drivertest is the conformance suite both
// pass. Drivers implement reconcile.Cluster structurally: this tree must
// never import package reconcile (see deps_test.go).
package drivers
