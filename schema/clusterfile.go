package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// KindCluster is the kind of a cluster file: a simulated cluster, which
// drivers/sim builds and the spec loader checks workspaces and quotas
// against. Both read it with ParseCluster.
const KindCluster = "Cluster"

// Limits of a cluster file, so that a short file cannot ask for a huge
// cluster.
const (
	maxClusterNodeCount = 100000 // a node entry's count
	maxClusterGPUCount  = 1024   // a GPU entry's count
)

// ClusterFile is a cluster file as it was written, checked and expanded:
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
//	    datacenter: dc1       # optional: placement matches these
//	    pool: default
//	    class: a100
//	    meta: {region: eu}
//	    preset: dgx-h100      # optional: 8 GPUs, 2 NVLink domains of 4, 2 NUMA nodes
//	    cpu: 32
//	    memory: 256Gi
//	    gpus:                 # explicit GPUs when no preset
//	    - {model: H100, memory: 80Gi, domain: 0, numa: 0}
//	  kinds:                  # optional: the GPU kinds a replay's trace names
//	  - {name: h100, match: "NVIDIA H100*"}
//	  - {name: a100-1g, match: "* MIG 1g.10gb"}  # weight: as a GPUKind's (optional)
//
// A node may mix models, MIG instances among them, named as the NVIDIA
// device plugin names their device groups ("NVIDIA A100-SXM4-80GB MIG
// 1g.10gb"): each GPU entry is a device of its own model.
type ClusterFile struct {
	// Name is metadata.name; "" when the file gives none.
	Name string
	// StartDelay and CheckpointTime are the spec's timings; nil where
	// the file does not set them (the simulator then has defaults).
	StartDelay, CheckpointTime *time.Duration
	// Nodes are every node, each count expanded, sorted by name.
	Nodes []ClusterNode
	// Kinds are the GPU kinds the file declares (spec.kinds), sorted by
	// name, as GPUKind documents would declare them: each a name and a
	// match (GPUKind.Matches), never two that overlap. Nil when the file
	// declares none; berth simulate then makes every model a kind of its
	// own (replay.Kinds).
	Kinds []GPUKind
}

// ClusterNode is one node of a cluster file.
type ClusterNode struct {
	Name string
	// Datacenter, Pool, Class and Meta are what placements match; ""
	// and nil where the file does not say.
	Datacenter, Pool, Class string
	Meta                    map[string]string
	// CPUMHz (millicores) and MemoryBytes are what the node offers; 0
	// where neither the file nor its preset says, which HasCPU and
	// HasMemory tell apart from a written 0.
	CPUMHz, MemoryBytes int64
	HasCPU, HasMemory   bool
	// GPUs are the node's GPUs in index order.
	GPUs []ClusterNodeGPU
}

// ClusterNodeGPU is one GPU of a cluster file's node.
type ClusterNodeGPU struct {
	Model        string
	MemoryBytes  int64
	Domain, NUMA int
}

// ClusterDoc is a cluster file's document as written, for a decoder to
// fill: drivers/sim's YAML decoder, or ParseCluster's JSON one. Decode
// it strictly (unknown fields are errors), then call Cluster.
type ClusterDoc struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		StartDelay     string            `json:"startDelay"`
		CheckpointTime string            `json:"checkpointTime"`
		Nodes          []clusterNodeSpec `json:"nodes"`
		Kinds          []clusterKindSpec `json:"kinds"`
	} `json:"spec"`
}

// clusterKindSpec is one entry of a cluster file's kinds: a GPUKind's
// name and spec, written flat.
type clusterKindSpec struct {
	Name   string  `json:"name"`
	Match  string  `json:"match"`
	Weight float64 `json:"weight"`
}

