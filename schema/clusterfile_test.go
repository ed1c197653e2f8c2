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

// A cluster file's kinds: GPUKinds, sorted by name; a node may mix
// models, MIG instances named as the NVIDIA plugin names them among them.
func TestParseClusterKinds(t *testing.T) {
	const mixed = `{"apiVersion": "berth.dev/v1", "kind": "Cluster", "spec": {"nodes": [{"name": "a", "gpus": [
		{"model": "NVIDIA H100 80GB HBM3", "count": 2},
		{"model": "NVIDIA A100-SXM4-80GB", "domain": 1},
		{"model": "NVIDIA A100-SXM4-80GB MIG 1g.10gb", "domain": 1, "count": 7}]}], "kinds": [`
	f, err := ParseCluster([]byte(mixed + `{"name": "mig", "match": "* MIG 1g.10gb", "weight": 0.125}, {"name": "h100", "match": "NVIDIA H100*"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	var models []string
	for _, g := range f.Nodes[0].GPUs {
		models = append(models, g.Model)
	}
	if len(models) != 10 || models[0] != "NVIDIA H100 80GB HBM3" || models[2] != "NVIDIA A100-SXM4-80GB" || models[9] != "NVIDIA A100-SXM4-80GB MIG 1g.10gb" {
		t.Errorf("models %q: want 2 H100s, an A100 and 7 of its 1g.10gb instances, in the file's order", models)
	}
	if len(f.Kinds) != 2 || f.Kinds[0].Meta.Name != "h100" || f.Kinds[1].Meta.Name != "mig" || f.Kinds[1].Spec.Weight != 0.125 {
		t.Fatalf("kinds %+v: want h100, then mig (weight 0.125)", f.Kinds)
	}
	if !f.Kinds[0].Matches(models[0]) || f.Kinds[0].Matches(models[2]) || !f.Kinds[1].Matches(models[9]) || f.Kinds[1].Matches(models[2]) {
		t.Errorf("kinds match the wrong models")
	}
	for kinds, want := range map[string]string{
		`{"name": "h100", "match": "NVIDIA H100*"}, {"name": "h", "match": "nvidia h100 80GB*"}`: `spec.kinds[1] (h): match "nvidia h100 80GB*" overlaps kind "h100"'s "NVIDIA H100*"`,
		`{"name": "h100", "match": "NVIDIA H100*"}, {"name": "h100", "match": "x"}`:              `spec.kinds[1]: kind "h100" is declared twice (spec.kinds[0])`,
		`{"name": "h100"}`: `spec.kinds[0] (h100): match is required`,
		`{"match": "x"}`:   `spec.kinds[0]: name "": want the kind's name`,
		`{"name": "x", "match": "x", "weight": -1}`:        `spec.kinds[0] (x): weight -1: want 0 (the default) or more`,
		`{"name": "x", "match": "x", "description": "no"}`: `unknown field "description"`,
	} {
		if _, err := ParseCluster([]byte(mixed + kinds + `]}}`)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("kinds %s: error %v, want %q", kinds, err, want)
		}
	}
	// A whole-GPU kind and a MIG kind whose patterns would overlap do not:
	// the one matches whole GPUs only, the other MIG instances only.
	if _, err := ParseCluster([]byte(mixed + `{"name": "a100", "match": "NVIDIA A100*"}, {"name": "mig", "match": "NVIDIA A100* MIG *"}]}}`)); err != nil {
		t.Errorf("a whole-GPU kind beside a MIG kind of the same model: %v", err)
	}
}
