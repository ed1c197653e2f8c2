package sim

import (
	"cmp"
	"crypto/sha256"
	"fmt"
	"strconv"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/internal/readfile"
	"github.com/berth-dev/berth/schema"
	"sigs.k8s.io/yaml"
)

// Spec is a simulated cluster: a cluster file (schema.ClusterFile, whose
// doc shows the format) with the simulator's defaults filled in and its
// nodes as a driver observes them.
type Spec struct {
	Name string
	// StartDelay is how long a started workspace stays Starting.
	StartDelay time.Duration
	// CheckpointTime is how long a workspace needs to write a checkpoint
	// after its signal; a grace period shorter than this loses the work
	// since the last periodic checkpoint.
	CheckpointTime time.Duration
	Nodes          []drivers.Node
	// Kinds are the GPU kinds the file declares (spec.kinds), sorted by
	// name; nil where it declares none. The simulator itself ignores
	// them: each GPU reports its model (drivers.GPU.Model), and a replay
	// reads its kinds from that (replay.Kinds).
	Kinds []schema.GPUKind
}

// Default timings of a simulated workspace.
const (
	DefaultStartDelay     = 5 * time.Second
	DefaultCheckpointTime = 10 * time.Second
)

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

// Parse reads a cluster file's content: one document of kind Cluster,
// decoded strictly and checked by schema.ClusterDoc. The cluster is named "sim" when the
// file names none; its timings default to DefaultStartDelay and
// DefaultCheckpointTime.
func Parse(b []byte) (*Spec, error) {
	var doc schema.ClusterDoc
	if err := yaml.UnmarshalStrict(b, &doc); err != nil {
		return nil, fmt.Errorf("not a cluster file: %w", err)
	}
	f, err := doc.Cluster()
	if err != nil {
		return nil, err
	}
	spec := &Spec{Name: cmp.Or(f.Name, "sim"), StartDelay: DefaultStartDelay, CheckpointTime: DefaultCheckpointTime, Kinds: f.Kinds}
	if f.StartDelay != nil {
		spec.StartDelay = *f.StartDelay
	}
	if f.CheckpointTime != nil {
		spec.CheckpointTime = *f.CheckpointTime
	}
	for _, fn := range f.Nodes {
		n := drivers.Node{Name: fn.Name, ID: fn.Name, Pool: fn.Pool, Datacenter: fn.Datacenter, Class: fn.Class, Meta: fn.Meta,
			Ready: true, Eligible: true, CPUMHz: fn.CPUMHz, MemoryBytes: fn.MemoryBytes}
		// A simulated core is 1000 MHz of shares: cpu: 32 offers 32
		// exclusive cores, or 32000 MHz of shares.
		if fn.CPUMHz >= 1000 {
			n.Cores, n.CPUPerCore = int(fn.CPUMHz/1000), 1000
		}
		for idx, g := range fn.GPUs {
			n.GPUs = append(n.GPUs, drivers.GPU{ID: gpuID(fn.Name, idx), Index: idx, Model: g.Model, MemoryBytes: g.MemoryBytes, Domain: g.Domain, NUMA: g.NUMA, Healthy: true})
		}
		spec.Nodes = append(spec.Nodes, n)
	}
	return spec, nil
}

// gpuID is a stable UUID-shaped device ID for GPU idx of node.
func gpuID(node string, idx int) string {
	h := sha256.Sum256([]byte(node + "/" + strconv.Itoa(idx)))
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}
