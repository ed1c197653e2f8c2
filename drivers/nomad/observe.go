package nomad

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/nomad/gpumeta"
	"github.com/berth-dev/berth/schema"
	"github.com/hashicorp/nomad/api"
)

// berthFilter selects berth's jobs server-side; list stubs carry Meta
// only with ?meta=true (recordings 25, 26).
const berthFilter = `Meta["` + MetaWorkspace + `"] is not empty`

type nodeData struct {
	node   *api.Node
	allocs []*api.Allocation
}

// Observe reads nodes (status, drain, eligibility, pool, GPU instances
// with health and PCI locality, the agent's topology in node meta), berth's
// jobs and their live allocations. It returns a complete snapshot or an
// error, never part of one. It changes nothing in the cluster.
//
// GPUs held by allocations of jobs berth does not own are reported held
// by that job (GPU.HeldBy) and not Healthy: nothing berth places may use
// them. An allocation whose
// devices differ from the GPUs berth pinned is reported with the devices
// Nomad really gave it; Apply stops it.
//
// Observe starts a reconcile cycle for Apply too: the jobs it lists are
// the ones a start reads before registering (any other is registered
// with EnforceIndex 0), and the namespaces ensured in the last cycle are
// checked again.
func (d *Driver) Observe(ctx context.Context) (drivers.Snapshot, error) {
	d.forgetNamespaces()
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		snap, retry, err := d.observe(ctx)
		if err == nil {
			return snap, nil
		}
		if !retry {
			return drivers.Snapshot{}, err
		}
		last = err // something vanished between two reads: read again
	}
	return drivers.Snapshot{}, last
}

func (d *Driver) observe(ctx context.Context) (drivers.Snapshot, bool, error) {
	now := d.cfg.Now()
	// The cluster whole, or the cache the event stream keeps (follow.go).
	if d.usable(ctx) {
		d.cache.mu.Lock()
		d.cache.cachedReads++
		d.cache.mu.Unlock()
	} else if err := d.fullRead(ctx); err != nil {
		return drivers.Snapshot{}, isNotFound(err), err
	}
	data, jobs, err := d.cachedData(ctx)
	if err != nil {
		return drivers.Snapshot{}, isNotFound(err), err
	}
	d.cache.mu.Lock()
	index := d.cache.index
	d.cache.mu.Unlock()
	berth := map[[2]string]*api.JobListStub{}
	seen := make(map[[2]string]bool, len(jobs))
	for _, j := range jobs {
		seen[[2]string{j.Namespace, j.ID}] = true
		if isBerths(j.Meta) {
			berth[[2]string{j.Namespace, j.ID}] = j
		}
	}

	snap := drivers.Snapshot{ObservedAt: now}
	ids := map[string]string{}
	var evicted []Eviction
	d.mu.Lock()
	hashes := &jobHashes{last: d.jobHashes, now: make(map[*api.Job]string, len(d.jobHashes))}
	d.mu.Unlock()
	for _, nd := range data {
		node, allocs, ev := buildNode(nd, berth, hashes)
		snap.Nodes = append(snap.Nodes, node)
		snap.Allocs = append(snap.Allocs, allocs...)
		evicted = append(evicted, ev...)
		ids[node.Name] = node.ID
		ids[node.ID] = node.ID
	}
	d.attachUse(&snap)
	var failed []*api.Allocation
	snap.Exits, failed = exitsOf(data, berth)
	d.addStderr(ctx, snap.Exits, failed)
	sort.Slice(snap.Nodes, func(i, j int) bool { return snap.Nodes[i].Name < snap.Nodes[j].Name })
	sort.Slice(snap.Allocs, func(i, j int) bool {
		a, b := snap.Allocs[i], snap.Allocs[j]
		if a.Workspace != b.Workspace {
			return a.Workspace.Less(b.Workspace)
		}
		return a.Replica < b.Replica
	})
	sort.Slice(evicted, func(i, j int) bool {
		a, b := evicted[i], evicted[j]
		if a.Workspace != b.Workspace {
			return a.Workspace.Less(b.Workspace)
		}
		if a.Replica != b.Replica {
			return a.Replica < b.Replica
		}
		return a.At.Before(b.At)
	})
	d.mu.Lock()
	d.evicted = evicted
	d.nodeIDs = ids
	d.jobHashes, d.hashed = hashes.now, hashes.computed
	d.jobsSeen = seen
	d.lastIndex = max(d.lastIndex, index)
	d.mu.Unlock()
	return snap, false, nil
}