type clusterNodeSpec struct {
	Name       string            `json:"name"`
	Count      int               `json:"count"`
	Pool       string            `json:"pool"`
	Datacenter string            `json:"datacenter"`
	Class      string            `json:"class"`
	Meta       map[string]string `json:"meta"`
	Preset     string            `json:"preset"`
	CPU        clusterQuantity   `json:"cpu"`
	Memory     clusterQuantity   `json:"memory"`
	GPUs       []clusterGPUSpec  `json:"gpus"`
}

type clusterGPUSpec struct {
	Model  string          `json:"model"`
	Memory clusterQuantity `json:"memory"`
	Domain int             `json:"domain"`
	NUMA   int             `json:"numa"`
	// Count repeats this GPU (default 1).
	Count int `json:"count"`
}

// clusterQuantity is a quantity a cluster file may write as a number or
// a string ("32", "500m", "256Gi").
type clusterQuantity string

func (q *clusterQuantity) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*q = clusterQuantity(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("want a number or a quantity string, got %s", b)
	}
	*q = clusterQuantity(n.String())
	return nil
}

// ParseCluster reads one cluster file document given as JSON, strictly,
// and checks it as Cluster does.
func ParseCluster(doc []byte) (*ClusterFile, error) {
	var d ClusterDoc
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("not a cluster file: %w", err)
	}
	return d.Cluster()
}

// Cluster checks d and expands its nodes: a wrong apiVersion or kind,
// bad quantities or durations, a node name used twice and counts past
// the limits are errors, naming the field. d is not changed.
func (d *ClusterDoc) Cluster() (*ClusterFile, error) {
	if d.APIVersion != APIVersion {
		return nil, fmt.Errorf("apiVersion %q: want %q", d.APIVersion, APIVersion)
	}
	if d.Kind != KindCluster {
		return nil, fmt.Errorf("kind %q: want %q", d.Kind, KindCluster)
	}
	c := &ClusterFile{Name: d.Metadata.Name}
	if s := d.Spec.StartDelay; s != "" {
		v, err := time.ParseDuration(s)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("spec.startDelay %q: want a duration such as 5s", s)
		}
		c.StartDelay = &v
	}
	if s := d.Spec.CheckpointTime; s != "" {
		v, err := time.ParseDuration(s)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("spec.checkpointTime %q: want a duration such as 10s", s)
		}
		c.CheckpointTime = &v
	}
	if len(d.Spec.Nodes) == 0 {
		return nil, fmt.Errorf("spec.nodes: a cluster needs at least one node")
	}
	seen := map[string]bool{}
	for i, ns := range d.Spec.Nodes {
		nodes, err := expandClusterNode(ns)
		if err != nil {
			return nil, fmt.Errorf("spec.nodes[%d]: %w", i, err)
		}
		for _, n := range nodes {
			if seen[n.Name] {
				return nil, fmt.Errorf("spec.nodes[%d]: node name %q is used twice", i, n.Name)
			}
			seen[n.Name] = true
			c.Nodes = append(c.Nodes, n)
		}
	}
	sort.Slice(c.Nodes, func(i, j int) bool { return c.Nodes[i].Name < c.Nodes[j].Name })
	kinds, err := clusterKinds(d.Spec.Kinds)
	if err != nil {
		return nil, err
	}
	c.Kinds = kinds
	return c, nil
}

