// Package e2e holds berth's end-to-end tests: the loop a user runs
// (reconcile.Loop, with the policies deciding) over the Nomad driver,
// against a real Nomad agent (TestReal…, which skip unless NOMAD_ADDR is
// set: `make e2e` starts one from ../shared/nomad-dev) or the fake one in
// drivers/nomad/nomadfake. Tests of the driver alone live beside it, in
// drivers/nomad.
//
// It has test files only (and this one); it may import every berth
// package, and nothing imports it.
package e2e