// placementMeta is the node metadata a placement may match: all of it
// but the GPU topology `berth agent` writes (berth.gpu.*), nil when none.
func placementMeta(m map[string]string) map[string]string {
	var out map[string]string
	for k, v := range m {
		if strings.HasPrefix(k, "berth.gpu.") {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(m))
		}
		out[k] = v
	}
	return out
}

// jobHashes are the hashes (jobHash) of the jobs an observation's
// allocations run, by the job's object. The followed cache gives every
// allocation of a job version that version's one object, which it never
// changes (a version is immutable), so an observation takes the hashes
// of the objects the one before it hashed (last) instead of hashing the
// fleet's jobs again; a whole read decodes new objects and hashes them.
// now holds what this observation used, and becomes the next one's last.
type jobHashes struct {
	last, now map[*api.Job]string
	computed  int // how many this observation hashed
}

func (h *jobHashes) of(j *api.Job) string {
	if s, ok := h.now[j]; ok {
		return s
	}
	s, ok := h.last[j]
	if !ok {
		s = jobHash(j)
		h.computed++
	}
	h.now[j] = s
	return s
}

// buildNode turns one Nomad node and its allocations into berth's node
// and berth's allocations on it.
func buildNode(nd nodeData, berth map[[2]string]*api.JobListStub, hashes *jobHashes) (out drivers.Node, allocs []drivers.Alloc, evicted []Eviction) {
	n := nd.node
	out = drivers.Node{
		Name: n.Name, ID: n.ID, Pool: n.NodePool, Datacenter: n.Datacenter, Class: n.NodeClass, Meta: placementMeta(n.Meta),
		Ready:    n.Status == "ready",
		Eligible: n.SchedulingEligibility == "eligible" && !n.Drain && n.DrainStrategy == nil,
		Draining: n.Drain || n.DrainStrategy != nil,
	}
	if !out.Ready {
		out.Status = cmp.Or(n.Status, "unknown")
	}
	if ds := n.DrainStrategy; ds != nil && ds.Deadline > 0 && !ds.ForceDeadline.IsZero() {
		out.DrainDeadline = ds.ForceDeadline.UTC()
	}
	// What the node offers to work, as Nomad's scheduler counts it: its
	// CPU shares (MHz), memory and disk less what the node reserves, and
	// its reservable cores (the reserved ones are not among them); below,
	// less what allocations of jobs that are not berth's hold.
	if r := n.NodeResources; r != nil {
		out.CPUMHz = r.Cpu.CpuShares
		out.MemoryBytes = r.Memory.MemoryMB * mib
		out.DiskBytes = r.Disk.DiskMB * mib
		out.Cores = len(r.Cpu.ReservableCpuCores)
		if r.Cpu.TotalCpuCores > 0 {
			out.CPUPerCore = r.Cpu.CpuShares / int64(r.Cpu.TotalCpuCores)
		}
		if rr := n.ReservedResources; rr != nil {
			out.CPUMHz -= int64(rr.Cpu.CpuShares)
			out.MemoryBytes -= int64(rr.Memory.MemoryMB) * mib
			out.DiskBytes -= int64(rr.Disk.DiskMB) * mib
		}
	}
	// Task drivers detected and healthy, and host volumes, for the
	// decision's node features.
	out.Features = true
	out.Drivers, out.HostVolumes = []string{}, []string{}
	for name, d := range n.Drivers {
		if d != nil && d.Detected && d.Healthy {
			out.Drivers = append(out.Drivers, name)
		}
	}
	for name := range n.HostVolumes {
		out.HostVolumes = append(out.HostVolumes, name)
	}
	sort.Strings(out.Drivers)
	sort.Strings(out.HostVolumes)
	type inst struct {
		dev   *api.NodeDeviceResource
		inst  *api.NodeDevice
		mem   int64
		index int
		// parent is a MIG instance's parent GPU (its topology index; -1:
		// none known), pos its place in the parent's MIG list.
		parent, pos int
	}
	var insts []inst
	if n.NodeResources != nil {
		for _, dev := range n.NodeResources.Devices {
			if dev.Type != "gpu" {
				continue
			}
			var mem int64
			if a := dev.Attributes["memory"]; a != nil && a.IntVal != nil {
				mem = *a.IntVal * unitBytes(a.Unit)
			}
			for _, in := range dev.Instances {
				insts = append(insts, inst{dev: dev, inst: in, mem: mem, index: -1, parent: -1})
			}
		}
	}
	// Order and topology: the agent's NVML order when every instance
	// matches a GPU of it, by UUID (the NVIDIA device plugin's device ID
	// is the GPU's UUID, which NVML reports) or else by PCI bus (the
	// plugin's locality); otherwise PCI order and one domain.
	//
	// MIG instances: the NVIDIA device plugin hides a MIG-enabled GPU and
	// reports each of its instances as a device of its own, whose ID is
	// the instance's UUID ("MIG-…") and whose PCI bus is not its own (the
	// parent's, or none), so an instance is matched by its ID in the
	// parent's MIG list (gpumeta: berth.gpu.g<index>.mig). A matched
	// instance is indexed after the node's GPUs, by parent then by the
	// parent's MIG order; its NUMA node is its parent's, and its Domain
	// is a number of its parent's own, after the node's NVLink domains
	// (the first after the highest, plus the parent's index): MIG
	// instances share no NVLink, and what keeps a replica's instances
	// close is one parent GPU, so the decision's grouping by domain keeps
	// them on one parent when one has room. An instance the metadata does
	// not list (an agent before MIG parents, a list stale by a
	// reconfiguration) leaves the node's topology guessed, as before.
	topo, err := gpumeta.Decode(n.Meta)
	guessed := err != nil || topo == nil
	if !guessed {
		parents := map[string][2]int{} // MIG instance UUID → parent index, place
		byUUID := map[string]int{}     // GPU UUID → index
		for _, g := range topo {
			for k, id := range g.MIG {
				parents[id] = [2]int{g.Index, k}
			}
			if g.UUID != "" {
				byUUID[g.UUID] = g.Index
			}
		}
		used := map[int]bool{}
		for i := range insts {
			if p, ok := parents[insts[i].inst.ID]; ok {
				insts[i].parent, insts[i].pos = p[0], p[1]
				continue
			}
			if _, mig := drivers.ParseMIG(insts[i].dev.Name); mig || strings.HasPrefix(insts[i].inst.ID, "MIG-") {
				guessed = true // an instance not listed: never a whole GPU, though on its parent's bus
				continue
			}
			if k, ok := byUUID[insts[i].inst.ID]; ok && !used[k] {
				insts[i].index, used[k] = k, true
			}
		}
		// The whole GPUs no UUID matched, by PCI bus, once every UUID
		// has taken its GPU.
		for i := range insts {
			if guessed {
				break
			}
			if insts[i].index >= 0 || insts[i].parent >= 0 {
				continue
			}
			for _, g := range topo {
				if !used[g.Index] && insts[i].inst.Locality != nil && gpumeta.SamePCI(insts[i].inst.Locality.PciBusID, g.PCIBusID) {
					insts[i].index, used[g.Index] = g.Index, true
					break
				}
			}
			if insts[i].index < 0 {
				guessed = true
			}
		}
		var migs []int
		for i := range insts {
			if insts[i].parent >= 0 {
				migs = append(migs, i)
			}
		}
		sort.Slice(migs, func(a, b int) bool {
			x, y := &insts[migs[a]], &insts[migs[b]]
			if x.parent != y.parent {
				return x.parent < y.parent
			}
			return x.pos < y.pos
		})
		for k, i := range migs {
			insts[i].index = len(topo) + k
		}
	}
	if guessed {
		sort.SliceStable(insts, func(i, j int) bool { return pciOf(insts[i].inst) < pciOf(insts[j].inst) })
		for i := range insts {
			insts[i].index = i
		}
	}
	held := map[string]string{} // GPUs held by jobs that are not berth's: the job
	for _, a := range nd.allocs {
		if terminal(a) {
			continue
		}
		stub := ownerOf(a, berth)
		if stub == nil {
			for _, id := range gpuIDs(a) {
				held[id] = a.JobID
			}
			r := allocResources(a)
			out.CPUMHz -= r.CPUMHz
			out.MemoryBytes -= r.MemoryBytes
			out.DiskBytes -= r.DiskBytes
			out.Cores -= r.Cores
			continue
		}
		allocs = append(allocs, buildAlloc(a, stub, n, hashes))
	}
	for _, a := range nd.allocs {
		if stub := ownerOf(a, berth); stub != nil && terminal(a) && (a.DesiredStatus == "evict" || a.ClientStatus == "lost") {
			evicted = append(evicted, Eviction{
				Workspace: refOf(stub.Meta), Replica: replicaOf(a), Node: n.Name, GPUs: gpuIDs(a), AllocID: a.ID,
				By: a.PreemptedByAllocation, Reason: firstNonEmpty(a.DesiredDescription, a.ClientDescription, a.ClientStatus),
				At: time.Unix(0, a.ModifyTime).UTC(),
			})
		}
	}
	byIndex := map[int]gpumeta.GPU{}
	migDomain := 0 // the first Domain after the NVLink domains: MIG parents' from there
	for _, g := range topo {
		byIndex[g.Index] = g
		migDomain = max(migDomain, g.Domain+1)
	}
	for _, in := range insts {
		g := drivers.GPU{
			ID: in.inst.ID, Index: in.index, Model: in.dev.Name, MemoryBytes: in.mem,
			Healthy: in.inst.Healthy && held[in.inst.ID] == "", HeldBy: held[in.inst.ID],
		}
		switch {
		case guessed:
		case in.parent >= 0:
			g.Domain, g.NUMA = migDomain+in.parent, max(byIndex[in.parent].NUMA, 0)
		default:
			t := byIndex[in.index]
			g.Domain, g.NUMA = t.Domain, max(t.NUMA, 0)
		}
		out.GPUs = append(out.GPUs, g)
	}
	sort.Slice(out.GPUs, func(i, j int) bool { return out.GPUs[i].Index < out.GPUs[j].Index })
	out.TopologyGuessed = guessed && len(out.GPUs) > 0
	return out, allocs, evicted
}

