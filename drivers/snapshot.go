package drivers

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/berth-dev/berth/schema"
)

// Snapshot is one complete, consistent observation of a cluster. Drivers
// build it; nobody mutates it after Observe returns. Nodes are sorted by
// Name, Allocs by (Workspace, Replica).
type Snapshot struct {
	// ObservedAt is the cluster's clock when the snapshot was taken.
	ObservedAt time.Time `json:"observedAt"`
	Nodes      []Node    `json:"nodes"`
	Allocs     []Alloc   `json:"allocs"`
	// Exits are the ended runs of workspaces that berth did not stop: the
	// task exited (cleanly or not) and the driver will not run it again on
	// its own. Sorted by Workspace. A workspace berth stops, or starts
	// again, leaves this list.
	Exits []Exit `json:"exits,omitempty"`
}

// Exit is how a workspace's last run ended when it ended on its own.
type Exit struct {
	Workspace schema.Ref `json:"workspace"`
	// Failed: a task failed (non-zero exit, or it could not start) after
	// any restarts its restart behaviour allowed; false: every replica
	// exited 0.
	Failed bool `json:"failed"`
	// ExitCode is the failing task's exit code (0 when it completed, or
	// when the driver no longer knows: see Message).
	ExitCode int `json:"exitCode"`
	// Message is the cluster's own account ("Exit Code: 3", "Task hook
	// failed: …"), empty when the cluster no longer has it.
	Message string `json:"message,omitempty"`
	// At is when it ended (zero when unknown).
	At time.Time `json:"at,omitzero"`
	// SpecHash is the Fingerprint of the spec the run was started from: a
	// spec with another fingerprint runs again.
	SpecHash string `json:"specHash,omitempty"`
	// Restarts is how many times the driver restarted the task in place
	// before it gave up.
	Restarts int `json:"restarts,omitempty"`
	// Class is how it ended (EndCompleted, EndTaskFailed or
	// EndNodeFault; see EndClass for what each leads to).
	Class EndClass `json:"class,omitempty"`
	// Node is the node it ended on ("" when unknown).
	Node string `json:"node,omitempty"`
	// Stderr is the last lines its task wrote to stderr, when it failed
	// and the driver could read them; empty otherwise.
	Stderr string `json:"stderr,omitempty"`
}

// Node is one machine and its GPUs.
type Node struct {
	// Name is unique in the cluster and what berth reports.
	Name string `json:"name"`
	// ID is the driver's identifier (Nomad node ID); may equal Name.
	ID string `json:"id"`
	// Pool, Datacenter, Class and Meta are what a workspace's placement
	// matches (schema.Placement.Allows): the Nomad node pool, datacenter,
	// node class and node metadata. Empty Pool and Datacenter are Nomad's
	// defaults ("default", "dc1").
	Pool       string            `json:"pool,omitempty"`
	Datacenter string            `json:"datacenter,omitempty"`
	Class      string            `json:"class,omitempty"`
	Meta       map[string]string `json:"meta,omitempty"`
	// Ready: the node is up. Eligible: new work may be placed on it (not
	// draining, not marked ineligible).
	Ready    bool `json:"ready"`
	Eligible bool `json:"eligible"`
	// Status is the cluster's word for a node that is not Ready ("down",
	// "disconnected", "initializing"); empty when Ready.
	Status string `json:"status,omitempty"`
	// Draining: an operator is draining the node: what runs on it must
	// leave, by DrainDeadline when it has one (zero: no deadline).
	Draining      bool      `json:"draining,omitempty"`
	DrainDeadline time.Time `json:"drainDeadline,omitzero"`
	// CPUMHz, MemoryBytes and DiskBytes are what the node offers to
	// work: on Nomad its advertised totals less what the node reserves
	// and less what allocations berth does not own hold. CPU is counted as
	// Nomad counts it, in MHz shares (schema.WorkResources.CPUMHz). Zero
	// means "not tracked". A snapshot file written before the field had
	// this name says cpuMilli; UnmarshalJSON reads both.
	CPUMHz      int64 `json:"cpuMHz,omitempty"`
	MemoryBytes int64 `json:"memoryBytes,omitempty"`
	DiskBytes   int64 `json:"diskBytes,omitempty"`
	// Cores is how many whole cores the node can still reserve
	// exclusively (Nomad's reservable cores less those others hold), and
	// CPUPerCore the MHz shares one such core costs (Nomad: CpuShares /
	// TotalCpuCores). Zero Cores: exclusive cores are not tracked.
	Cores      int   `json:"cores,omitempty"`
	CPUPerCore int64 `json:"cpuPerCore,omitempty"`
	// Features: the driver reports the node's task drivers and host
	// volumes, and work needing one the node lacks cannot run there.
	// False: not tracked, anything is assumed available. Drivers are the
	// task drivers detected and healthy, sorted; HostVolumes the names
	// of its host volumes, sorted.
	Features    bool     `json:"features,omitempty"`
	Drivers     []string `json:"drivers,omitempty"`
	HostVolumes []string `json:"hostVolumes,omitempty"`
	// GPUs are sorted by Index.
	GPUs []GPU `json:"gpus"`
	// TopologyGuessed is true when the driver had no topology from
	// `berth agent` and assumed one NVLink domain and one NUMA node.
	TopologyGuessed bool `json:"topologyGuessed,omitempty"`
}

