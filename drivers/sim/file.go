package sim

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/internal/readfile"
	"github.com/berth-dev/berth/schema"
	"sigs.k8s.io/yaml"
)

// KindCluster is the kind of a simulated cluster file. The spec loader
// skips documents of this kind; this package reads them.
const KindCluster = "Cluster"

// Spec is a simulated cluster as written in a cluster file:
//
//	apiVersion: berth.dev/v1
//	kind: Cluster
//	metadata: {name: walkthrough}
//	spec:
//	  startDelay: 5s          # optional: from start to running
//	  checkpointTime: 10s     # optional: how long a checkpoint on signal takes
//	  nodes:
//	  - name: gpu-node        # with count > 1 the nodes are gpu-node-1..N
//	    count: 1
//	    datacenter: dc1       # optional: placement matches these (Nomad's
//	    pool: default         #   defaults dc1 and default when left out)
//	    class: a100
//	    meta: {region: eu}
//	    preset: dgx-h100      # optional: 8 GPUs, 2 NVLink domains of 4, 2 NUMA nodes
//	    cpu: 32
//	    memory: 256Gi
//	    gpus:                 # explicit GPUs when no preset
//	    - {model: H100, memory: 80Gi, domain: 0, numa: 0}
type Spec struct {
	Name string
	// StartDelay is how long a started workspace stays Starting.
	StartDelay time.Duration
	// CheckpointTime is how long a workspace needs to write a checkpoint
	// after its signal; a grace period shorter than this loses the work
	// since the last periodic checkpoint.
	CheckpointTime time.Duration
	Nodes          []drivers.Node
}

// Default timings of a simulated workspace.
const (
	DefaultStartDelay     = 5 * time.Second
	DefaultCheckpointTime = 10 * time.Second
)

type fileDoc struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		StartDelay     string     `json:"startDelay"`
		CheckpointTime string     `json:"checkpointTime"`
		Nodes          []nodeSpec `json:"nodes"`
	} `json:"spec"`
}

type nodeSpec struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
	Pool  string `json:"pool"`
	// Datacenter, Class and Meta are what placements match.
	Datacenter string            `json:"datacenter"`
	Class      string            `json:"class"`
	Meta       map[string]string `json:"meta"`
	Preset     string            `json:"preset"`
	CPU        quantity          `json:"cpu"`
	Memory     quantity          `json:"memory"`
	GPUs       []gpuSpec         `json:"gpus"`
}

type gpuSpec struct {
	Model  string   `json:"model"`
	Memory quantity `json:"memory"`
	Domain int      `json:"domain"`
	NUMA   int      `json:"numa"`
	// Count repeats this GPU (default 1).
	Count int `json:"count"`
}

// quantity is a YAML scalar that may be written as a number or a string
// ("32", "500m", "256Gi").
type quantity string

func (q *quantity) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*q = quantity(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("want a number or a quantity string, got %s", b)
	}
	*q = quantity(n.String())
	return nil
}

// Presets returns the names of the node presets, sorted.
func Presets() []string { return schema.ClusterPresetNames() }

// ReadFile reads a cluster file: a regular file of at most
// readfile.DefaultLimit, as a spec file (a FIFO or /dev/zero named
// as one is refused at once). Errors name the file and the field.
func ReadFile(path string) (*Spec, error) {
	b, err := readfile.Read(path, readfile.DefaultLimit)
	if err != nil {
		return nil, fmt.Errorf("sim: read cluster file: %w", err)
	}
	spec, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return spec, nil
}

