// Package e2e holds berth's end-to-end tests and is the one home of its
// tests against a real Nomad agent: the Nomad driver alone (starts,
// following the event stream, the version memo, the history in
// Variables, Watch), the loop a user runs (reconcile.Loop, with the
// policies deciding) over that driver, and the berth binary itself
// (berth logs, the reconciler's Nomad job); some run over the fake
// agent in drivers/nomad/nomadfake instead. The tests against a real
// agent are named TestReal… and live in files named *_real_test.go;
// they skip unless NOMAD_ADDR is set (`make e2e` starts an agent from
// ../shared/nomad-dev). The one exception is the driver's conformance
// suite, TestRealConformance, which stays beside the driver in
// drivers/nomad with the fake-agent run of the same suite. What these
// tests share with the driver's own tests is in internal/realnomad.
//
// It has test files only (and this one); it may import every berth
// package, and nothing imports it.
package e2e