// UsableGPUs counts the GPUs work may be placed on: the healthy GPUs of a
// ready, eligible node; none on any other.
func (n *Node) UsableGPUs() int {
	if !n.Ready || !n.Eligible {
		return 0
	}
	k := 0
	for _, g := range n.GPUs {
		if g.Healthy {
			k++
		}
	}
	return k
}

// UsableGPUs sums Node.UsableGPUs over s's nodes.
func (s *Snapshot) UsableGPUs() int {
	k := 0
	for i := range s.Nodes {
		k += s.Nodes[i].UsableGPUs()
	}
	return k
}

// ModelOf returns the model (the device group's name) of the first GPU
// of allocation a that a's node lists; "" when none is listed (a node or
// GPU gone, an allocation of no GPU). Nodes are sorted by name.
func (s *Snapshot) ModelOf(a *Alloc) string {
	i := sort.Search(len(s.Nodes), func(i int) bool { return s.Nodes[i].Name >= a.Node })
	if i == len(s.Nodes) || s.Nodes[i].Name != a.Node {
		return ""
	}
	for _, id := range a.GPUs {
		for g := range s.Nodes[i].GPUs {
			if s.Nodes[i].GPUs[g].ID == id {
				return s.Nodes[i].GPUs[g].Model
			}
		}
	}
	return ""
}

// GPU is one device on a node.
type GPU struct {
	// ID is the device instance ID (NVML UUID; Nomad device instance ID).
	ID          string `json:"id"`
	Index       int    `json:"index"`
	Model       string `json:"model"`
	MemoryBytes int64  `json:"memoryBytes,omitempty"`
	// Domain is the NVLink domain within the node (GPUs linked to each
	// other share one); NUMA is the NUMA node the GPU is attached to. A
	// MIG instance's are its parent GPU's: NUMA the parent's NUMA node,
	// Domain a number of the parent's own that no whole GPU has (MIG
	// instances share no NVLink; instances of one parent share a Domain,
	// so grouping by Domain keeps a replica's instances on one GPU). The
	// Nomad driver knows the parent from berth agent's metadata; without
	// it, instances share one guessed Domain.
	Domain int `json:"domain"`
	NUMA   int `json:"numa"`
	// Healthy: berth may place work on it. A GPU the device reports
	// unhealthy is not, nor is one HeldBy another job.
	Healthy bool `json:"healthy"`
	// HeldBy names the job berth does not own that holds the GPU (empty:
	// none); such a GPU is not Healthy, though the device may be.
	HeldBy string `json:"heldBy,omitempty"`
}

// AllocPhase is how far an allocation is in its life.
type AllocPhase int

const (
	// AllocStarting: placed, not yet running.
	AllocStarting AllocPhase = iota
	// AllocRunning: running and holding its GPUs.
	AllocRunning
	// AllocStopping: told to stop (checkpoint signal sent); still holds its
	// GPUs until it is gone.
	AllocStopping
)

func (p AllocPhase) String() string {
	switch p {
	case AllocStarting:
		return "starting"
	case AllocRunning:
		return "running"
	case AllocStopping:
		return "stopping"
	}
	return "unknown"
}

// MarshalText writes the phase's name (starting, running, stopping).
func (p AllocPhase) MarshalText() ([]byte, error) {
	if s := p.String(); s != "unknown" {
		return []byte(s), nil
	}
	return nil, fmt.Errorf("allocation phase %d has no name", int(p))
}

// UnmarshalJSON reads a phase's name, or its number as snapshots before
// berth.dev/snapshot/v2 wrote it.
func (p *AllocPhase) UnmarshalJSON(b []byte) error {
	if n, err := strconv.Atoi(string(b)); err == nil {
		*p = AllocPhase(n)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("allocation phase: %w", err)
	}
	for q := AllocStarting; q <= AllocStopping; q++ {
		if q.String() == s {
			*p = q
			return nil
		}
	}
	return fmt.Errorf("allocation phase %q: want starting, running or stopping", s)
}

