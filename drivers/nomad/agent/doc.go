// Package agent is `berth agent`: it runs on each GPU node, reads the
// GPUs with NVML (UUID, model, memory, PCI bus ID, NUMA node, and which
// GPUs share NVLink, hence an NVLink domain; for a MIG-enabled GPU, its
// MIG instances' UUIDs, so the driver knows each instance's parent) and
// publishes them as Nomad dynamic node metadata under berth.gpu. (format:
// drivers/nomad/gpumeta), refreshed on an interval and whenever it
// changes. A GPU whose MIG calls answer ERROR_NOT_SUPPORTED is a GPU
// without MIG instances, not an error.
//
// NVML needs cgo; built with CGO_ENABLED=0 the agent compiles against a
// stub that says so. After a failed nvml.Init it calls no other NVML
// function (doing so kills the process), not even ErrorString. It writes
// only keys under berth.gpu. and never touches jobs or allocations.
package agent
