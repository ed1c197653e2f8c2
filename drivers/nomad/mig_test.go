package nomad_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/drivers/nomad/gpumeta"
	"github.com/berth-dev/berth/drivers/nomad/nomadfake"
	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/google/go-cmp/cmp"
)

const (
	a100    = "NVIDIA A100-SXM4-80GB"
	a100MIG = a100 + " MIG 1g.10gb"
)

func migID(parent, k int) string {
	return fmt.Sprintf("MIG-%04d%04d-0000-5000-8000-000000000000", parent, k)
}

// migTopology is what berth agent publishes for a node of 4 A100s: GPUs
// 0 and 1 whole, NVLinked, on NUMA node 0; GPUs 2 and 3 MIG-enabled with
// 7 1g.10gb instances each, on NUMA node 1, each an NVLink domain of its
// own.
func migTopology() []gpumeta.GPU {
	var out []gpumeta.GPU
	for i, bus := range []string{"18", "2A", "BA", "DB"} {
		g := gpumeta.GPU{Index: i, UUID: fmt.Sprintf("GPU-%d", i), Model: a100, MemoryMiB: 81920,
			PCIBusID: "00000000:" + bus + ":00.0", NUMA: i / 2, Domain: []int{0, 0, 1, 2}[i]}
		if i >= 2 {
			for k := range 7 {
				g.MIG = append(g.MIG, migID(i, k))
			}
		}
		out = append(out, g)
	}
	return out
}

// migNode is the node as Nomad shows it with the NVIDIA device plugin:
// the 2 whole GPUs in the A100 group, the MIG-enabled GPUs hidden, their
// 14 instances in the 1g.10gb group, listed in an order of Nomad's. The
// plugin reports an instance's PCI bus as its parent's; parentPCI false
// gives them none (as the nomad-dev kit's fake plugin does).
func migNode(meta map[string]string, parentPCI bool) nomadfake.Node {
	topo := migTopology()
	n := nomadfake.Node{ID: "node-mig", Name: "mig-1", GPUModel: a100, GPUMemoryMiB: 81920, Meta: meta}
	for _, g := range topo[:2] {
		n.GPUs = append(n.GPUs, nomadfake.GPU{ID: g.UUID, PCIBusID: strings.ToLower(g.PCIBusID), Healthy: true})
	}
	for k := 6; k >= 0; k-- {
		for _, p := range []int{3, 2} {
			g := nomadfake.GPU{ID: migID(p, k), Healthy: true, Model: a100MIG, MemoryMiB: 9728}
			if parentPCI {
				g.PCIBusID = strings.ToLower(topo[p].PCIBusID)
			}
			n.GPUs = append(n.GPUs, g)
		}
	}
	return n
}

func observeNode(t *testing.T, n nomadfake.Node) drivers.Node {
	t.Helper()
	fake := nomadfake.New()
	fake.AddNode(n)
	d := realnomad.NewDriver(t, nomad.Config{Address: fake.Start(t).URL})
	snap, err := d.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return snap.Nodes[0]
}

// TestObserveMIGParents: each MIG instance, matched by its ID in its
// parent's list (berth.gpu.g<index>.mig), gets its parent's NUMA node and
// a Domain of its parent's own (after the NVLink domains 0-2: 3 plus the
// parent's index), and an index after the GPUs', by parent then MIG
// order; the whole GPUs read as without MIG.
func TestObserveMIGParents(t *testing.T) {
	for name, parentPCI := range map[string]bool{"instances on the parent's PCI bus": true, "instances without a PCI bus": false} {
		t.Run(name, func(t *testing.T) {
			n := observeNode(t, migNode(gpumeta.Encode(migTopology()), parentPCI))
			if n.TopologyGuessed {
				t.Fatal("topology guessed")
			}
			want := []drivers.GPU{
				{ID: "GPU-0", Index: 0, Model: a100, MemoryBytes: 81920 << 20, Domain: 0, NUMA: 0, Healthy: true},
				{ID: "GPU-1", Index: 1, Model: a100, MemoryBytes: 81920 << 20, Domain: 0, NUMA: 0, Healthy: true},
			}
			for _, p := range []int{2, 3} {
				for k := range 7 {
					want = append(want, drivers.GPU{ID: migID(p, k), Index: 4 + (p-2)*7 + k, Model: a100MIG, MemoryBytes: 9728 << 20, Domain: 3 + p, NUMA: 1, Healthy: true})
				}
			}
			if d := cmp.Diff(want, n.GPUs); d != "" {
				t.Errorf("GPUs (-want +got)\n%s", d)
			}
		})
	}
}

// TestObserveMIGWithoutParents: metadata from an agent before MIG
// parents (no berth.gpu.g<index>.mig), or a list that misses an instance
// Nomad shows, leaves the node's topology guessed, as before: one
// domain, PCI order.
func TestObserveMIGWithoutParents(t *testing.T) {
	plain := migTopology()
	for i := range plain {
		plain[i].MIG = nil
	}
	stale := migTopology()
	stale[3].MIG = stale[3].MIG[:6]
	for name, topo := range map[string][]gpumeta.GPU{"old metadata": plain, "a stale list": stale} {
		t.Run(name, func(t *testing.T) {
			n := observeNode(t, migNode(gpumeta.Encode(topo), true))
			if !n.TopologyGuessed || len(n.GPUs) != 16 {
				t.Fatalf("guessed=%v, %d GPUs; want guessed, 16", n.TopologyGuessed, len(n.GPUs))
			}
			for _, g := range n.GPUs {
				if g.Domain != 0 || g.NUMA != 0 {
					t.Errorf("%s: domain %d, NUMA %d; want 0, 0", g.ID, g.Domain, g.NUMA)
				}
			}
		})
	}
}