// Eviction is an allocation of berth's that Nomad ended without berth
// asking: evicted by Nomad's native preemption, or lost with its node.
type Eviction struct {
	Workspace schema.Ref
	Replica   int
	Node      string
	GPUs      []string
	AllocID   string
	// By is the allocation that preempted it ("" when lost).
	By     string
	Reason string
	At     time.Time
}

// Evictions returns the evictions the last Observe saw, sorted by
// workspace, replica, then time. berth preempts by stopping jobs, so any
// eviction means something else (Nomad's native preemption, a lost node)
// ended a workspace; berth doctor reports the first cause.
func (d *Driver) Evictions() []Eviction {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Eviction(nil), d.evicted...)
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// ownerOf returns berth's job of an allocation: from the job list, or,
// for a job registered after the list was read, from the job the
// allocation embeds. Nil: not berth's.
func ownerOf(a *api.Allocation, berth map[[2]string]*api.JobListStub) *api.JobListStub {
	if stub := berth[[2]string{a.Namespace, a.JobID}]; stub != nil {
		return stub
	}
	if a.Job != nil && isBerths(a.Job.Meta) {
		stop := a.Job.Stop != nil && *a.Job.Stop
		return &api.JobListStub{ID: a.JobID, Namespace: a.Namespace, Meta: a.Job.Meta, Stop: stop}
	}
	return nil
}

