package nomad_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/drivertest"
	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/drivers/nomad/gpumeta"
	"github.com/berth-dev/berth/drivers/nomad/nomadfake"
	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/berth-dev/berth/schema"
)

// fakeCluster starts a fake Nomad holding nodes (with the topology
// metadata `berth agent` would publish) and a driver over it.
func fakeCluster(t testing.TB, nodes []drivers.Node) (*nomadfake.Server, *nomad.Driver) {
	t.Helper()
	return fakeClusterWith(t, nodes, nil)
}

// fakeClusterWith is fakeCluster with the driver's configuration changed
// by config (nil: as fakeCluster).
func fakeClusterWith(t testing.TB, nodes []drivers.Node, config func(*nomad.Config)) (*nomadfake.Server, *nomad.Driver) {
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
		spec.Datacenter, spec.Class = node.Datacenter, node.Class
		for k, v := range node.Meta {
			if spec.Meta == nil {
				spec.Meta = map[string]string{}
			}
			spec.Meta[k] = v
		}
		fake.AddNode(spec)
	}
	ts := fake.Start(t)
	cfg := nomad.Config{Address: ts.URL, PlacementTimeout: 2 * time.Second}
	if config != nil {
		config(&cfg)
	}
	d := realnomad.NewDriver(t, cfg)
	return fake, d
}

func TestConformanceFake(t *testing.T) {
	drivertest.Run(t, func(t *testing.T, nodes []drivers.Node) drivertest.Harness {
		fake, d := fakeCluster(t, nodes)
		return drivertest.Harness{
			Cluster: d,
			Settle:  func(context.Context) error { fake.Settle(); return nil },
			Exact:   true,
			Exit: func(_ context.Context, ref schema.Ref, code int) error {
				fake.Exit(ref.Project, ref.Name, code)
				return nil
			},
			Unplaceable: schema.WorkResources{MemoryBytes: 1 << 40},
			SetUse: func(ctx context.Context, ref schema.Ref, percent []float64) error {
				snap, err := d.Observe(ctx) // names the nodes to read
				if err != nil {
					return err
				}
				ids := map[string]string{}
				for _, n := range snap.Nodes {
					ids[n.Name] = n.ID
				}
				k := 0
				for _, a := range snap.Allocs {
					for _, g := range a.GPUs {
						if a.Workspace == ref && k < len(percent) {
							fake.SetGPUUse(ids[a.Node], g, percent[k])
							k++
						}
					}
				}
				d.SampleNow(ctx)
				return nil
			},
		}
	})
}

// TestRealConformance runs the same suite against the Nomad at
// NOMAD_ADDR (with NOMAD_TOKEN and the TLS variables). It starts and
// stops jobs in the namespace berth-conformance.
func TestRealConformance(t *testing.T) {
	drivertest.Run(t, func(t *testing.T, _ []drivers.Node) drivertest.Harness {
		realnomad.Client(t) // skips without NOMAD_ADDR; cleans the agent before and after
		d := realnomad.NewDriver(t, nomad.ConfigFromEnv(""))
		dir := t.TempDir()
		// The task waits for its exit code in a file named after its job.
		task := schema.Task{Driver: "raw_exec", Command: "/bin/sh", Args: []string{"-c",
			`f=` + dir + `/$NOMAD_JOB_NAME; while [ ! -f "$f" ]; do sleep 0.2; done; exit $(cat "$f")`}}
		return drivertest.Harness{Cluster: d, Settle: settleReal(d), Task: &task,
			Exit: func(ctx context.Context, ref schema.Ref, code int) error {
				if err := os.WriteFile(filepath.Join(dir, ref.Name), []byte(strconv.Itoa(code)), 0o644); err != nil {
					return err
				}
				defer os.Remove(filepath.Join(dir, ref.Name))
				return realnomad.WaitFor(ctx, d, 30*time.Second, func(s drivers.Snapshot) bool {
					for _, e := range s.Exits {
						if e.Workspace == ref {
							return true
						}
					}
					return false
				})
			},
			Unplaceable: schema.WorkResources{MemoryBytes: 1 << 50},
		}
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
				busy = busy || a.Phase != drivers.AllocRunning
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