// Alloc is one replica of a workspace holding GPUs on a node. Terminal
// allocations are not in a snapshot: they hold nothing.
type Alloc struct {
	Workspace schema.Ref `json:"workspace"`
	Replica   int        `json:"replica"`
	Node      string     `json:"node"`
	// GPUs are device IDs on Node, sorted.
	GPUs []string `json:"gpus"`
	// CPUMHz, MemoryBytes and DiskBytes are what it holds on Node (CPU
	// in MHz shares, its exclusive cores' shares included); Cores the
	// whole cores it holds exclusively.
	CPUMHz      int64      `json:"cpuMHz,omitempty"`
	MemoryBytes int64      `json:"memoryBytes,omitempty"`
	DiskBytes   int64      `json:"diskBytes,omitempty"`
	Cores       int        `json:"cores,omitempty"`
	Phase       AllocPhase `json:"phase"`
	// StartedAt is when this run started (after a resume: the resume).
	StartedAt time.Time `json:"startedAt"`
	// LastCheckpoint is the last completed checkpoint; zero: none this run,
	// so all work since StartedAt is at risk.
	LastCheckpoint time.Time `json:"lastCheckpoint,omitempty"`
	// Progress is the work the workspace has kept so far, over all its runs
	// (run time up to its last checkpoint plus this run's), when the driver
	// knows it (the simulator does); zero otherwise.
	Progress time.Duration `json:"progress,omitempty"`
	// ResumedFrom is the progress this run started from (what earlier
	// runs kept), when the driver knows progress; zero otherwise.
	ResumedFrom time.Duration `json:"resumedFrom,omitempty"`
	// Revision is the spec revision the allocation was started from.
	Revision string `json:"revision,omitempty"`
	// SpecHash is the Fingerprint of the spec the allocation runs; empty
	// when the driver does not know it (a job an older berth registered):
	// then only a change berth can see (priority, drift) updates it.
	SpecHash string `json:"specHash,omitempty"`
	// Priority is the priority (tier value) the allocation runs at; zero
	// when the driver does not know.
	Priority int `json:"priority,omitempty"`
	// ID is the driver's identifier of this run of the replica (the Nomad
	// allocation ID); a restart gives a new one. Empty when the driver
	// has none.
	ID string `json:"id,omitempty"`
	// Addresses are where the replica's ports are reachable, as the
	// cluster placed them (Nomad: the allocation's port mappings), in
	// the order of the spec's ports; empty when it has none or the driver
	// does not know.
	Addresses []Address `json:"addresses,omitempty"`
	// Drift, when not empty, says how the cluster's object for this
	// allocation was changed outside berth (another task, other GPUs
	// pinned); berth puts it back.
	Drift string `json:"drift,omitempty"`
	// Waiting, on a starting allocation, says why the cluster has not
	// started its task, in words a person can act on (Nomad: a secret's
	// Variable that does not exist or that the job may not read, with
	// the command and policy that fix it); empty when it runs, or when
	// the driver knows no reason (the simulator never sets it). It never
	// holds a secret's value.
	Waiting string `json:"waiting,omitempty"`
	// Use is the last reading of its GPUs' utilization, nil when the
	// driver has none: it reads none (the simulator unless told), has
	// not sampled this allocation yet, or its GPUs report no stats (MIG
	// instances).
	Use *GPUUse `json:"use,omitempty"`
}

// GPUUse is one reading of an allocation's GPU utilization, as the
// NVIDIA device plugin reports it ("GPU utilization", per GPU).
type GPUUse struct {
	// At is when the cluster measured it.
	At time.Time `json:"at"`
	// Percent is each GPU's utilization, 0–100, in the order of
	// Alloc.GPUs; a GPU the reading lacks is left out (shorter than
	// GPUs).
	Percent []float64 `json:"percent"`
}

// Max is the highest utilization of the reading's GPUs, -1 when it has
// none.
func (u *GPUUse) Max() float64 {
	m := -1.0
	for _, p := range u.Percent {
		m = max(m, p)
	}
	return m
}

// Address is where one port of a replica is reachable: Host (an IP or
// a name) and Port on it, under the port's Label.
type Address struct {
	Label string `json:"label"`
	Host  string `json:"host"`
	Port  int    `json:"port"`
}

// cpuMilli is the name snapshot files gave CPUMHz before it had this
// one (the same MHz shares under a misleading name).
type cpuMilli struct {
	CPUMilli int64 `json:"cpuMilli"`
}

// UnmarshalJSON reads a node, its CPU under either name (cpuMHz, or
// cpuMilli as older snapshot files have it).
func (n *Node) UnmarshalJSON(b []byte) error {
	type node Node
	var v struct {
		node
		cpuMilli
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*n = Node(v.node)
	if n.CPUMHz == 0 {
		n.CPUMHz = v.CPUMilli
	}
	return nil
}

// UnmarshalJSON reads an allocation, its CPU under either name (cpuMHz,
// or cpuMilli as older snapshot files have it).
func (a *Alloc) UnmarshalJSON(b []byte) error {
	type alloc Alloc
	var v struct {
		alloc
		cpuMilli
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*a = Alloc(v.alloc)
	if a.CPUMHz == 0 {
		a.CPUMHz = v.CPUMilli
	}
	return nil
}
