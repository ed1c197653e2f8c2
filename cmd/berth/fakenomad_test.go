package main

import (
	"net/http/httptest"
	"strings"

	"github.com/berth-dev/berth/drivers/nomad/gpumeta"
	"github.com/berth-dev/berth/drivers/nomad/nomadfake"
	"github.com/rogpeppe/go-internal/testscript"
)

// fakeNomad is the script command `fakenomad [preempt] [topology]
// [token=SECRET]`: it serves a fake Nomad 1.6 (nomadfake) with the node of
// the recordings (gpu-node-1, 4 GPUs) for the rest of the script and
// points NOMAD_ADDR at it; FAKE_HOSTPORT is its host:port. preempt turns
// native preemption on for batch and service jobs (recording 13);
// topology publishes the node's GPU topology as berth agent would; token
// makes it accept only that ACL token.
func fakeNomad(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! fakenomad")
	}
	var opts []nomadfake.Option
	preempt, topology := false, false
	for _, a := range args {
		switch {
		case a == "preempt":
			preempt = true
		case a == "topology":
			topology = true
		case strings.HasPrefix(a, "token="):
			opts = append(opts, nomadfake.WithToken(strings.TrimPrefix(a, "token=")))
		default:
			ts.Fatalf("fakenomad: unknown option %q", a)
		}
	}
	fake := nomadfake.New(opts...)
	gpus := []nomadfake.GPU{
		{ID: "GPU-fake-0", PCIBusID: "00000000:18:00.0", Healthy: true},
		{ID: "GPU-fake-1", PCIBusID: "00000000:2a:00.0", Healthy: true},
		{ID: "GPU-fake-2", PCIBusID: "00000000:ba:00.0", Healthy: true},
		{ID: "GPU-fake-3", PCIBusID: "00000000:db:00.0", Healthy: true},
	}
	node := nomadfake.Node{ID: "1317ad6e-a51d-6fef-4356-9a7348e09a61", Name: "gpu-node-1", GPUs: gpus}
	if topology {
		var topo []gpumeta.GPU
		for i, g := range gpus {
			topo = append(topo, gpumeta.GPU{Index: i, UUID: g.ID, PCIBusID: g.PCIBusID, Domain: i / 2, NUMA: i / 2, Model: "H100-fake", MemoryMiB: 81559})
		}
		node.Meta = gpumeta.Encode(topo)
	}
	fake.AddNode(node)
	if preempt {
		fake.SetPreemption(true, true)
	}
	srv := httptest.NewServer(fake)
	ts.Defer(srv.Close)
	ts.Setenv("NOMAD_ADDR", srv.URL)
	ts.Setenv("FAKE_HOSTPORT", strings.TrimPrefix(srv.URL, "http://"))
}
