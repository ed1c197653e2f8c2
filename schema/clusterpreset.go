package schema

import "sort"

// ClusterGPU is Count identical GPUs of a cluster file's node (kind:
// Cluster): model, memory as a quantity, NVLink domain and NUMA node.
type ClusterGPU struct {
	Model  string
	Memory string
	Domain int
	NUMA   int
	Count  int
}

// ClusterPreset is a node shape a cluster file names with `preset:`.
type ClusterPreset struct {
	CPU    string
	Memory string
	GPUs   []ClusterGPU
}

var clusterPresets = map[string]ClusterPreset{
	"dgx-h100": {CPU: "112", Memory: "2Ti", GPUs: []ClusterGPU{
		{Model: "H100", Memory: "80Gi", Domain: 0, NUMA: 0, Count: 4},
		{Model: "H100", Memory: "80Gi", Domain: 1, NUMA: 1, Count: 4},
	}},
	"dgx-a100": {CPU: "128", Memory: "1Ti", GPUs: []ClusterGPU{
		{Model: "A100", Memory: "80Gi", Domain: 0, NUMA: 0, Count: 4},
		{Model: "A100", Memory: "80Gi", Domain: 1, NUMA: 1, Count: 4},
	}},
	"single-h100": {CPU: "32", Memory: "256Gi", GPUs: []ClusterGPU{
		{Model: "H100", Memory: "80Gi", Domain: 0, NUMA: 0, Count: 1},
	}},
}

// LookupClusterPreset returns the node preset called name. The returned
// value shares its GPUs slice with every caller: read it, never mutate it.
func LookupClusterPreset(name string) (ClusterPreset, bool) {
	p, ok := clusterPresets[name]
	return p, ok
}

// ClusterPresetNames returns the names of the node presets, sorted.
func ClusterPresetNames() []string {
	names := make([]string, 0, len(clusterPresets))
	for n := range clusterPresets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
