// Package e2e holds berth's end-to-end tests: the loop a user runs
// (reconcile.Loop, with the policies deciding) over the Nomad driver, and
// the berth binary itself (berth logs, the reconciler's Nomad job),
// against a real Nomad agent or the fake one in drivers/nomad/nomadfake.
// The tests against a real agent are named TestReal… and live in files
// named *_real_test.go; they skip unless NOMAD_ADDR is set (`make e2e`
// starts an agent from ../shared/nomad-dev). Tests of the driver alone,
// its conformance suite included, live beside it in drivers/nomad.
//
// It has test files only (and this one); it may import every berth
// package, and nothing imports it.
package e2e
