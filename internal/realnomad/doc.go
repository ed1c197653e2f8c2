// Package realnomad is what tests against a real Nomad agent share, and
// what the Nomad driver's own tests over the fake agent share with them:
//
//   - the agent's address (NOMAD_ADDR, set by `make e2e` from
//     ../shared/nomad-dev/up), a raw API client, and a clean slate
//     before and after each test (Client);
//   - the kit's cluster for the bad days: its GPU files and client
//     agents (Kit), and the figures a test measures (Report);
//   - a driver closed when the test ends (NewDriver), one that follows
//     the event stream (Follow, AwaitCache), observing until a condition
//     holds (WaitFor), and a large history to save (SampleHistory).
//
// The tests against a real agent are named TestReal… and live in
// internal/e2e, in files named *_real_test.go (the driver's conformance
// suite, TestRealConformance, stays with the driver); `make e2e` selects
// them with -run '^TestReal' and `make test` skips them, as Client skips
// a test when NOMAD_ADDR is not set.
//
// It is test support: no berth binary imports it.
package realnomad