func buildAlloc(a *api.Allocation, stub *api.JobListStub, n *api.Node, hashes *jobHashes) drivers.Alloc {
	meta := stub.Meta
	if a.Job != nil && isBerths(a.Job.Meta) {
		meta = a.Job.Meta // the version the allocation runs
	}
	out := drivers.Alloc{
		Workspace: refOf(meta),
		Replica:   replicaOf(a),
		Node:      n.Name,
		GPUs:      gpuIDs(a),
		Revision:  meta[MetaRevision],
		Priority:  stub.Priority,
		StartedAt: time.Unix(0, a.CreateTime).UTC(),
		ID:        a.ID,
	}
	if a.Job != nil {
		if a.Job.Priority != nil {
			out.Priority = *a.Job.Priority
		}
		if want := meta[MetaJobHash]; want != "" {
			out.SpecHash = meta[MetaSpecHash] // jobs of an older berth carry another hash: unknown
		}
		if want := meta[MetaJobHash]; want != "" && hashes.of(a.Job) != want {
			out.Drift = "its Nomad job was changed outside berth (its task, or the node or GPUs it is pinned to, differ from what berth registered)"
		}
	}
	if ts := a.TaskStates[TaskName]; ts != nil && !ts.StartedAt.IsZero() {
		out.StartedAt = ts.StartedAt.UTC()
	}
	out.Addresses = addressesOf(a, n)
	r := allocResources(a)
	out.CPUMHz, out.MemoryBytes, out.DiskBytes, out.Cores = r.CPUMHz, r.MemoryBytes, r.DiskBytes, r.Cores
	switch {
	case a.DesiredStatus != "run" || stub.Stop:
		out.Phase = drivers.AllocStopping
	case a.ClientStatus == "running":
		out.Phase = drivers.AllocRunning
	default:
		out.Phase = drivers.AllocStarting
		out.Waiting = waitingOf(a)
	}
	return out
}

