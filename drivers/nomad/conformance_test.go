package nomad_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers/drivertest"
	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/drivers/nomad/gpumeta"
	"github.com/berth-dev/berth/drivers/nomad/nomadfake"
	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/berth-dev/berth/reconcile/state"
)

// fakeCluster starts a fake Nomad holding nodes (with the topology
// metadata `berth agent` would publish) and a driver over it.
func fakeCluster(t testing.TB, nodes []state.Node) (*nomadfake.Server, *nomad.Driver) {
	t.Helper()
	fake := nomadfake.New()
	for n, node := range nodes {
		// Every node offers the datasets host volume the driver tests mount.
		spec := nomadfake.Node{ID: fmt.Sprintf("%08x-aaaa-4bbb-8ccc-%012x", n+1, n+1), Name: node.Name, Pool: node.Pool,
			HostVolumes: append([]string{"datasets"}, node.HostVolumes...)}
		var topo []gpumeta.GPU
		for _, g := range node.GPUs {
			pci := fmt.Sprintf("00000000:%02x:00.0", 0x18+g.Index*0x10)
			spec.GPUs = append(spec.GPUs, nomadfake.GPU{ID: g.ID, PCIBusID: pci, Healthy: g.Healthy})
			topo = append(topo, gpumeta.GPU{Index: g.Index, UUID: g.ID, PCIBusID: pci, NUMA: g.NUMA, Domain: g.Domain, Model: "H100-fake", MemoryMiB: 81559})
		}
		if len(topo) > 0 {
			spec.Meta = gpumeta.Encode(topo)
		}
		fake.AddNode(spec)
	}
	ts := fake.Start(t)
	d, err := nomad.New(nomad.Config{Address: ts.URL, PollInterval: time.Millisecond, PlacementTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return fake, d
}

func TestConformanceFake(t *testing.T) {
	drivertest.Run(t, func(t *testing.T, nodes []state.Node) drivertest.Harness {
		fake, d := fakeCluster(t, nodes)
		return drivertest.Harness{
			Cluster: d,
			Settle:  func(context.Context) error { fake.Settle(); return nil },
			Exact:   true,
		}
	})
}

// TestRealConformance runs the same suite against the Nomad at
// NOMAD_ADDR (with NOMAD_TOKEN and the TLS variables). It starts and
// stops jobs in the namespace berth-conformance.
func TestRealConformance(t *testing.T) {
	drivertest.Run(t, func(t *testing.T, _ []state.Node) drivertest.Harness {
		realnomad.Client(t) // skips without NOMAD_ADDR; cleans the agent before and after
		d, err := nomad.New(nomad.ConfigFromEnv(""))
		if err != nil {
			t.Fatal(err)
		}
		return drivertest.Harness{Cluster: d, Settle: settleReal(d)}
	})
}

// settleReal polls until no allocation is starting or stopping.
func settleReal(d *nomad.Driver) func(context.Context) error {
	return func(ctx context.Context) error {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			snap, err := d.Observe(ctx)
			if err != nil {
				return err
			}
			busy := false
			for _, a := range snap.Allocs {
				busy = busy || a.Phase != state.AllocRunning
			}
			if !busy {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("allocations still starting or stopping after 2 minutes")
			}
			time.Sleep(time.Second)
		}
	}
}
