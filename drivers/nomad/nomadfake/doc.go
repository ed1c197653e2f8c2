// Package nomadfake is a fake Nomad HTTP API (server and client in one,
// like `nomad agent -dev`) for tests that drive the official api client:
// nodes with GPU device instances, namespaces, jobs placed by a small
// scheduler that honours ${node.unique.id} and ${device.ids} pins,
// allocations, evaluations, Variables with check-and-set, the scheduler
// configuration with ?cas=, dynamic node metadata, and blocking queries.
//
// It answers as the Nomad 1.6.5 recordings in drivers/nomad/testdata
// show: status codes, X-Nomad-Index, plain-text 500s with Nomad's own
// messages, 409 Variable conflicts carrying the current variable, a stale
// scheduler CAS answered 200 {"Updated":false}, and the 1.6 trap of
// recording 82 (a job pinned to busy GPUs is placed with no GPU when
// others on the node are free). Time passes only when a test calls
// Settle. It is for tests only and must never be used against, or be
// mistaken for, a real cluster.
package nomadfake