// missingVar is one Variable in the "Missing:" event of a template that
// Nomad's client holds a task for: nomad.var.block(PATH@NAMESPACE.REGION).
var missingVar = regexp.MustCompile(`nomad\.var\.block\(([^@)]+)@([^.)]+)\.[^)]*\)`)

// andMore ends a "Missing:" event that lists only the first few.
var andMore = regexp.MustCompile(`and (\d+) more$`)

// waitingOf says why Nomad's client holds a pending allocation's task,
// when its last event says so: a template (a secret) that reads a
// Variable Nomad reports missing. Nomad reports a Variable the job may
// not read as missing too, so the reason says both: a path the job reads
// without a policy (nomad/jobs/JOB and the paths Nomad grants its tasks
// by default) can only be missing; any other may be either, and the
// reason names the policy that lets the job read it. "" when the task is
// not held for a Variable.
func waitingOf(a *api.Allocation) string {
	ts := a.TaskStates[TaskName]
	if ts == nil || len(ts.Events) == 0 {
		return ""
	}
	last := ts.Events[len(ts.Events)-1]
	msg, ok := strings.CutPrefix(last.DisplayMessage, "Missing: ")
	if last.Type != "Template" || !ok {
		return ""
	}
	var parts []string
	for _, m := range missingVar.FindAllStringSubmatch(msg, -1) {
		path, ns := m[1], m[2]
		put := fmt.Sprintf("nomad var put -namespace %s %s KEY=VALUE", ns, path)
		if ownVariable(path, a.JobID, a.TaskGroup) {
			parts = append(parts, fmt.Sprintf("Nomad Variable %s (namespace %s) does not exist: write it (%s)", path, ns, put))
			continue
		}
		parts = append(parts, fmt.Sprintf("Nomad Variable %s (namespace %s) does not exist, or job %s may not read it: write it (%s), or bind the job a policy that reads it (nomad acl policy apply -namespace %s -job %s %s-secrets FILE, FILE granting namespace %q { variables { path %q { capabilities = [\"read\"] } } }, as examples/deploy/workspace-secrets.policy.hcl does)",
			path, ns, a.JobID, put, ns, a.JobID, a.JobID, ns, path))
	}
	if len(parts) == 0 {
		return "Nomad holds its task: its template is missing " + msg
	}
	if m := andMore.FindStringSubmatch(msg); m != nil {
		parts = append(parts, "and "+m[1]+" more Variables")
	}
	return "its task waits for its secrets: " + strings.Join(parts, "; ")
}

