package schema

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// APIVersion is the only apiVersion berth reads.
const APIVersion = "berth.dev/v1"

// Kinds of documents in a spec repo.
const (
	KindPriorityTier     = "PriorityTier"
	KindProject          = "Project"
	KindWorkspace        = "Workspace"
	KindVolume           = "Volume"
	KindSchedulingPolicy = "SchedulingPolicy"
)

// Pos is a position in a spec file. Line and Col are 1-based; a zero Pos
// means "unknown".
type Pos struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Col  int    `json:"col"`
}

// String writes "file:line:col", leaving out what is unknown.
func (p Pos) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		b.WriteString(":" + strconv.Itoa(p.Line))
		if p.Col > 0 {
			b.WriteString(":" + strconv.Itoa(p.Col))
		}
	}
	return b.String()
}

// Meta is the metadata every document carries. Source is where the
// document starts; Fields maps a dotted field path ("spec.tier") to where
// its value is written, so cross-document errors point at the right line.
type Meta struct {
	Name        string            `json:"name"`
	Project     string            `json:"project,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`

	Source Pos            `json:"-"`
	Fields map[string]Pos `json:"-"`
}

// FieldPos returns where field (a dotted path such as "spec.tier") is
// written, falling back to the document's start.
func (m Meta) FieldPos(field string) Pos {
	if p, ok := m.Fields[field]; ok {
		return p
	}
	return m.Source
}

// PriorityTier is a named priority. Value becomes the Nomad job priority.
type PriorityTier struct {
	Meta Meta     `json:"metadata"`
	Spec TierSpec `json:"spec"`
}

// TierSpec is the body of a PriorityTier.
type TierSpec struct {
	Value       int    `json:"value"`
	Description string `json:"description,omitempty"`
	// Preemptible: workspaces of this tier may be preempted (default true).
	Preemptible bool `json:"preemptible"`
	// CanPreempt: workspaces of this tier may preempt lower tiers (default true).
	CanPreempt bool `json:"canPreempt"`
	// BorrowWithinCohort, when set, lets workspaces of this tier preempt
	// other teams' work inside their quotas, of tiers below the named
	// one (and below this one), as Kueue's borrowWithinCohort does; what
	// they start so is reclaimed only by strictly higher tiers. Off (nil)
	// by default: it breaks the victims' teams' quota guarantee.
	BorrowWithinCohort *BorrowWithinCohort `json:"borrowWithinCohort,omitempty"`
	// MaxRuntime and Idle are the defaults of its workspaces' limits
	// (Set.MaxRuntime, Set.Idle) where neither they nor their project
	// set them.
	MaxRuntime *time.Duration `json:"maxRuntime,omitempty"`
	Idle       IdleRule       `json:"idle,omitzero"`
	// Ordering is attained-service ordering in this tier (the policy's
	// Service): OrderingOn (or empty, the default), OrderingAll or
	// OrderingOff.
	Ordering Ordering `json:"ordering,omitempty"`
}

// ParseServicePolicy reads a ServicePolicy written as "off" (no
// ordering) or STEP,STEP,…/PROMOTE, GPU-hours in ascending order, as
// berth simulate --service takes it ("2,8,32/8").
func ParseServicePolicy(s string) (ServicePolicy, error) {
	if s == "off" {
		return ServicePolicy{}, nil
	}
	steps, promote, ok := strings.Cut(s, "/")
	if !ok {
		return ServicePolicy{}, fmt.Errorf("service %q: write off, or steps in GPU-hours and the promotion knob, such as 2,8,32/8", s)
	}
	var sp ServicePolicy
	for _, f := range strings.Split(steps, ",") {
		n, err := strconv.ParseFloat(f, 64)
		if err != nil || n <= 0 || (len(sp.Steps) > 0 && n <= sp.Steps[len(sp.Steps)-1]) {
			return ServicePolicy{}, fmt.Errorf("service %q: step %q: steps are GPU-hours above 0, in ascending order, such as 2,8,32/8", s, f)
		}
		sp.Steps = append(sp.Steps, n)
	}
	n, err := strconv.ParseFloat(promote, 64)
	if err != nil || n < 0 {
		return ServicePolicy{}, fmt.Errorf("service %q: the promotion knob %q is a number, 0 or more (0: never), such as 2,8,32/8", s, promote)
	}
	sp.Promote = n
	return sp, nil
}

