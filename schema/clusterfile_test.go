package schema

import (
	"strings"
	"testing"
)

func TestParseCluster(t *testing.T) {
	const head = `{"apiVersion": "berth.dev/v1", "kind": "Cluster", "metadata": {"name": "c"}, "spec": {"nodes": [`
	tests := map[string]struct {
		nodes string
		err   string
		// cpu and mem of the first node, -1 where it does not say.
		cpu, mem int64
		n, gpus  int
	}{
		"preset":          {nodes: `{"name": "a", "preset": "dgx-h100"}`, cpu: 112000, mem: 2 << 40, n: 1, gpus: 8},
		"preset cpu kept": {nodes: `{"name": "a", "preset": "dgx-h100", "cpu": 8}`, cpu: 8000, mem: 2 << 40, n: 1, gpus: 8},
		"no cpu":          {nodes: `{"name": "a", "count": 3, "memory": "64Gi", "gpus": [{"model": "H100", "count": 2}]}`, cpu: -1, mem: 64 << 30, n: 3, gpus: 2},
		"written zero":    {nodes: `{"name": "a", "cpu": 0}`, cpu: 0, mem: -1, n: 1},
		"too many nodes":  {nodes: `{"name": "a", "count": 100001}`, err: "spec.nodes[0]: count 100001: want 1 to 100000"},
		"too many gpus":   {nodes: `{"name": "a", "gpus": [{"model": "H100", "count": 1025}]}`, err: "spec.nodes[0]: gpus[0]: want a model, count 1 to 1024"},
		"wrong type":      {nodes: `{"name": "a", "gpus": 8}`, err: "not a cluster file"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			f, err := ParseCluster([]byte(head + tt.nodes + "]}}"))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			n := f.Nodes[0]
			cpu, mem := n.CPUMHz, n.MemoryBytes
			if !n.HasCPU {
				cpu = -1
			}
			if !n.HasMemory {
				mem = -1
			}
			if f.Name != "c" || len(f.Nodes) != tt.n || len(n.GPUs) != tt.gpus || cpu != tt.cpu || mem != tt.mem {
				t.Errorf("got %q, %d nodes, %d GPUs, cpu %d, mem %d; want c, %d, %d, %d, %d", f.Name, len(f.Nodes), len(n.GPUs), cpu, mem, tt.n, tt.gpus, tt.cpu, tt.mem)
			}
		})
	}
}