// ownVariable reports whether a task of group in job reads Variable path
// without a policy: Nomad grants every task nomad/jobs, nomad/jobs/JOB,
// nomad/jobs/JOB/GROUP and nomad/jobs/JOB/GROUP/TASK, and nothing below
// them.
func ownVariable(path, job, group string) bool {
	switch path {
	case "nomad/jobs", "nomad/jobs/" + job, "nomad/jobs/" + job + "/" + group, "nomad/jobs/" + job + "/" + group + "/" + TaskName:
		return true
	}
	return false
}

// addressesOf is where the allocation's ports are, as Nomad placed them:
// its group's port mappings (host IP and port), in the order the job
// lists its ports; a mapping without a host IP takes the node's HTTP
// address host.
func addressesOf(a *api.Allocation, n *api.Node) []drivers.Address {
	r := a.AllocatedResources
	if r == nil || len(r.Shared.Ports) == 0 {
		return nil
	}
	out := make([]drivers.Address, 0, len(r.Shared.Ports))
	for _, p := range r.Shared.Ports {
		host := p.HostIP
		if host == "" && n != nil {
			host, _, _ = strings.Cut(n.HTTPAddr, ":")
		}
		out = append(out, drivers.Address{Label: p.Label, Host: host, Port: p.Value})
	}
	return out
}

// allocResources is what an allocation holds on its node, as Nomad's
// scheduler counts it: its tasks' CPU shares (exclusive cores' shares
// included), exclusive cores and memory, and its group's ephemeral disk.
func allocResources(a *api.Allocation) drivers.Alloc {
	var out drivers.Alloc
	r := a.AllocatedResources
	if r == nil {
		return out
	}
	for _, t := range r.Tasks {
		if t == nil {
			continue
		}
		out.CPUMHz += t.Cpu.CpuShares
		out.Cores += len(t.Cpu.ReservedCores)
		out.MemoryBytes += t.Memory.MemoryMB * mib
	}
	out.DiskBytes = r.Shared.DiskMB * mib
	return out
}

// replicaOf reads the replica from the task group's meta, else from the
// group name "replica-N".
func replicaOf(a *api.Allocation) int {
	if a.Job != nil {
		for _, tg := range a.Job.TaskGroups {
			if tg.Name != nil && *tg.Name == a.TaskGroup {
				if r, err := strconv.Atoi(tg.Meta[MetaReplica]); err == nil {
					return r
				}
			}
		}
	}
	r, _ := strconv.Atoi(strings.TrimPrefix(a.TaskGroup, "replica-"))
	return r
}

// pinnedOf returns the GPUs berth pinned for the allocation's group.
func pinnedOf(a *api.Allocation) ([]string, bool) {
	if a.Job == nil {
		return nil, false
	}
	for _, tg := range a.Job.TaskGroups {
		if tg.Name != nil && *tg.Name == a.TaskGroup {
			v, ok := tg.Meta[MetaGPUs]
			return splitIDs(v), ok
		}
	}
	return nil, false
}

func gpuIDs(a *api.Allocation) []string {
	var out []string
	if a.AllocatedResources == nil {
		return nil
	}
	for _, t := range a.AllocatedResources.Tasks {
		for _, dev := range t.Devices {
			if dev.Type == "gpu" {
				out = append(out, dev.DeviceIDs...)
			}
		}
	}
	sort.Strings(out)
	return out
}

func terminal(a *api.Allocation) bool {
	switch a.ClientStatus {
	case "complete", "failed", "lost":
		return true
	}
	return false
}

func pciOf(in *api.NodeDevice) string {
	if in.Locality != nil {
		return strings.ToLower(in.Locality.PciBusID) + "/" + in.ID
	}
	return "~/" + in.ID
}

func unitBytes(u string) int64 {
	switch u {
	case "KiB":
		return 1 << 10
	case "MiB":
		return 1 << 20
	case "GiB":
		return 1 << 30
	case "TiB":
		return 1 << 40
	case "kB", "KB":
		return 1000
	case "MB":
		return 1000 * 1000
	case "GB":
		return 1000 * 1000 * 1000
	}
	return 1
}

