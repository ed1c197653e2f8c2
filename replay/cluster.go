package replay

import (
	"github.com/berth-dev/berth/drivers/sim"
)

// DefaultClusterFile is the cluster `berth simulate` replays on unless
// told otherwise: 64 nodes of 8 H100s in 2 NVLink domains of 4 (512
// GPUs), where the Philly trace offers roughly 73–83% load.
const DefaultClusterFile = `apiVersion: berth.dev/v1
kind: Cluster
metadata: {name: philly-512}
spec:
  startDelay: 5s
  checkpointTime: 10s
  nodes:
  - name: gpu
    count: 64
    preset: dgx-h100
`

// DefaultCluster returns the parsed DefaultClusterFile.
func DefaultCluster() sim.Spec {
	spec, err := sim.Parse([]byte(DefaultClusterFile))
	if err != nil {
		panic("replay: default cluster: " + err.Error())
	}
	return *spec
}

// Shape returns a cluster's usable GPUs and the most on one node.
func Shape(spec sim.Spec) (gpus, perNode int) {
	for _, n := range spec.Nodes {
		k := 0
		for _, g := range n.GPUs {
			if g.Healthy {
				k++
			}
		}
		gpus += k
		perNode = max(perNode, k)
	}
	return gpus, perNode
}