// Ordering is a tier's attained-service ordering.
type Ordering string

const (
	// OrderingOn: the tier's work queues by attained service, and work
	// that checkpoints yields to less-served work; interactive work (a
	// workspace with ports or a service: someone is at it) does not.
	OrderingOn Ordering = "on"
	// OrderingAll: interactive work that checkpoints yields too.
	OrderingAll Ordering = "all"
	// OrderingOff: the tier's work queues first come, first served, and
	// none yields for ordering.
	OrderingOff Ordering = "off"
)

// BorrowWithinCohort is a tier's opt-in to take other teams' in-quota
// work: Below names the tier whose value bounds it; only work of tiers
// of a lower value is taken.
type BorrowWithinCohort struct {
	Below string `json:"below"`
}

// Project is a team's home: a tier, members, a guaranteed quota and a
// limit on borrowing idle capacity.
type Project struct {
	Meta Meta        `json:"metadata"`
	Spec ProjectSpec `json:"spec"`
}

// ProjectSpec is the body of a Project.
type ProjectSpec struct {
	// Tier is the tier of its workspaces that name none of their own.
	Tier string `json:"tier"`
	// MaxTier caps the tiers its workspaces may name (by value); empty:
	// any tier.
	MaxTier     string    `json:"maxTier,omitempty"`
	Description string    `json:"description,omitempty"`
	Members     []string  `json:"members,omitempty"`
	Quota       Resources `json:"quota"`
	// BorrowLimit caps how far beyond Quota the project may run on idle
	// capacity. Nil GPUs in a limit means "no limit".
	BorrowLimit BorrowLimit `json:"borrowLimit"`
	FairShare   FairShare   `json:"fairShare"`
	// Namespace is the Nomad namespace; empty means the project's name.
	Namespace string `json:"namespace,omitempty"`
	// Placement is the default placement of the project's workspaces.
	Placement Placement `json:"placement,omitzero"`
	// MaxRuntime and Idle are the defaults of its workspaces' limits
	// (Set.MaxRuntime, Set.Idle) where they set none; nil, zero: its
	// tier's.
	MaxRuntime *time.Duration `json:"maxRuntime,omitempty"`
	Idle       IdleRule       `json:"idle,omitzero"`
}

// Placement restricts the nodes a workspace may run on: a node must
// satisfy every field that is set (an empty field allows any node). It
// becomes the Nomad job's datacenters, node_pool and constraints.
// Datacenters are sorted and without duplicates once loaded.
type Placement struct {
	Datacenters []string          `json:"datacenters,omitempty"`
	NodePool    string            `json:"nodePool,omitempty"`
	NodeClass   string            `json:"nodeClass,omitempty"`
	NodeMeta    map[string]string `json:"nodeMeta,omitempty"`
}

// IsZero reports whether p allows any node.
func (p Placement) IsZero() bool {
	return len(p.Datacenters) == 0 && p.NodePool == "" && p.NodeClass == "" && len(p.NodeMeta) == 0
}

// Or returns p with every field p leaves out taken from def (NodeMeta
// key by key, p's value winning). Neither is mutated.
func (p Placement) Or(def Placement) Placement {
	out := p
	if len(out.Datacenters) == 0 {
		out.Datacenters = def.Datacenters
	}
	if out.NodePool == "" {
		out.NodePool = def.NodePool
	}
	if out.NodeClass == "" {
		out.NodeClass = def.NodeClass
	}
	if len(def.NodeMeta) > 0 {
		m := make(map[string]string, len(def.NodeMeta)+len(p.NodeMeta))
		for k, v := range def.NodeMeta {
			m[k] = v
		}
		for k, v := range p.NodeMeta {
			m[k] = v
		}
		out.NodeMeta = m
	}
	return out
}

// NodeDefaults are what a node that does not report a datacenter or a
// node pool is taken to be in, as Nomad's own defaults.
const (
	DefaultDatacenter = "dc1"
	DefaultNodePool   = "default"
)