// exitsOf reports the ended runs of berth's jobs that berth did not stop
// (Stop false): every allocation of the job's current version (by
// JobModifyIndex) is terminal, and none of the job is live. The job need
// not be dead yet: Nomad keeps it pending while it evaluates the failed
// allocation (seen on a v1.6.5 agent), and berth must not start it again
// meanwhile. When Nomad has garbage-collected the allocations of a dead
// job, the job summary says whether any failed. Each run is classified
// (endOf; drivers.EndClass says what each class leads to; endRank which
// replica's end names the run's).
//
// by holds, for each exit, the allocation whose end names the run (nil
// when Nomad no longer has any).
func exitsOf(data []nodeData, berth map[[2]string]*api.JobListStub) (out []drivers.Exit, by []*api.Allocation) {
	ended := map[[2]string][]*api.Allocation{}
	live, seen := map[[2]string]bool{}, map[[2]string]bool{}
	for _, nd := range data {
		for _, a := range nd.allocs {
			k := [2]string{a.Namespace, a.JobID}
			st := berth[k]
			seen[k] = true
			switch {
			case st == nil || st.Stop:
			case !terminal(a):
				live[k] = true
			case a.Job != nil && a.Job.JobModifyIndex != nil && *a.Job.JobModifyIndex == st.JobModifyIndex:
				ended[k] = append(ended[k], a)
			}
		}
	}
	byRef := map[schema.Ref]*api.Allocation{}
	for k, st := range berth {
		allocs := ended[k]
		if st.Stop || live[k] || (len(allocs) == 0 && (st.Status != "dead" || seen[k])) {
			continue // running, stopped, or no run of its current version ended
		}
		ex := drivers.Exit{Workspace: refOf(st.Meta), SpecHash: st.Meta[MetaSpecHash], Class: drivers.EndCompleted}
		allocs = latestPerReplica(allocs)
		for _, a := range allocs {
			if ts := a.TaskStates[TaskName]; ts != nil {
				ex.Restarts = max(ex.Restarts, int(ts.Restarts))
				if ts.FinishedAt.After(ex.At) {
					ex.At = ts.FinishedAt.UTC()
				}
			}
			class, code, msg := endOf(a)
			if endRank[class] > endRank[ex.Class] || byRef[ex.Workspace] == nil {
				ex.Class, ex.ExitCode, ex.Message, ex.Node = class, code, msg, a.NodeName
				byRef[ex.Workspace] = a
			}
			if ex.At.IsZero() && class == drivers.EndNodeFault && a.ModifyTime > 0 {
				ex.At = time.Unix(0, a.ModifyTime).UTC()
			}
		}
		if len(allocs) == 0 {
			ex.Message = "Nomad no longer has its allocations"
			if s := st.JobSummary; s != nil {
				for _, g := range s.Summary {
					if g.Failed > 0 {
						ex.Class = drivers.EndTaskFailed
					} else if g.Lost > 0 && ex.Class == drivers.EndCompleted {
						ex.Class = drivers.EndNodeFault
					}
				}
			}
		}
		ex.Failed = ex.Class != drivers.EndCompleted
		if ex.Class == drivers.EndCompleted && ex.Message == "" {
			ex.Message = "Exit Code: 0"
		}
		out = append(out, ex)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Workspace.Less(out[j].Workspace) })
	by = make([]*api.Allocation, len(out))
	for i := range out {
		by[i] = byRef[out[i].Workspace]
	}
	return out, by
}

// addStderr gives each exit of the task's own failure the last lines its
// task wrote to stderr, read once per allocation (d.stderr keeps them for
// the exits still reported, so an idle cycle reads none).
func (d *Driver) addStderr(ctx context.Context, exits []drivers.Exit, by []*api.Allocation) {
	d.mu.Lock()
	old := d.stderr
	d.mu.Unlock()
	keep := map[string]string{}
	for i := range exits {
		a := by[i]
		if exits[i].Class != drivers.EndTaskFailed || a == nil {
			continue
		}
		s, ok := old[a.ID]
		if !ok {
			s = d.stderrTail(ctx, a)
		}
		keep[a.ID], exits[i].Stderr = s, s
	}
	d.mu.Lock()
	d.stderr = keep
	d.mu.Unlock()
}

