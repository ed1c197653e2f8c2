package main

import (
	"strings"
	"testing"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
	"github.com/google/go-cmp/cmp"
)

// berth doctor lists a node's device groups when it has more than one
// model, or MIG instances, and says who may run on the instances; a node
// of one model of whole GPUs reads as it always did.
func TestPrintNodesKinds(t *testing.T) {
	gpus := func(model string, n int) []drivers.GPU {
		var out []drivers.GPU
		for i := range n {
			out = append(out, drivers.GPU{ID: model + string(rune('a'+i)), Model: model, Healthy: true})
		}
		return out
	}
	const mig = "NVIDIA A100-SXM4-80GB MIG 1g.10gb"
	snap := drivers.Snapshot{Nodes: []drivers.Node{
		{Name: "a", Ready: true, Eligible: true, GPUs: gpus("H100", 8)},
		{Name: "b", Ready: true, Eligible: true, GPUs: append(append(gpus("H100", 2), gpus("NVIDIA L40S", 1)...), gpus(mig, 7)...)},
		{Name: "c", Ready: true, Eligible: true, GPUs: gpus(mig, 7)},
	}}
	var b strings.Builder
	if w := printNodes(&b, snap, &schema.Set{}); len(w) != 0 {
		t.Errorf("warnings %q, want none (topology not guessed)", w)
	}
	want := `node a: ready, 8 GPUs in 1 NVLink domain(s), topology from berth agent
node b: ready, 3 GPUs in 1 NVLink domain(s) and 7 MIG instances of 1 GPU, topology from berth agent
  H100: 2 GPUs
  NVIDIA L40S: 1 GPU
  NVIDIA A100-SXM4-80GB MIG 1g.10gb: 7 MIG instances, 1g.10gb slices of NVIDIA A100-SXM4-80GB (only a workspace whose gpuModel is "NVIDIA A100-SXM4-80GB MIG 1g.10gb" runs on them)
node c: ready, 7 MIG instances of 1 GPU, topology from berth agent
  NVIDIA A100-SXM4-80GB MIG 1g.10gb: 7 MIG instances, 1g.10gb slices of NVIDIA A100-SXM4-80GB (only a workspace whose gpuModel is "NVIDIA A100-SXM4-80GB MIG 1g.10gb" runs on them)
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("printNodes (-want +got):\n%s", diff)
	}
}

// TestPrintNodesDeclaredKinds: with the specs' GPU kinds, every device
// group is listed with its kind, MIG instances with how many GPUs they
// slice (their parents, as berth agent publishes them), and the kinds
// and groups that do not match are warnings.
func TestPrintNodesDeclaredKinds(t *testing.T) {
	gpus := func(model string, n, domain int) []drivers.GPU {
		var out []drivers.GPU
		for i := range n {
			out = append(out, drivers.GPU{ID: model + string(rune('a'+i)), Model: model, Domain: domain + i/4, Healthy: true})
		}
		return out
	}
	const mig = "NVIDIA A100-SXM4-80GB MIG 1g.10gb"
	snap := drivers.Snapshot{Nodes: []drivers.Node{
		{Name: "a", Ready: true, Eligible: true, GPUs: gpus("NVIDIA H100 80GB HBM3", 8, 0)},
		{Name: "b", Ready: true, Eligible: true, GPUs: append(gpus("NVIDIA L40S", 1, 0), gpus(mig, 7, 1)...)},
	}}
	set := &schema.Set{Kinds: []schema.GPUKind{
		{Meta: schema.Meta{Name: "h100", Source: schema.Pos{File: "kinds.yaml", Line: 1}}, Spec: schema.GPUKindSpec{Match: "NVIDIA H100*"}},
		{Meta: schema.Meta{Name: "slice", Source: schema.Pos{File: "kinds.yaml", Line: 6}}, Spec: schema.GPUKindSpec{Match: "* MIG 1g.10gb"}},
	}}
	var b strings.Builder
	warnings := printNodes(&b, snap, set)
	want := `node a: ready, 8 GPUs in 2 NVLink domain(s), topology from berth agent
  NVIDIA H100 80GB HBM3: 8 GPUs, kind h100
node b: ready, 1 GPU in 1 NVLink domain(s) and 7 MIG instances of 2 GPUs, topology from berth agent
  NVIDIA L40S: 1 GPU, no GPU kind matches it
  NVIDIA A100-SXM4-80GB MIG 1g.10gb: 7 MIG instances, 1g.10gb slices of NVIDIA A100-SXM4-80GB, kind slice (only a workspace whose gpuKind is slice, or gpuModel "NVIDIA A100-SXM4-80GB MIG 1g.10gb", runs on them)
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("printNodes (-want +got):\n%s", diff)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], `no GPU kind matches device group "NVIDIA L40S"`) {
		t.Errorf("warnings %q, want the L40S group's", warnings)
	}
}