// Parse reads a cluster file's content: one document of kind Cluster.
func Parse(b []byte) (*Spec, error) {
	var doc fileDoc
	if err := yaml.UnmarshalStrict(b, &doc); err != nil {
		return nil, fmt.Errorf("not a cluster file: %w", err)
	}
	if doc.APIVersion != schema.APIVersion {
		return nil, fmt.Errorf("apiVersion %q: want %q", doc.APIVersion, schema.APIVersion)
	}
	if doc.Kind != KindCluster {
		return nil, fmt.Errorf("kind %q: want %q", doc.Kind, KindCluster)
	}
	spec := &Spec{Name: doc.Metadata.Name, StartDelay: DefaultStartDelay, CheckpointTime: DefaultCheckpointTime}
	if spec.Name == "" {
		spec.Name = "sim"
	}
	var err error
	if doc.Spec.StartDelay != "" {
		if spec.StartDelay, err = time.ParseDuration(doc.Spec.StartDelay); err != nil || spec.StartDelay < 0 {
			return nil, fmt.Errorf("spec.startDelay %q: want a duration such as 5s", doc.Spec.StartDelay)
		}
	}
	if doc.Spec.CheckpointTime != "" {
		if spec.CheckpointTime, err = time.ParseDuration(doc.Spec.CheckpointTime); err != nil || spec.CheckpointTime < 0 {
			return nil, fmt.Errorf("spec.checkpointTime %q: want a duration such as 10s", doc.Spec.CheckpointTime)
		}
	}
	if len(doc.Spec.Nodes) == 0 {
		return nil, fmt.Errorf("spec.nodes: a cluster needs at least one node")
	}
	seen := map[string]bool{}
	for i, ns := range doc.Spec.Nodes {
		nodes, err := expandNode(ns)
		if err != nil {
			return nil, fmt.Errorf("spec.nodes[%d]: %w", i, err)
		}
		for _, n := range nodes {
			if seen[n.Name] {
				return nil, fmt.Errorf("spec.nodes[%d]: node name %q is used twice", i, n.Name)
			}
			seen[n.Name] = true
			spec.Nodes = append(spec.Nodes, n)
		}
	}
	sort.Slice(spec.Nodes, func(i, j int) bool { return spec.Nodes[i].Name < spec.Nodes[j].Name })
	return spec, nil
}

func expandNode(ns nodeSpec) ([]drivers.Node, error) {
	if ns.Name == "" {
		return nil, fmt.Errorf("name is required")
	}
	count := ns.Count
	if count == 0 {
		count = 1
	}
	if count < 0 {
		return nil, fmt.Errorf("count %d: want 1 or more", count)
	}
	cpu, memory, gpus := string(ns.CPU), string(ns.Memory), ns.GPUs
	if ns.Preset != "" {
		p, ok := schema.LookupClusterPreset(ns.Preset)
		if !ok {
			return nil, fmt.Errorf("preset %q: known presets are %s", ns.Preset, strings.Join(Presets(), ", "))
		}
		if len(gpus) > 0 {
			return nil, fmt.Errorf("preset %q and gpus both given: use one", ns.Preset)
		}
		for _, g := range p.GPUs {
			gpus = append(gpus, gpuSpec{Model: g.Model, Memory: quantity(g.Memory), Domain: g.Domain, NUMA: g.NUMA, Count: g.Count})
		}
		if cpu == "" {
			cpu = p.CPU
		}
		if memory == "" {
			memory = p.Memory
		}
	}
	cpuMilli, err := parseCPU(cpu)
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	memBytes, err := parseBytes(memory)
	if err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	var out []drivers.Node
	for k := 1; k <= count; k++ {
		name := ns.Name
		if count > 1 {
			name = fmt.Sprintf("%s-%d", ns.Name, k)
		}
		n := drivers.Node{Name: name, ID: name, Pool: ns.Pool, Datacenter: ns.Datacenter, Class: ns.Class, Meta: ns.Meta,
			Ready: true, Eligible: true, CPUMHz: cpuMilli, MemoryBytes: memBytes}
		// A simulated core is 1000 MHz of shares: cpu: 32 offers 32
		// exclusive cores, or 32000 MHz of shares.
		if cpuMilli >= 1000 {
			n.Cores, n.CPUPerCore = int(cpuMilli/1000), 1000
		}
		for gi, g := range gpus {
			c := g.Count
			if c == 0 {
				c = 1
			}
			if c < 0 || g.Model == "" || g.Domain < 0 || g.NUMA < 0 {
				return nil, fmt.Errorf("gpus[%d]: want a model, count >= 1, domain >= 0 and numa >= 0", gi)
			}
			mem, err := parseBytes(string(g.Memory))
			if err != nil {
				return nil, fmt.Errorf("gpus[%d].memory: %w", gi, err)
			}
			for range c {
				idx := len(n.GPUs)
				n.GPUs = append(n.GPUs, drivers.GPU{ID: gpuID(name, idx), Index: idx, Model: g.Model, MemoryBytes: mem, Domain: g.Domain, NUMA: g.NUMA, Healthy: true})
			}
		}
		out = append(out, n)
	}
	return out, nil
}

// gpuID is a stable UUID-shaped device ID for GPU idx of node.
func gpuID(node string, idx int) string {
	h := sha256.Sum256([]byte(node + "/" + strconv.Itoa(idx)))
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// parseCPU reads "4", "0.5" or "500m" into millicores; "" is 0.
func parseCPU(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	return schema.ParseCPU(s)
}

// parseBytes reads "80Gi", "512M" or "1024" into bytes; "" is 0.
func parseBytes(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	return schema.ParseBytes(s)
}