// latestPerReplica keeps, of each replica's (task group's) allocations,
// the one created last: its run is the replica's last; the others are
// earlier runs (a stop, a move, a version the event stream attributed to
// the job's current one). The result is sorted by ID.
func latestPerReplica(allocs []*api.Allocation) []*api.Allocation {
	last := map[string]*api.Allocation{}
	for _, a := range allocs {
		if l := last[a.TaskGroup]; l == nil || a.CreateIndex > l.CreateIndex {
			last[a.TaskGroup] = a
		}
	}
	out := make([]*api.Allocation, 0, len(last))
	for _, a := range last {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// endRank orders the classes of a run's replicas: the task's own
// failure outweighs the node's fault, which outweighs completion.
var endRank = map[drivers.EndClass]int{drivers.EndCompleted: 0, drivers.EndNodeFault: 1, drivers.EndTaskFailed: 2}

// endOf classifies how one ended allocation of berth's ended, with its
// exit code and Nomad's account:
//   - Nomad ended it (its node lost or drained, an eviction): the node's
//     fault;
//   - it failed and its task ran (it started, or exited with a code),
//     failed its validation, or was killed because a secret's template
//     failed (a key its Variable lacks): the spec's own, the task's
//     failure;
//   - it failed before its task ever started (a device that could not be
//     reserved, a driver or volume that failed, an image that would not
//     pull): the node's fault;
//   - else it completed.
func endOf(a *api.Allocation) (drivers.EndClass, int, string) {
	if a.ClientStatus == "lost" || a.DesiredStatus != "run" {
		return drivers.EndNodeFault, 0, firstNonEmpty(a.DesiredDescription, a.ClientDescription, "its allocation was "+a.ClientStatus)
	}
	ts := a.TaskStates[TaskName]
	if a.ClientStatus != "failed" && (ts == nil || !ts.Failed) {
		return drivers.EndCompleted, 0, ""
	}
	if ts == nil {
		return drivers.EndNodeFault, 0, firstNonEmpty(a.ClientDescription, "its allocation failed before its task started")
	}
	if msg, ok := templateFailure(ts); ok {
		return drivers.EndTaskFailed, 0, msg // the spec's: a secret's key its Variable lacks
	}
	code, msg := exitOf(ts)
	msg = firstNonEmpty(msg, a.ClientDescription)
	ran := !ts.StartedAt.IsZero()
	for _, e := range ts.Events {
		switch e.Type {
		case "Started", "Terminated", "Failed Validation":
			ran = true
		}
	}
	if ran {
		return drivers.EndTaskFailed, code, msg
	}
	return drivers.EndNodeFault, 0, firstNonEmpty(msg, "its task failed before it started")
}

// templateFailure is why a task's template failed to render, when
// Nomad killed it for that (a Killing event, "Template failed: …"):
// berth's templates are its secrets, and one fails only for a key its
// Variable does not have (the template's own message, "berth: Nomad
// Variable … has no key …"), the spec's mistake. A Variable that is
// missing or may not be read holds the task instead (waitingOf).
func templateFailure(ts *api.TaskState) (string, bool) {
	for _, e := range ts.Events {
		m, ok := strings.CutPrefix(e.DisplayMessage, "Template failed: ")
		if e.Type != api.TaskKilling || !ok {
			continue
		}
		if i := strings.LastIndex(m, "berth: "); i >= 0 {
			m = strings.TrimPrefix(m[i:], "berth: ")
		}
		return "its secrets could not be rendered: " + m + "; fix spec.task.secrets or the Variable", true
	}
	return "", false
}

// exitOf finds the exit code and Nomad's message in a task's events: the
// last Terminated event's code, and the last event that says why it
// stopped ("Exit Code: 3", "Task hook failed: …").
func exitOf(ts *api.TaskState) (int, string) {
	code, msg := 0, ""
	for _, e := range ts.Events {
		switch e.Type {
		case "Terminated":
			code = e.ExitCode
			msg = firstNonEmpty(e.DisplayMessage, fmt.Sprintf("Exit Code: %d", e.ExitCode))
		case "Driver Failure", "Task hook failed", "Failed Validation", "Setup Failure":
			msg = firstNonEmpty(e.DisplayMessage, e.DriverError, e.SetupError, e.Type)
		}
	}
	return code, msg
}
