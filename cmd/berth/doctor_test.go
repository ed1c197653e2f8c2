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
node b: ready, 3 GPUs and 7 MIG instances in 1 NVLink domain(s), topology from berth agent
  H100: 2 GPUs
  NVIDIA L40S: 1 GPU
  NVIDIA A100-SXM4-80GB MIG 1g.10gb: 7 MIG instances, 1g.10gb slices of NVIDIA A100-SXM4-80GB (only a workspace whose gpuModel is "NVIDIA A100-SXM4-80GB MIG 1g.10gb" runs on them)
node c: ready, 7 MIG instances in 1 NVLink domain(s), topology from berth agent
  NVIDIA A100-SXM4-80GB MIG 1g.10gb: 7 MIG instances, 1g.10gb slices of NVIDIA A100-SXM4-80GB (only a workspace whose gpuModel is "NVIDIA A100-SXM4-80GB MIG 1g.10gb" runs on them)
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("printNodes (-want +got):\n%s", diff)
	}
}
