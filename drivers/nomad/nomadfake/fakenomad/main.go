// Command fakenomad serves the fake Nomad HTTP API of package nomadfake
// for demos and manual tests of `berth --cluster nomad` without a Nomad
// cluster. Time passes on its own: every --settle, starting allocations
// start and stopping ones finish. It is not Nomad; never point real work
// at it.
//
//	go run ./drivers/nomad/nomadfake/fakenomad --listen 127.0.0.1:4646 --nodes 2 --topology
//	NOMAD_ADDR=http://127.0.0.1:4646 berth doctor
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/berth-dev/berth/drivers/nomad/gpumeta"
	"github.com/berth-dev/berth/drivers/nomad/nomadfake"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:4646", "address to serve on")
	nodes := flag.Int("nodes", 1, "GPU nodes")
	gpus := flag.Int("gpus", 8, "GPUs per node (two NVLink domains and NUMA nodes when even)")
	topology := flag.Bool("topology", false, "publish the topology berth agent would")
	preempt := flag.Bool("preempt", false, "turn Nomad's native preemption on for batch and service jobs")
	settle := flag.Duration("settle", 2*time.Second, "how often allocations move on")
	cpu := flag.Int64("cpu", 0, "CPU shares (MHz) per node (default 4490, as recorded; a fleet of small workspaces wants more)")
	memory := flag.Int64("memory", 512<<10, "memory per node, MB")
	flag.Parse()

	fake := nomadfake.New()
	for n := 1; n <= *nodes; n++ {
		node := nomadfake.Node{ID: fmt.Sprintf("%08x-0000-4000-8000-%012x", n, n), Name: fmt.Sprintf("gpu-node-%d", n), MemoryMB: *memory, CPUShares: *cpu}
		var topo []gpumeta.GPU
		for i := 0; i < *gpus; i++ {
			id := fmt.Sprintf("GPU-%08x-%04x-4000-8000-000000000000", n, i)
			pci := fmt.Sprintf("00000000:%02x:00.0", 0x18+i*0x10)
			node.GPUs = append(node.GPUs, nomadfake.GPU{ID: id, PCIBusID: pci, Healthy: true})
			half := max(*gpus/2, 1)
			topo = append(topo, gpumeta.GPU{Index: i, UUID: id, PCIBusID: pci, Domain: i / half, NUMA: i / half, Model: "H100-fake", MemoryMiB: 81559})
		}
		if *topology {
			node.Meta = gpumeta.Encode(topo)
		}
		fake.AddNode(node)
	}
	if *preempt {
		fake.SetPreemption(true, true)
	}
	go func() {
		for range time.Tick(*settle) {
			fake.Settle()
		}
	}()
	log.Printf("fake Nomad (not Nomad) on http://%s: %d node(s) × %d GPUs", *listen, *nodes, *gpus)
	log.Fatal(http.ListenAndServe(*listen, fake))
}