// Allows reports whether a node in datacenter dc and node pool pool, of
// class class and with metadata meta, satisfies p. An empty dc or pool is
// Nomad's default (DefaultDatacenter, DefaultNodePool).
func (p Placement) Allows(dc, pool, class string, meta map[string]string) bool {
	if len(p.Datacenters) > 0 && !slices.Contains(p.Datacenters, cmpOr(dc, DefaultDatacenter)) {
		return false
	}
	if p.NodePool != "" && p.NodePool != cmpOr(pool, DefaultNodePool) {
		return false
	}
	if p.NodeClass != "" && p.NodeClass != class {
		return false
	}
	for k, v := range p.NodeMeta {
		if got, ok := meta[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// String writes p for a person: "datacenter eu-west-1, node class a100
// and node meta region=eu"; "" when it allows any node.
func (p Placement) String() string {
	var parts []string
	switch len(p.Datacenters) {
	case 0:
	case 1:
		parts = append(parts, "datacenter "+p.Datacenters[0])
	default:
		parts = append(parts, "datacenters "+strings.Join(p.Datacenters, ", "))
	}
	if p.NodePool != "" {
		parts = append(parts, "node pool "+p.NodePool)
	}
	if p.NodeClass != "" {
		parts = append(parts, "node class "+p.NodeClass)
	}
	keys := make([]string, 0, len(p.NodeMeta))
	for k := range p.NodeMeta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, "node meta "+k+"="+p.NodeMeta[k])
	}
	switch len(parts) {
	case 0:
		return ""
	case 1:
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Resources is an amount of GPUs, CPU and memory.
type Resources struct {
	GPUs int `json:"gpus"`
	// CPUMHz is CPU in MHz shares as resources.cpu reserves them on
	// Nomad, one for one: YAML "cpu: 500m" is 500, "cpu: 4" 4000.
	CPUMHz int64 `json:"cpuMilli,omitempty"`
	// MemoryBytes is memory in bytes (YAML "memory: 16Gi").
	MemoryBytes int64 `json:"memoryBytes,omitempty"`
	// Kinds are quotas in GPUs of declared kinds (GPUKind), by kind
	// name: a workspace asking for a kind named here counts against it,
	// every other workspace against GPUs, which so counts the GPUs of
	// the kinds not named. Nil: GPUs counts every GPU.
	Kinds map[string]int `json:"kinds,omitempty"`
}

// KindQuota returns the account a workspace asking for kind (empty:
// none) counts against in quota r: the kind's name when r names it, else
// "" (GPUs).
func (r Resources) KindQuota(kind string) string {
	if _, ok := r.Kinds[kind]; ok && kind != "" {
		return kind
	}
	return ""
}

// BorrowLimit bounds borrowing beyond a project's Quota, per dimension;
// a value < 0 (Unlimited) means no limit, which is what the loader fills
// for a dimension the YAML leaves out. CPUMHz and MemoryBytes bound
// only where the quota names CPU or memory (Quota.CPUMHz or
// Quota.MemoryBytes above zero): a dimension the quota leaves out is not
// limited at all.
type BorrowLimit struct {
	GPUs int `json:"gpus"`
	// CPUMHz is CPU in the unit of Resources.CPUMHz (YAML "cpu: 8").
	CPUMHz int64 `json:"cpuMilli,omitempty"`
	// MemoryBytes is memory in bytes (YAML "memory: 64Gi").
	MemoryBytes int64 `json:"memoryBytes,omitempty"`
	// Kinds bound borrowing in the kinds the quota names (Resources.Kinds),
	// by kind name; a kind the quota names and this leaves out is not
	// limited.
	Kinds map[string]int `json:"kinds,omitempty"`
}

// Unlimited is the BorrowLimit value meaning "no limit".
const Unlimited = -1

// FairShare holds a project's fair-share weight; zero: not set, and
// the policy weighs the project by its quota (policies.Weight).
type FairShare struct {
	Weight float64 `json:"weight"`
}

// Workspace is one GPU workload in a project.
type Workspace struct {
	Meta Meta          `json:"metadata"`
	Spec WorkspaceSpec `json:"spec"`
}

// Ref returns the workspace's project/name reference.
func (w *Workspace) Ref() Ref { return Ref{Project: w.Meta.Project, Name: w.Meta.Name} }

// Ref names a workspace: project and name. It orders by project, then name.
type Ref struct {
	Project string `json:"project"`
	Name    string `json:"name"`
}

func (r Ref) String() string { return r.Project + "/" + r.Name }

// MarshalText writes "project/name", so maps keyed by Ref encode as JSON.
func (r Ref) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads "project/name".
func (r *Ref) UnmarshalText(b []byte) error {
	p, n, ok := strings.Cut(string(b), "/")
	if !ok || p == "" || n == "" {
		return fmt.Errorf("workspace reference %q: want project/name", b)
	}
	*r = Ref{Project: p, Name: n}
	return nil
}

// Less orders refs by project, then name.
func (r Ref) Less(o Ref) bool {
	if r.Project != o.Project {
		return r.Project < o.Project
	}
	return r.Name < o.Name
}

// Compare orders refs as Less does: -1, 0 or +1 (for slices.SortFunc and
// binary searches).
func (r Ref) Compare(o Ref) int {
	if c := strings.Compare(r.Project, o.Project); c != 0 {
		return c
	}
	return strings.Compare(r.Name, o.Name)
}

// DesiredState is what the spec asks of a workspace.
type DesiredState string

const (
	DesiredRunning DesiredState = "Running"
	DesiredStopped DesiredState = "Stopped"
)

// WorkspaceSpec is the body of a Workspace.
type WorkspaceSpec struct {
	Owner string `json:"owner,omitempty"`
	// Tier is the workspace's priority tier; empty: its project's tier
	// (Set.TierFor resolves it).
	Tier      string        `json:"tier,omitempty"`
	State     DesiredState  `json:"state"`
	Task      Task          `json:"task"`
	Resources WorkResources `json:"resources"`
	Topology  Topology      `json:"topology"`
	// Placement is where its replicas may run, the project's placement
	// filled in for what the workspace leaves out.
	Placement Placement `json:"placement,omitzero"`
	// Ports are the task's network ports, in the order written; Service
	// its Nomad service registration (nil: none).
	Ports   []Port   `json:"ports,omitempty"`
	Service *Service `json:"service,omitempty"`
	// Replicas is the gang size: all replicas run, or none (default 1).
	Replicas   int           `json:"replicas"`
	Volumes    []VolumeMount `json:"volumes,omitempty"`
	Checkpoint Checkpoint    `json:"checkpoint"`
	// Preemptible: this workspace may be preempted (default true; the
	// tier must allow it too).
	Preemptible bool `json:"preemptible"`
	// Restart is what happens when its task fails on its own (a non-zero
	// exit, an OOM kill): restarted in place Restart.Attempts times,
	// Restart.Delay apart (drivers: Nomad's restart block), then it is
	// Failed. The zero value restarts nothing. The written shorthand
	// restartOnFailure: true is LegacyRestart. A failure the node causes
	// is not the task's: berth moves it (drivers.EndNodeFault).
	Restart Restart `json:"restart,omitzero"`
	// UnhealthyGPU is what berth does when a GPU it holds turns unhealthy
	// on its node: GPUMove (or "", the default) stops it with its
	// checkpoint grace and starts it elsewhere; GPUStay leaves it running. A GPU that is
	// gone from its node, or a node draining or down, always moves it.
	UnhealthyGPU string `json:"unhealthyGPU,omitempty"`
	// ExpectedDuration is how long its owner expects one run to take;
	// zero: not stated. It informs the queue's likely start
	// (policies.Predict) and never limits the run.
	ExpectedDuration time.Duration `json:"expectedDuration,omitempty"`
	// MaxRuntime is how long it may run, over all its runs of one spec
	// (preemptions and moves do not restart the clock; a spec change
	// does): at the limit berth stops it with its checkpoint grace and
	// does not start it again until its spec changes. nil: its
	// project's or tier's (Set.MaxRuntime); 0: no limit.
	MaxRuntime *time.Duration `json:"maxRuntime,omitempty"`
	// Idle is when its GPUs count as idle and what berth does then
	// (Set.Idle resolves it with its project's, tier's and the policy's).
	Idle IdleRule `json:"idle,omitzero"`
}

// Restart is a workspace's restart policy for its task's own failures.
type Restart struct {
	// Attempts is how many times a failed task is restarted in place
	// before the workspace is Failed (0: never).
	Attempts int `json:"attempts,omitempty"`
	// Delay is the wait before each restart (DefaultRestartDelay when
	// not written).
	Delay time.Duration `json:"delay,omitempty"`
}

// DefaultRestartDelay is Restart.Delay when the spec gives attempts and
// no delay; MinRestartDelay the least a spec may write: a task never
// loops faster than that.
const (
	DefaultRestartDelay = 15 * time.Second
	MinRestartDelay     = time.Second
)

// LegacyRestart is what restartOnFailure: true asks for: 3 restarts,
// 15 s apart.
var LegacyRestart = Restart{Attempts: 3, Delay: DefaultRestartDelay}

// What a workspace does when a GPU it holds turns unhealthy
// (WorkspaceSpec.UnhealthyGPU).
const (
	GPUMove = "move"
	GPUStay = "stay"
)

// Port is one network port of a workspace's task: Static is a fixed
// host port (0: Nomad picks one), To the port inside a container (0: the
// host port), Scheme "http" or "https" when its address is a URL.
type Port struct {
	Label  string `json:"label"`
	Static int    `json:"static,omitempty"`
	To     int    `json:"to,omitempty"`
	Scheme string `json:"scheme,omitempty"`
}

// Service is a Nomad service registration (provider nomad) of the port
// labelled Port, named Name (the loader fills PROJECT-NAME), with an
// optional health check.
type Service struct {
	Name  string        `json:"name"`
	Port  string        `json:"port"`
	Tags  []string      `json:"tags,omitempty"`
	Check *ServiceCheck `json:"check,omitempty"`
}

// ServiceCheck is a health check: Type "http" (Path, default "/") or
// "tcp", every Interval (default 10s), each within Timeout (default 2s).
type ServiceCheck struct {
	Type     string        `json:"type"`
	Path     string        `json:"path,omitempty"`
	Interval time.Duration `json:"interval"`
	Timeout  time.Duration `json:"timeout"`
}

// Task is what runs.
type Task struct {
	Driver  string            `json:"driver"`
	Image   string            `json:"image,omitempty"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// Secrets are values the task gets from Nomad Variables, by
	// reference, in the order written: the spec names where a value is,
	// never the value. Nil when there are none, so a task without
	// secrets fingerprints as it did before they existed.
	Secrets []Secret `json:"secrets,omitempty"`
}

// Secret is one value a task gets by reference: item Key of the Nomad
// Variable at path Variable, in the job's namespace, read by the cluster
// for the task (Nomad: a template read through the job's workload
// identity), never by berth. It is given to the task as the environment
// variable Env or as the file File under the task's secrets directory:
// exactly one of the two is set.
//
// ChangeMode is what the task gets when the value changes while it runs:
// SecretNoop (the default, and what "" means) nothing, SecretRestart a
// restart in place, SecretSignal the signal ChangeSignal.
type Secret struct {
	Variable     string `json:"variable"`
	Key          string `json:"key"`
	Env          string `json:"env,omitempty"`
	File         string `json:"file,omitempty"`
	ChangeMode   string `json:"changeMode,omitempty"`
	ChangeSignal string `json:"changeSignal,omitempty"`
}

// SecretsOwnDir is the directory under a task's secrets directory that
// a driver renders its own files into (the Nomad driver: the templates of
// the secrets given as environment variables); a Secret's File is never
// in it.
const SecretsOwnDir = ".berth"

// plainKey is a Variable item key that String writes without quotes.
var plainKey = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// Secret.ChangeMode's values.
const (
	SecretNoop    = "noop"
	SecretRestart = "restart"
	SecretSignal  = "signal"
)

// String names where the value comes from and where it goes, never the
// value (berth never reads it): "ml/hf:token as $HF_TOKEN",
// "ml/hf:token as secrets/hf-token, restart on change".
func (s Secret) String() string {
	key := s.Key
	if !plainKey.MatchString(key) {
		key = strconv.Quote(key)
	}
	out := s.Variable + ":" + key + " as "
	if s.Env != "" {
		out += "$" + s.Env
	} else {
		out += "secrets/" + s.File
	}
	switch s.ChangeMode {
	case SecretRestart:
		out += ", restart on change"
	case SecretSignal:
		out += ", " + s.ChangeSignal + " on change"
	}
	return out
}

// WorkResources is what one replica needs, and exactly what berth asks
// Nomad to reserve for it, so the decision counts what Nomad will count.
//
// CPU is a share, not a core: CPUMHz is rendered as Nomad's
// resources.cpu in MHz, one for one (cpu: 500m → 500 MHz, cpu: 2 → 2000
// MHz, cpu: 2400MHz → 2400), and a node offers its advertised MHz less
// what it reserves. Shares are reserved, never exceeded by the scheduler.
// ExclusiveCores asks instead for whole cores pinned to the task (Nomad's
// resources.cores): they cost a node ExclusiveCores of its reservable
// cores and that many cores' worth of MHz, and nothing else may use
// them. At most one of the two is set; the loader fills CPUMHz with
// DefaultCPUMHz when neither is written.
//
// MemoryBytes and DiskBytes (the task group's ephemeral disk) are whole
// MiB, as Nomad counts them (MemoryMB, DiskMB); the loader rounds a
// written value up to the next MiB and fills DefaultMemoryBytes and
// DefaultDiskBytes when none is written. A Workspace built by hand may
// leave them zero: the decision then counts nothing, and the Nomad
// driver renders Nomad's own defaults (which are these).
type WorkResources struct {
	GPUs     int    `json:"gpus"`
	GPUModel string `json:"gpuModel,omitempty"`
	// GPUKind names the declared kind (GPUKind) its GPUs are of; empty:
	// any whole GPU (or the model GPUModel names). At most one of the two
	// is set.
	GPUKind string `json:"gpuKind,omitempty"`
	// GPUKinds are kinds in order of preference, as Kueue's flavor
	// fungibility: each replica set runs on GPUs of one of them (Kinds).
	// Set instead of GPUKind and GPUModel, never beside them.
	GPUKinds       []string `json:"gpuKinds,omitempty"`
	CPUMHz         int64    `json:"cpuMilli,omitempty"`
	ExclusiveCores int      `json:"exclusiveCores,omitempty"`
	MemoryBytes    int64    `json:"memoryBytes,omitempty"`
	DiskBytes      int64    `json:"diskBytes,omitempty"`
}

// Kinds returns the kinds r may run on, in order of preference: GPUKinds,
// or GPUKind alone; nil when it names no kind.
func (r *WorkResources) Kinds() []string {
	if len(r.GPUKinds) > 0 {
		return r.GPUKinds
	}
	if r.GPUKind != "" {
		return []string{r.GPUKind}
	}
	return nil
}

// What a replica reserves when its spec does not say: Nomad's own
// defaults for a task (cpu 100 MHz, memory 300 MB) and a task group
// (ephemeral disk 300 MB), where Nomad's MB are MiB.
const (
	DefaultCPUMHz      = 100
	DefaultMemoryBytes = 300 << 20
	DefaultDiskBytes   = 300 << 20
)

// Constraint is a topology requirement strength.
type Constraint string

const (
	ConstraintNone      Constraint = "none"
	ConstraintPreferred Constraint = "preferred"
	ConstraintRequired  Constraint = "required"
)

// Topology asks for GPUs in one NVLink domain and/or one NUMA node.
type Topology struct {
	NVLink Constraint `json:"nvlink"`
	NUMA   Constraint `json:"numa"`
}

// VolumeMount mounts a Volume into a workspace.
type VolumeMount struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
	// Source is the Nomad volume the mount asks a node for: the Volume's
	// spec.source, filled in by the loader; empty (built by hand) means
	// Name.
	Source string `json:"source,omitempty"`
}

// Checkpoint says how a workspace saves its work: the signal it gets on
// preemption, how long it has to checkpoint, and how often it checkpoints
// on its own. Zero Interval means it never checkpoints on its own.
type Checkpoint struct {
	Signal      string        `json:"signal"`
	GracePeriod time.Duration `json:"gracePeriod"`
	Interval    time.Duration `json:"interval"`
}

// Volume is named storage that workspaces of listed projects may mount.
type Volume struct {
	Meta Meta       `json:"metadata"`
	Spec VolumeSpec `json:"spec"`
}

// VolumeSpec is the body of a Volume.
type VolumeSpec struct {
	SizeBytes  int64    `json:"sizeBytes"`
	Type       string   `json:"type"` // host | csi
	Source     string   `json:"source,omitempty"`
	AccessMode string   `json:"accessMode,omitempty"`
	Projects   []string `json:"projects"`
}

// SchedulingPolicy tunes the decision. At most one per repo; Set.Policy
// always holds one with defaults filled.
type SchedulingPolicy struct {
	Meta Meta       `json:"metadata"`
	Spec PolicySpec `json:"spec"`
}

// PolicySpec is the body of a SchedulingPolicy.
type PolicySpec struct {
	FairShare  FairSharePolicy  `json:"fairShare"`
	Aging      AgingPolicy      `json:"aging"`
	Preemption PreemptionPolicy `json:"preemption"`
	Defaults   PolicyDefaults   `json:"defaults"`
	// Idle is the idle-GPU rule of every workspace whose tier, project
	// or own spec leaves it out (Set.Idle).
	Idle IdleRule `json:"idle,omitzero"`
	// Service is attained-service ordering: short work first.
	Service ServicePolicy `json:"service"`
}

// ServicePolicy is attained-service ordering (Tiresias' discretized
// two-dimensional least-attained-service): a workspace's attained
// service is the GPU-time it has run with its spec, over all its runs;
// Steps divide it into queues, the least served first, first come first
// served within one. Inside a team's quota and tier, and over borrowed
// GPUs of a tier, a workspace that checkpoints and has run past a step
// yields to less-served waiting work, with its checkpoint grace. Empty
// Steps turn it off.
type ServicePolicy struct {
	// Steps are the GPU-time thresholds between queues, in GPU-hours,
	// ascending.
	Steps []float64 `json:"steps,omitempty"`
	// Promote: a workspace that has waited, since it last ran, Promote
	// times as long as it has run goes to the first queue (0: never).
	Promote float64 `json:"promote"`
}

// FairSharePolicy: usage decays by half every HalfLife.
type FairSharePolicy struct {
	HalfLife time.Duration `json:"halfLife"`
}

// AgingPolicy: every Interval of waiting adds Step to a workspace's queue
// score, up to MaxBoost. Aging never grants a right to preempt.
//
// MaxWait is the wait bound, per team: a workspace queued this long is
// overdue. The oldest overdue workspace its project's limits let start
// holds the starvation guard's reservation against borrowers of its
// tier and lower and its own team's work of its tier and lower, never
// against another team's work inside its quota (nor higher tiers), and
// no later preemptor it binds takes a node it holds GPUs on. A workspace
// that started overdue is preempted only by a higher tier, or reclaimed
// by another team's work inside its quota. The default is 72h; zero
// turns the bound off.
type AgingPolicy struct {
	Interval time.Duration `json:"interval"`
	Step     int           `json:"step"`
	MaxBoost int           `json:"maxBoost"`
	MaxWait  time.Duration `json:"maxWait"`
}

// PreemptionPolicy guards preemption.
type PreemptionPolicy struct {
	Enabled bool `json:"enabled"`
	// MinRuntime: no workspace is preempted before it has run this long.
	MinRuntime time.Duration `json:"minRuntime"`
	// MaxVictims: the largest number of workspaces one preemptor may evict.
	MaxVictims int `json:"maxVictims"`
}

// PolicyDefaults fill fields workspaces leave empty.
type PolicyDefaults struct {
	Topology   Topology   `json:"topology"`
	Checkpoint Checkpoint `json:"checkpoint"`
}

// DefaultPolicy is the policy in force when a repo has none.
func DefaultPolicy() SchedulingPolicy {
	return SchedulingPolicy{
		Meta: Meta{Name: "default"},
		Spec: PolicySpec{
			FairShare:  FairSharePolicy{HalfLife: 7 * 24 * time.Hour},
			Aging:      AgingPolicy{Interval: 10 * time.Minute, Step: 1, MaxBoost: 10, MaxWait: 72 * time.Hour},
			Preemption: PreemptionPolicy{Enabled: true, MinRuntime: 0, MaxVictims: 8},
			Service:    ServicePolicy{Steps: []float64{2, 8, 32, 128}, Promote: 16},
			Defaults: PolicyDefaults{
				Topology:   Topology{NVLink: ConstraintPreferred, NUMA: ConstraintNone},
				Checkpoint: Checkpoint{Signal: "SIGTERM", GracePeriod: 30 * time.Second},
			},
		},
	}
}

// Set is a validated revision of the specs: the desired state. Every slice
// is sorted by name (workspaces by project, then name). A Set is never
// mutated after Load returns it; callers share it read-only.
type Set struct {
	Revision   string
	Tiers      []PriorityTier
	Projects   []Project
	Workspaces []Workspace
	Volumes    []Volume
	// Kinds are the declared GPU kinds; none: every GPU is of one kind
	// for quotas, as they always were.
	Kinds  []GPUKind
	Policy SchedulingPolicy
	// Notifications route events to receivers (package notify), sorted
	// by name.
	Notifications []Notification
}

// Tier returns the tier named name, or nil.
func (s *Set) Tier(name string) *PriorityTier {
	i := sort.Search(len(s.Tiers), func(i int) bool { return s.Tiers[i].Meta.Name >= name })
	if i < len(s.Tiers) && s.Tiers[i].Meta.Name == name {
		return &s.Tiers[i]
	}
	return nil
}

// Project returns the project named name, or nil.
func (s *Set) Project(name string) *Project {
	i := sort.Search(len(s.Projects), func(i int) bool { return s.Projects[i].Meta.Name >= name })
	if i < len(s.Projects) && s.Projects[i].Meta.Name == name {
		return &s.Projects[i]
	}
	return nil
}

// Workspace returns the workspace ref names, or nil.
func (s *Set) Workspace(ref Ref) *Workspace {
	i := sort.Search(len(s.Workspaces), func(i int) bool { return !s.Workspaces[i].Ref().Less(ref) })
	if i < len(s.Workspaces) && s.Workspaces[i].Ref() == ref {
		return &s.Workspaces[i]
	}
	return nil
}

// Volume returns the volume named name, or nil.
func (s *Set) Volume(name string) *Volume {
	i := sort.Search(len(s.Volumes), func(i int) bool { return s.Volumes[i].Meta.Name >= name })
	if i < len(s.Volumes) && s.Volumes[i].Meta.Name == name {
		return &s.Volumes[i]
	}
	return nil
}

// TierOf returns the tier of project p's workspaces, or nil.
func (s *Set) TierOf(project string) *PriorityTier {
	p := s.Project(project)
	if p == nil {
		return nil
	}
	return s.Tier(p.Spec.Tier)
}

// TierFor returns workspace w's tier: the one it names, else its
// project's; nil when that tier or the project does not exist.
func (s *Set) TierFor(w *Workspace) *PriorityTier {
	if w.Spec.Tier != "" {
		return s.Tier(w.Spec.Tier)
	}
	return s.TierOf(w.Meta.Project)
}

// Sort puts every slice of s in its documented order. Loaders and tests
// that build a Set by hand call it once.
func (s *Set) Sort() {
	sort.Slice(s.Tiers, func(i, j int) bool { return s.Tiers[i].Meta.Name < s.Tiers[j].Meta.Name })
	sort.Slice(s.Projects, func(i, j int) bool { return s.Projects[i].Meta.Name < s.Projects[j].Meta.Name })
	sort.Slice(s.Workspaces, func(i, j int) bool { return s.Workspaces[i].Ref().Less(s.Workspaces[j].Ref()) })
	sort.Slice(s.Volumes, func(i, j int) bool { return s.Volumes[i].Meta.Name < s.Volumes[j].Meta.Name })
	sort.Slice(s.Kinds, func(i, j int) bool { return s.Kinds[i].Meta.Name < s.Kinds[j].Meta.Name })
	sort.Slice(s.Notifications, func(i, j int) bool { return s.Notifications[i].Meta.Name < s.Notifications[j].Meta.Name })
}

// SortedRefs returns the keys of m in Ref order.
func SortedRefs[V any](m map[Ref]V) []Ref {
	refs := make([]Ref, 0, len(m))
	for r := range m {
		refs = append(refs, r)
	}
	slices.SortFunc(refs, Ref.Compare)
	return refs
}