// clusterKinds checks a cluster file's kinds and returns them as
// GPUKinds, sorted by name: each needs a name (used once) and a match,
// a weight of 0 or more, and no two may overlap (GPUKind.Overlaps).
func clusterKinds(specs []clusterKindSpec) ([]GPUKind, error) {
	var out []GPUKind
	byName := map[string]int{}
	for i, ks := range specs {
		switch {
		case strings.TrimSpace(ks.Name) == "" || strings.TrimSpace(ks.Name) != ks.Name:
			return nil, fmt.Errorf("spec.kinds[%d]: name %q: want the kind's name, without spaces around it", i, ks.Name)
		case ks.Match == "":
			return nil, fmt.Errorf("spec.kinds[%d] (%s): match is required: the model its GPUs are of, or a pattern of it with *", i, ks.Name)
		case ks.Weight < 0:
			return nil, fmt.Errorf("spec.kinds[%d] (%s): weight %g: want 0 (the default) or more", i, ks.Name, ks.Weight)
		}
		if j, dup := byName[ks.Name]; dup {
			return nil, fmt.Errorf("spec.kinds[%d]: kind %q is declared twice (spec.kinds[%d])", i, ks.Name, j)
		}
		byName[ks.Name] = i
		k := GPUKind{Meta: Meta{Name: ks.Name}, Spec: GPUKindSpec{Match: ks.Match, Weight: ks.Weight}}
		for j := range out {
			if k.Overlaps(&out[j]) {
				return nil, fmt.Errorf("spec.kinds[%d] (%s): match %q overlaps kind %q's %q: a GPU would be of both kinds", i, ks.Name, ks.Match, out[j].Meta.Name, out[j].Spec.Match)
			}
		}
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Meta.Name < out[j].Meta.Name })
	return out, nil
}

func expandClusterNode(ns clusterNodeSpec) ([]ClusterNode, error) {
	if ns.Name == "" {
		return nil, fmt.Errorf("name is required")
	}
	count := ns.Count
	if count == 0 {
		count = 1
	}
	if count < 0 || count > maxClusterNodeCount {
		return nil, fmt.Errorf("count %d: want 1 to %d", count, maxClusterNodeCount)
	}
	cpu, memory, gpus := string(ns.CPU), string(ns.Memory), ns.GPUs
	if ns.Preset != "" {
		p, ok := LookupClusterPreset(ns.Preset)
		if !ok {
			return nil, fmt.Errorf("preset %q: known presets are %s", ns.Preset, strings.Join(ClusterPresetNames(), ", "))
		}
		if len(gpus) > 0 {
			return nil, fmt.Errorf("preset %q and gpus both given: use one", ns.Preset)
		}
		for _, g := range p.GPUs {
			gpus = append(gpus, clusterGPUSpec{Model: g.Model, Memory: clusterQuantity(g.Memory), Domain: g.Domain, NUMA: g.NUMA, Count: g.Count})
		}
		cpu, memory = cmpOr(cpu, p.CPU), cmpOr(memory, p.Memory)
	}
	n := ClusterNode{Datacenter: ns.Datacenter, Pool: ns.Pool, Class: ns.Class, Meta: ns.Meta, HasCPU: cpu != "", HasMemory: memory != ""}
	var err error
	if n.CPUMHz, err = clusterCPU(cpu); err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	if n.MemoryBytes, err = clusterBytes(memory); err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	for gi, g := range gpus {
		c := g.Count
		if c == 0 {
			c = 1
		}
		if c < 0 || c > maxClusterGPUCount || g.Model == "" || g.Domain < 0 || g.NUMA < 0 {
			return nil, fmt.Errorf("gpus[%d]: want a model, count 1 to %d, domain >= 0 and numa >= 0", gi, maxClusterGPUCount)
		}
		mem, err := clusterBytes(string(g.Memory))
		if err != nil {
			return nil, fmt.Errorf("gpus[%d].memory: %w", gi, err)
		}
		for range c {
			n.GPUs = append(n.GPUs, ClusterNodeGPU{Model: g.Model, MemoryBytes: mem, Domain: g.Domain, NUMA: g.NUMA})
		}
	}
	out := make([]ClusterNode, 0, count)
	for k := 1; k <= count; k++ {
		m := n
		m.Name = ns.Name
		if count > 1 {
			m.Name = fmt.Sprintf("%s-%d", ns.Name, k)
		}
		out = append(out, m)
	}
	return out, nil
}

// clusterCPU reads "4", "0.5" or "500m" into millicores; "" is 0.
func clusterCPU(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	return ParseCPU(s)
}

// clusterBytes reads "80Gi", "512M" or "1024" into bytes; "" is 0.
func clusterBytes(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	return ParseBytes(s)
}
