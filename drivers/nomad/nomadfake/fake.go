package nomadfake

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"
)

// GPU is one device instance of a fake node.
type GPU struct {
	ID       string // Nomad device instance ID (the NVML UUID on real nodes)
	PCIBusID string
	Healthy  bool
	// Model puts the instance in a device group of that name (with
	// MemoryMiB), as the NVIDIA plugin groups a node's devices by model
	// ("NVIDIA A100-SXM4-80GB MIG 1g.10gb" for MIG instances); empty: the
	// node's GPUModel. The fake's scheduler does not tell groups apart:
	// only Observe does.
	Model     string
	MemoryMiB int64
}

// Node describes a fake client node.
type Node struct {
	ID, Name string
	Pool     string // default "default"
	// Datacenter (default "dc1") and Class are what placement
	// constraints match, with Meta.
	Datacenter, Class string
	// Down marks the node "down"; Ineligible marks it ineligible; Drain
	// marks it draining.
	Down, Ineligible, Drain bool
	CPUShares               int64 // default 4490, as recorded
	MemoryMB                int64 // default 24105, as recorded
	DiskMB                  int64 // default 76790, as recorded
	Cores                   int   // TotalCpuCores, all reservable; default 2, as recorded
	// Drivers are the task drivers detected and healthy (default docker,
	// exec and raw_exec); HostVolumes the client's host volumes (none).
	Drivers      []string
	HostVolumes  []string
	GPUModel     string
	GPUMemoryMiB int64
	GPUs         []GPU
	// Meta is the node's static metadata (the client config's meta block).
	Meta map[string]string
}

type node struct {
	n       *api.Node
	static  map[string]string
	dynamic map[string]string
}

type job struct {
	j *api.Job
	// spec is the job as submitted, re-encoded: the unchanged-spec check.
	spec []byte
	// groups holds each group's submitted JSON, to tell in-place from
	// destructive updates.
	groups map[string][]byte
}

type key struct{ ns, id string }

// Server is a fake Nomad agent (server and client in one, like -dev). It
// is safe for concurrent use. The zero value is not usable; call New.
type Server struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every write
	index   uint64
	streams int64 // open event streams (stream.go)
	// The event log (stream.go): its batches, each object's JSON as last
	// logged, and the index of the last flush.
	log     []logBatch
	logged  map[string]string
	flushed uint64
	// forgot: jobs whose older versions /v1/job/:id/versions no longer
	// lists (ForgetVersions), as Nomad keeps only a job's last few.
	forgot map[key]bool
	seq    uint64
	now    func() time.Time

	nodes      map[string]*node
	namespaces map[string]*api.Namespace
	nsDeleted  uint64 // the index of the last namespace deleted
	jobs       map[key]*job
	allocs     map[string]*api.Allocation
	evals      map[string]*api.Evaluation
	vars       map[key]*api.Variable
	sched      api.SchedulerConfiguration

	// use is each GPU's utilization in percent, by node ID and GPU ID,
	// as /v1/client/stats reports it (SetGPUUse; 0 until set).
	use map[[2]string]float64

	// Token, when set, is the only ACL token accepted (403 otherwise).
	token string
	// failures maps "METHOD path" to queued injected failures.
	failures map[string][]failure
	requests []string
}

type failure struct {
	status int
	body   string
}

// Option configures a Server.
type Option func(*Server)

// WithClock sets the server's clock (default time.Now).
func WithClock(now func() time.Time) Option { return func(s *Server) { s.now = now } }

// WithToken makes the server accept only this X-Nomad-Token.
func WithToken(token string) Option { return func(s *Server) { s.token = token } }

// New returns a fake with the default namespace and the default scheduler
// configuration of Nomad 1.6 (batch and service preemption off).
func New(opts ...Option) *Server {
	s := &Server{
		changed:    make(chan struct{}),
		index:      10,
		now:        time.Now,
		nodes:      map[string]*node{},
		namespaces: map[string]*api.Namespace{},
		jobs:       map[key]*job{},
		allocs:     map[string]*api.Allocation{},
		evals:      map[string]*api.Evaluation{},
		vars:       map[key]*api.Variable{},
		failures:   map[string][]failure{},
		use:        map[[2]string]float64{},
	}
	for _, o := range opts {
		o(s)
	}
	s.namespaces["default"] = &api.Namespace{Name: "default", Description: "Default shared namespace", CreateIndex: 1, ModifyIndex: 1}
	s.sched = api.SchedulerConfiguration{
		SchedulerAlgorithm: api.SchedulerAlgorithmBinpack,
		PreemptionConfig:   api.PreemptionConfig{SystemSchedulerEnabled: true},
		CreateIndex:        5, ModifyIndex: 5,
	}
	return s
}

// Start serves s on a new httptest server, closed when the test ends.
func (s *Server) Start(t interface{ Cleanup(func()) }) *httptest.Server {
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts
}

// AddNode registers a ready client node.
func (s *Server) AddNode(spec Node) {
	s.mu.Lock()
	defer s.mu.Unlock()
	idx := s.bump()
	if spec.Pool == "" {
		spec.Pool = "default"
	}
	if spec.CPUShares == 0 {
		spec.CPUShares = 4490
	}
	if spec.MemoryMB == 0 {
		spec.MemoryMB = 24105
	}
	if spec.DiskMB == 0 {
		spec.DiskMB = 76790
	}
	if spec.Cores == 0 {
		spec.Cores = 2
	}
	if spec.Drivers == nil {
		spec.Drivers = []string{"docker", "exec", "raw_exec"}
	}
	if spec.GPUModel == "" {
		spec.GPUModel = "H100-fake"
	}
	if spec.GPUMemoryMiB == 0 {
		spec.GPUMemoryMiB = 81559
	}
	status, elig := "ready", "eligible"
	if spec.Down {
		status = "down"
	}
	if spec.Ineligible || spec.Drain {
		elig = "ineligible"
	}
	n := &api.Node{
		ID: spec.ID, Name: spec.Name, Datacenter: cmp.Or(spec.Datacenter, "dc1"), NodePool: spec.Pool,
		NodeClass: spec.Class,
		Status:    status, SchedulingEligibility: elig, Drain: spec.Drain,
		Attributes: map[string]string{"unique.hostname": spec.Name, "nomad.version": "1.6.5"},
		NodeResources: &api.NodeResources{
			Cpu:    api.NodeCpuResources{CpuShares: spec.CPUShares, TotalCpuCores: uint16(spec.Cores)},
			Memory: api.NodeMemoryResources{MemoryMB: spec.MemoryMB},
			Disk:   api.NodeDiskResources{DiskMB: spec.DiskMB},
		},
		ReservedResources: &api.NodeReservedResources{},
		Drivers:           map[string]*api.DriverInfo{},
		HostVolumes:       map[string]*api.HostVolumeInfo{},
		CreateIndex:       idx, ModifyIndex: idx,
	}
	for c := range spec.Cores {
		n.NodeResources.Cpu.ReservableCpuCores = append(n.NodeResources.Cpu.ReservableCpuCores, uint16(c))
	}
	for _, d := range spec.Drivers {
		n.Drivers[d] = &api.DriverInfo{Detected: true, Healthy: true}
	}
	for _, v := range spec.HostVolumes {
		n.HostVolumes[v] = &api.HostVolumeInfo{Path: "/srv/" + v}
	}
	groups := map[string]*api.NodeDeviceResource{} // by model, in order of first instance
	for _, g := range spec.GPUs {
		model, mem := cmp.Or(g.Model, spec.GPUModel), spec.GPUMemoryMiB
		if g.Model != "" {
			mem = g.MemoryMiB
		}
		dev := groups[model]
		if dev == nil {
			dev = &api.NodeDeviceResource{
				Vendor: "nvidia", Type: "gpu", Name: model,
				Attributes: map[string]*api.Attribute{"memory": {IntVal: &mem, Unit: "MiB"}},
			}
			groups[model] = dev
			n.NodeResources.Devices = append(n.NodeResources.Devices, dev)
		}
		inst := &api.NodeDevice{ID: g.ID, Healthy: g.Healthy}
		if g.PCIBusID != "" {
			inst.Locality = &api.NodeDeviceLocality{PciBusID: g.PCIBusID}
		}
		dev.Instances = append(dev.Instances, inst)
	}
	nd := &node{n: n, static: copyMap(spec.Meta), dynamic: map[string]string{}}
	nd.merge()
	s.nodes[spec.ID] = nd
}

// SetNodeStatus changes a node's status ("ready", "down") and eligibility.
func (s *Server) SetNodeStatus(id, status string, eligible bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.nodes[id]
	if n == nil {
		return
	}
	n.n.Status = status
	n.n.SchedulingEligibility = map[bool]string{true: "eligible", false: "ineligible"}[eligible]
	n.n.ModifyIndex = s.bump()
}

// SetPreemption sets native preemption for batch and service jobs, as an
// operator would.
func (s *Server) SetPreemption(batch, service bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sched.PreemptionConfig.BatchSchedulerEnabled = batch
	s.sched.PreemptionConfig.ServiceSchedulerEnabled = service
	s.sched.ModifyIndex = s.bump()
}

// Evict ends an allocation as Nomad's native preemption does (recording
// 52): DesiredStatus "evict", ClientStatus "complete", the preemptor named.
// The job stays registered, as Nomad leaves it.
func (s *Server) Evict(allocID, byAllocID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.allocs[allocID]
	if a == nil {
		return
	}
	idx := s.bump()
	a.DesiredStatus, a.DesiredDescription, a.PreemptedByAllocation = "evict", "Preempted by alloc ID "+byAllocID, byAllocID
	a.ModifyIndex = idx
	s.finish(a, "complete", "All tasks have completed")
	// A preemption eval, then a blocked one for the queued alloc
	// (recordings 56, 57); the blocked eval carries no JobModifyIndex.
	pre := s.newEval(a.Job, "preemption", idx)
	b := s.newEval(a.Job, "queued-allocs", idx)
	b.Status, b.StatusDescription, b.PreviousEval, b.JobModifyIndex = "blocked", "created to place remaining allocations", pre.ID, 0
	b.FailedTGAllocs = map[string]*api.AllocationMetric{a.TaskGroup: {NodesEvaluated: len(s.nodes)}}
	pre.BlockedEval = b.ID
	s.updateJobStatus(a.Job)
}

// Exit makes the running allocations of a job end on their own, as
// their task exiting with code does on a v1.6.5 agent: client status
// complete (code 0) or failed, a Terminated event with the exit code
// ("Exit Code: N"), then Nomad's "Not Restarting" for a failure; the job
// turns dead, Stop still false.
func (s *Server) Exit(ns, jobID string, code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	idx := s.bump()
	for _, id := range sortedKeys(s.allocs) {
		a := s.allocs[id]
		if a.Namespace != ns || a.JobID != jobID || terminal(a) || a.DesiredStatus != "run" {
			continue
		}
		status, desc := "complete", "All tasks have completed"
		if code != 0 {
			status, desc = "failed", "Failed tasks"
		}
		a.ModifyIndex = idx
		s.finish(a, status, desc)
		t := s.now().UnixNano()
		for _, st := range a.TaskStates {
			st.Failed = code != 0
			st.Events = append(st.Events, &api.TaskEvent{Type: "Terminated", ExitCode: code, DisplayMessage: fmt.Sprintf("Exit Code: %d", code), Time: t})
			if code != 0 {
				st.Events = append(st.Events, &api.TaskEvent{Type: "Not Restarting", DisplayMessage: "Policy allows no restarts", Time: t})
			}
		}
	}
	if jb := s.jobs[key{ns, jobID}]; jb != nil {
		s.updateJobStatus(jb.j)
	}
}

// FailStart makes the live allocations of a job fail before their task
// starts, as a client does when it cannot set the allocation up (msg:
// "failed to reserve device …", a driver or volume failure): client
// status failed, a "Setup Failure" event with msg, no start; the job
// turns dead, Stop still false.
func (s *Server) FailStart(ns, jobID, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	idx := s.bump()
	t := s.now()
	for _, id := range sortedKeys(s.allocs) {
		a := s.allocs[id]
		if a.Namespace != ns || a.JobID != jobID || terminal(a) || a.DesiredStatus != "run" {
			continue
		}
		a.ModifyIndex = idx
		a.ClientStatus, a.ClientDescription = "failed", "Failed tasks"
		for _, st := range a.TaskStates {
			st.State, st.Failed, st.StartedAt, st.FinishedAt = "dead", true, time.Time{}, t
			st.Events = append(st.Events, &api.TaskEvent{Type: "Setup Failure", DisplayMessage: msg, SetupError: msg, Time: t.UnixNano()})
		}
	}
	if jb := s.jobs[key{ns, jobID}]; jb != nil {
		s.updateJobStatus(jb.j)
	}
}

// Fail makes the next request matching method and path prefix answer
// status with a plain-text body, once per call.
func (s *Server) Fail(method, pathPrefix string, status int, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := method + " " + pathPrefix
	s.failures[k] = append(s.failures[k], failure{status, body})
}

// Requests returns "METHOD path?query" of every request so far, in order.
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

// Settle lets the cluster catch up, as time would: pending allocations
// start, stopping allocations finish, and blocked evaluations are retried
// with the capacity that freed up.
func (s *Server) Settle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := false
	for _, id := range sortedKeys(s.allocs) {
		a := s.allocs[id]
		switch {
		case terminal(a):
		case a.DesiredStatus != "run":
			s.finish(a, "complete", "All tasks have completed")
			changed = true
		case a.ClientStatus == "pending":
			if held, evented := s.holdForVariables(a); held {
				changed = changed || evented
				continue
			}
			s.run(a)
			changed = true
		}
	}
	if changed {
		s.bump()
	}
	s.unblock()
	statusChanged := false
	for _, k := range sortedJobKeys(s.jobs) {
		j := s.jobs[k].j
		before := j.Status
		s.updateJobStatus(j)
		statusChanged = statusChanged || before == nil || *j.Status != *before
	}
	if statusChanged {
		s.bump() // a job's status is state too: its watchers hear of it
	}
}

// nomadVarPath finds the Variable paths a template reads with nomadVar.
var nomadVarPath = regexp.MustCompile(`nomadVar "([^"@]+)"`)

// holdForVariables keeps a pending allocation from starting, as a client
// does, while a template of its task reads a Variable the namespace does
// not hold: it adds the event Nomad's client adds ("Template", "Missing:
// nomad.var.block(PATH@NS.global)", the paths sorted) once per set of
// missing paths, and reports whether it held it and whether it added the
// event. ACLs are not modelled: a Variable that exists is readable.
func (s *Server) holdForVariables(a *api.Allocation) (held, evented bool) {
	if a.Job == nil {
		return false, false
	}
	for _, tg := range a.Job.TaskGroups {
		if tg.Name == nil || *tg.Name != a.TaskGroup {
			continue
		}
		for _, t := range tg.Tasks {
			var missing []string
			for _, tm := range t.Templates {
				if tm.EmbeddedTmpl == nil {
					continue
				}
				for _, m := range nomadVarPath.FindAllStringSubmatch(*tm.EmbeddedTmpl, -1) {
					if s.vars[key{a.Namespace, m[1]}] == nil {
						missing = append(missing, "nomad.var.block("+m[1]+"@"+a.Namespace+".global)")
					}
				}
			}
			st := a.TaskStates[t.Name]
			if len(missing) == 0 || st == nil {
				continue
			}
			held = true
			sort.Strings(missing)
			msg := "Missing: " + strings.Join(slices.Compact(missing), ", ")
			if last := st.Events[len(st.Events)-1]; last.Type != "Template" || last.DisplayMessage != msg {
				st.Events = append(st.Events, &api.TaskEvent{Type: "Template", DisplayMessage: msg, Time: s.now().UnixNano()})
				evented = true
			}
		}
	}
	return held, evented
}

// Alloc returns a copy of the allocation id, or nil.
func (s *Server) Alloc(id string) *api.Allocation {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.allocs[id]
	if a == nil {
		return nil
	}
	c := *a
	return &c
}

// AllocsOf returns copies of the job's allocations sorted by CreateIndex.
func (s *Server) AllocsOf(ns, jobID string) []*api.Allocation {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*api.Allocation
	for _, id := range sortedKeys(s.allocs) {
		a := s.allocs[id]
		if a.Namespace == ns && a.JobID == jobID {
			c := *a
			out = append(out, &c)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreateIndex < out[j].CreateIndex })
	return out
}

// RegisterForeignJob places a job berth does not own, holding gpus on
// nodeID: something berth must see as busy and never touch.
func (s *Server) RegisterForeignJob(ns, id, nodeID string, gpus []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	idx := s.bump()
	pr := 50
	typ := "service"
	j := &api.Job{ID: &id, Name: &id, Namespace: &ns, Type: &typ, Priority: &pr}
	j.TaskGroups = []*api.TaskGroup{{Name: ptr("web"), Tasks: []*api.Task{{Name: "main", Driver: "docker"}}}}
	s.setJobIndexes(j, idx, idx, 0)
	s.jobs[key{ns, id}] = &job{j: j, groups: map[string][]byte{}}
	n := s.nodes[nodeID]
	a := s.newAlloc(j, j.TaskGroups[0], 0, n, append([]string(nil), gpus...), idx)
	s.run(a)
	s.updateJobStatus(j)
}

func (s *Server) bump() uint64 {
	s.index++
	close(s.changed)
	s.changed = make(chan struct{})
	return s.index
}

func (s *Server) newID() string {
	s.seq++
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", s.seq, s.seq)
}

func (n *node) merge() {
	m := copyMap(n.static)
	for k, v := range n.dynamic {
		m[k] = v
	}
	n.n.Meta = m
}

// ServeHTTP answers the Nomad HTTP API subset berth uses.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r.Method+" "+r.URL.RequestURI())
	if s.token != "" && r.Header.Get("X-Nomad-Token") != s.token {
		s.mu.Unlock()
		text(w, http.StatusForbidden, "Permission denied")
		return
	}
	for k, fs := range s.failures {
		m, p, _ := strings.Cut(k, " ")
		if m == r.Method && strings.HasPrefix(r.URL.Path, p) && len(fs) > 0 {
			s.failures[k] = fs[1:]
			s.mu.Unlock()
			text(w, fs[0].status, fs[0].body)
			return
		}
	}
	s.mu.Unlock()
	if r.Method == http.MethodGet && r.URL.Path == "/v1/event/stream" {
		s.stream(w, r)
		return
	}
	if r.Method == http.MethodGet {
		s.block(r)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.route(w, r)
}

// block implements blocking queries: ?index=N waits until the state
// index passes N or ?wait= (default 5 minutes) runs out.
//
// The namespaces' list blocks on the namespaces' own index, as Nomad's
// blocks on the table it reads: a write elsewhere (a Variable's, a job's)
// does not answer it.
func (s *Server) block(r *http.Request) {
	q := r.URL.Query()
	want, err := strconv.ParseUint(q.Get("index"), 10, 64)
	if err != nil || want == 0 {
		return
	}
	current := func() uint64 { return s.index }
	if r.URL.Path == "/v1/namespaces" {
		current = s.namespacesIndex
	}
	wait := 5 * time.Minute
	if d, err := time.ParseDuration(q.Get("wait")); err == nil && d > 0 {
		wait = d
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		s.mu.Lock()
		idx, ch := current(), s.changed
		s.mu.Unlock()
		if idx > want {
			return
		}
		select {
		case <-ch:
		case <-timer.C:
			return
		case <-r.Context().Done():
			return
		}
	}
}

func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	p := strings.TrimPrefix(r.URL.Path, "/v1/")
	q := r.URL.Query()
	ns := q.Get("namespace")
	if ns == "" {
		ns = "default"
	}
	seg := strings.Split(p, "/")
	switch {
	case p == "agent/self" && r.Method == "GET":
		writeJSON(w, 200, 0, map[string]any{"config": map[string]any{"Version": map[string]any{"Version": "1.6.5"}}})
	case p == "status/leader":
		writeJSON(w, 200, 0, "127.0.0.1:4647")
	case p == "nodes" && r.Method == "GET":
		s.listNodes(w, q.Get("filter"))
	case seg[0] == "node" && len(seg) == 2 && r.Method == "GET":
		s.getNode(w, seg[1])
	case seg[0] == "node" && len(seg) == 3 && seg[2] == "allocations" && r.Method == "GET":
		s.nodeAllocs(w, seg[1])
	case p == "client/stats" && r.Method == "GET":
		s.clientStats(w, q.Get("node_id"))
	case p == "client/metadata":
		s.clientMeta(w, r)
	case p == "namespaces" && r.Method == "GET":
		s.listNamespaces(w)
	case seg[0] == "namespace":
		s.namespace(w, r, seg)
	case p == "operator/scheduler/configuration":
		s.schedConfig(w, r)
	case p == "validate/job" && (r.Method == "PUT" || r.Method == "POST"):
		s.validateJob(w, r)
	case p == "jobs" && r.Method == "GET":
		s.listJobs(w, r, ns)
	case (p == "jobs" && (r.Method == "PUT" || r.Method == "POST")) || (seg[0] == "job" && len(seg) == 2 && (r.Method == "PUT" || r.Method == "POST")):
		s.register(w, r, ns)
	case seg[0] == "job" && len(seg) == 2 && r.Method == "GET":
		s.getJob(w, ns, seg[1])
	case seg[0] == "job" && len(seg) == 2 && r.Method == "DELETE":
		s.deregister(w, ns, seg[1], q.Get("purge") == "true")
	case seg[0] == "job" && len(seg) == 3 && seg[2] == "allocations":
		s.jobAllocs(w, ns, seg[1])
	case seg[0] == "job" && len(seg) == 3 && seg[2] == "evaluations":
		s.jobEvals(w, ns, seg[1])
	case seg[0] == "job" && len(seg) == 3 && seg[2] == "versions":
		s.jobVersions(w, ns, seg[1])
	case seg[0] == "job" && len(seg) == 3 && seg[2] == "summary":
		s.jobSummary(w, ns, seg[1])
	case p == "allocations" && r.Method == "GET":
		s.listAllocs(w, ns, q.Get("resources") == "true")
	case seg[0] == "allocation" && len(seg) == 2 && r.Method == "GET":
		if a := s.allocs[seg[1]]; a != nil {
			writeJSON(w, 200, s.index, a)
		} else {
			text(w, 404, "alloc not found", s.index)
		}
	case seg[0] == "allocation" && len(seg) == 3 && seg[2] == "stop":
		s.stopAlloc(w, seg[1])
	case seg[0] == "evaluation" && len(seg) == 2:
		if e := s.evals[seg[1]]; e != nil {
			writeJSON(w, 200, s.index, e)
		} else {
			text(w, 404, "eval not found", s.index)
		}
	case p == "vars" && r.Method == "GET":
		s.listVars(w, r, ns)
	case seg[0] == "var" && len(seg) > 1:
		s.variable(w, r, ns, strings.TrimPrefix(p, "var/"))
	default:
		text(w, 404, "Invalid URL path")
	}
}

// --- nodes ---

func (s *Server) listNodes(w http.ResponseWriter, filter string) {
	match, err := parseFilter(filter)
	if err != nil {
		text(w, 400, err.Error())
		return
	}
	var out []*api.NodeListStub
	for _, id := range sortedKeys(s.nodes) {
		n := s.nodes[id].n
		if !match(n.Meta) {
			continue
		}
		out = append(out, &api.NodeListStub{
			Address: "127.0.0.1", ID: n.ID, Datacenter: n.Datacenter, Name: n.Name, NodePool: n.NodePool,
			Drain: n.Drain, SchedulingEligibility: n.SchedulingEligibility, Status: n.Status,
			Version: "1.6.5", CreateIndex: n.CreateIndex, ModifyIndex: n.ModifyIndex,
		})
	}
	writeJSON(w, 200, s.index, orEmpty(out))
}

func (s *Server) getNode(w http.ResponseWriter, id string) {
	n := s.nodes[id]
	if n == nil {
		text(w, 404, "node not found", s.index)
		return
	}
	writeJSON(w, 200, s.index, n.n)
}

func (s *Server) nodeAllocs(w http.ResponseWriter, id string) {
	out := []*api.Allocation{}
	for _, aid := range sortedKeys(s.allocs) {
		if a := s.allocs[aid]; a.NodeID == id {
			out = append(out, a)
		}
	}
	writeJSON(w, 200, s.index, out)
}

func (s *Server) clientMeta(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case "GET":
		n := s.nodes[r.URL.Query().Get("node_id")]
		if n == nil {
			text(w, 404, "Unknown node")
			return
		}
		writeJSON(w, 200, 0, metaResponse(n))
	case "POST", "PUT":
		var req api.NodeMetaApplyRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			text(w, 400, err.Error())
			return
		}
		n := s.nodes[req.NodeID]
		if n == nil {
			text(w, 404, "Unknown node")
			return
		}
		for k := range req.Meta { // as Nomad validates a metadata write
			if !DottedIdentifier(k) {
				text(w, 400, fmt.Sprintf("%q is invalid; metadata keys must be valid dotted hcl identifiers", k))
				return
			}
		}
		for k, v := range req.Meta {
			if v == nil {
				delete(n.dynamic, k)
			} else {
				n.dynamic[k] = *v
			}
		}
		n.merge()
		n.n.ModifyIndex = s.bump()
		writeJSON(w, 200, 0, metaResponse(n))
	default:
		text(w, 405, "Invalid method")
	}
}

// DottedIdentifier reports whether Nomad takes key as a dynamic node
// metadata key: dot-separated parts, each an HCL identifier (a letter or
// _, then letters, digits, _ and -; ASCII here, Unicode letters in
// Nomad).
func DottedIdentifier(key string) bool {
	for _, part := range strings.Split(key, ".") {
		if part == "" {
			return false
		}
		for i, c := range part {
			letter := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
			if !letter && (i == 0 || !(c == '-' || (c >= '0' && c <= '9'))) {
				return false
			}
		}
	}
	return true
}

// SetGPUUse sets the utilization (percent) a GPU of a node reports in
// the node's stats, as `echo 85 > DIR/gpus-K/GPU-…` does on the kit.
func (s *Server) SetGPUUse(nodeID, gpuID string, percent float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.use[[2]string{nodeID, gpuID}] = percent
}

// clientStats answers GET /v1/client/stats?node_id=ID as a v1.6.5 agent
// with the NVIDIA plugin does: the host's figures and, per device group,
// each instance's stats (the plugin's eleven: "GPU utilization",
// "Memory state", …, and the time measured); MIG instances report none. A node that is not ready has no
// path (404), an unknown one neither.
func (s *Server) clientStats(w http.ResponseWriter, id string) {
	n := s.nodes[id]
	switch {
	case n == nil:
		text(w, 404, "Unknown node "+id)
		return
	case n.n.Status != "ready":
		text(w, 404, "No path to node")
		return
	}
	now := s.now()
	type statValue struct {
		IntNumeratorVal   *int64   `json:",omitempty"`
		IntDenominatorVal *int64   `json:",omitempty"`
		Unit              string   `json:",omitempty"`
		Desc              string   `json:",omitempty"`
		FloatNumeratorVal *float64 `json:",omitempty"`
	}
	type stats struct {
		Attributes map[string]*statValue
		Nested     map[string]any
	}
	type instance struct {
		Stats     *stats
		Summary   *statValue
		Timestamp time.Time
	}
	type group struct {
		Vendor, Type, Name string
		InstanceStats      map[string]*instance
	}
	groups := []*group{}
	if r := n.n.NodeResources; r != nil {
		for _, dev := range r.Devices {
			if dev.Type != "gpu" || strings.Contains(dev.Name, " MIG ") {
				continue
			}
			g := &group{Vendor: dev.Vendor, Type: dev.Type, Name: dev.Name, InstanceStats: map[string]*instance{}}
			var total int64
			if a := dev.Attributes["memory"]; a != nil && a.IntVal != nil {
				total = *a.IntVal
			}
			for _, in := range dev.Instances {
				if strings.HasPrefix(in.ID, "MIG-") {
					continue
				}
				pct := int64(s.use[[2]string{id, in.ID}])
				mem := &statValue{IntNumeratorVal: ptr(int64(0)), IntDenominatorVal: ptr(total), Unit: "MiB", Desc: "UsedMemory / TotalMemory"}
				// Every attribute the NVIDIA plugin reports, so that an
				// answer is the size of a real node's.
				g.InstanceStats[in.ID] = &instance{Summary: mem, Timestamp: now.UTC(), Stats: &stats{Nested: map[string]any{}, Attributes: map[string]*statValue{
					"GPU utilization":     {IntNumeratorVal: &pct, Unit: "%", Desc: "Percent of time over the past sample period during which one or more kernels were executing on the GPU."},
					"Memory state":        mem,
					"Power usage":         {IntNumeratorVal: ptr(int64(70)), IntDenominatorVal: ptr(int64(700)), Unit: "W", Desc: "Power usage for this GPU in watts and its associated circuitry (e.g. memory) / Maximum GPU Power"},
					"Memory utilization":  {IntNumeratorVal: ptr(int64(0)), Unit: "%", Desc: "Percentage of bandwidth used during the past sample period"},
					"Encoder utilization": {IntNumeratorVal: ptr(int64(0)), Unit: "%", Desc: "Percent of time over the past sample period during which GPU Encoder was used"},
					"Decoder utilization": {IntNumeratorVal: ptr(int64(0)), Unit: "%", Desc: "Percent of time over the past sample period during which GPU Decoder was used"},
					"Temperature":         {IntNumeratorVal: ptr(int64(34)), Unit: "C", Desc: "Temperature of the Unit"},
					"BAR1 buffer state":   {IntNumeratorVal: ptr(int64(2)), IntDenominatorVal: ptr(int64(131072)), Unit: "MiB", Desc: "UsedBAR1 / TotalBAR1"},
					"ECC L1 errors":       {IntNumeratorVal: ptr(int64(0)), Unit: "#", Desc: "Requested L1Cache error counter for the device"},
					"ECC L2 errors":       {IntNumeratorVal: ptr(int64(0)), Unit: "#", Desc: "Requested L2Cache error counter for the device"},
					"ECC memory errors":   {IntNumeratorVal: ptr(int64(0)), Unit: "#", Desc: "Requested memory error counter for the device"},
				}}}
			}
			if len(g.InstanceStats) > 0 {
				groups = append(groups, g)
			}
		}
	}
	writeJSON(w, 200, 0, map[string]any{
		"CPU": []any{}, "CPUTicksConsumed": 0, "DeviceStats": groups, "DiskStats": []any{},
		"Memory":    map[string]any{"Available": 24765833216, "Free": 24221057024, "Total": 25276166144, "Used": 186814464},
		"Timestamp": now.UnixNano(), "Uptime": 56954,
	})
}

func metaResponse(n *node) map[string]any {
	return map[string]any{"Dynamic": n.dynamic, "Meta": n.n.Meta, "Static": n.static}
}

// --- namespaces ---

func (s *Server) listNamespaces(w http.ResponseWriter) {
	var out []*api.Namespace
	for _, name := range sortedKeys(s.namespaces) {
		out = append(out, s.namespaces[name])
	}
	writeJSON(w, 200, s.namespacesIndex(), out)
}

// namespacesIndex is the index of the namespaces' last change (a delete
// counts), with s.mu held.
func (s *Server) namespacesIndex() uint64 {
	idx := s.nsDeleted
	for _, n := range s.namespaces {
		idx = max(idx, n.ModifyIndex)
	}
	return idx
}

func (s *Server) namespace(w http.ResponseWriter, r *http.Request, seg []string) {
	switch {
	case r.Method == "GET" && len(seg) == 2:
		if n := s.namespaces[seg[1]]; n != nil {
			writeJSON(w, 200, s.index, n)
		} else {
			text(w, 404, "Namespace not found", s.index)
		}
	case r.Method == "PUT" || r.Method == "POST":
		var n api.Namespace
		if err := json.NewDecoder(r.Body).Decode(&n); err != nil || n.Name == "" {
			text(w, 400, "Namespace name must be set")
			return
		}
		idx := s.bump()
		if old := s.namespaces[n.Name]; old != nil {
			n.CreateIndex = old.CreateIndex
		} else {
			n.CreateIndex = idx
		}
		n.ModifyIndex = idx
		s.namespaces[n.Name] = &n
		writeRaw(w, 200, idx, "application/json", "")
	case r.Method == "DELETE" && len(seg) == 2:
		name := seg[1]
		if name == "default" {
			text(w, 500, "1 error occurred:\n\t* can not delete default namespace\n\n")
			return
		}
		for k, j := range s.jobs {
			if k.ns == name && *j.j.Status != "dead" {
				text(w, 500, fmt.Sprintf("1 error occurred:\n\t* namespace %q has non-terminal jobs in regions: [global]\n\n", name))
				return
			}
		}
		idx := s.bump()
		delete(s.namespaces, name)
		s.nsDeleted = idx
		writeRaw(w, 200, idx, "application/json", "")
	default:
		text(w, 405, "Invalid method")
	}
}

// --- scheduler configuration ---

func (s *Server) schedConfig(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case "GET":
		c := s.sched
		writeJSON(w, 200, s.sched.ModifyIndex, map[string]any{
			"SchedulerConfig": &c, "Index": s.sched.ModifyIndex, "KnownLeader": true, "LastContact": 0, "NextToken": "",
		})
	case "PUT", "POST":
		var c api.SchedulerConfiguration
		if err := json.NewDecoder(r.Body).Decode(&c); err != nil {
			text(w, 400, err.Error())
			return
		}
		idx := s.bump()
		if cas := r.URL.Query().Get("cas"); cas != "" {
			want, err := strconv.ParseUint(cas, 10, 64)
			if err != nil {
				text(w, 400, "Error parsing cas value: "+err.Error())
				return
			}
			if want != s.sched.ModifyIndex {
				// A stale CAS is not an error: 200 {"Updated": false}.
				writeJSON(w, 200, idx, map[string]any{"Updated": false, "Index": idx})
				return
			}
		}
		// The PUT replaces the whole object: fields not sent are reset.
		c.CreateIndex, c.ModifyIndex = s.sched.CreateIndex, idx
		s.sched = c
		writeJSON(w, 200, idx, map[string]any{"Updated": true, "Index": idx})
	default:
		text(w, 405, "Invalid method")
	}
}

// --- variables ---

func (s *Server) variable(w http.ResponseWriter, r *http.Request, ns, path string) {
	k := key{ns, path}
	cur := s.vars[k]
	var cas *uint64
	if c := r.URL.Query().Get("cas"); c != "" {
		v, err := strconv.ParseUint(c, 10, 64)
		if err != nil {
			text(w, 400, "failed to parse cas: "+err.Error())
			return
		}
		cas = &v
	}
	conflict := func() bool {
		if cas == nil {
			return false
		}
		if cur == nil {
			return *cas != 0
		}
		return *cas != cur.ModifyIndex
	}
	writeConflict := func() {
		body := cur
		idx := uint64(0)
		if body == nil {
			body = &api.Variable{Namespace: ns, Path: path}
		} else {
			idx = cur.ModifyIndex
		}
		b, _ := json.Marshal(body)
		// Nomad sends the conflicting variable as JSON but labels it text.
		writeRaw(w, 409, idx, "text/plain; charset=utf-8", string(b))
	}
	switch r.Method {
	case "GET":
		if cur == nil {
			text(w, 404, "variable not found", s.index)
			return
		}
		writeJSON(w, 200, cur.ModifyIndex, cur)
	case "PUT":
		var v api.Variable
		if err := json.NewDecoder(r.Body).Decode(&v); err != nil {
			text(w, 400, err.Error())
			return
		}
		// Nomad 1.6.5 checks the path and the size before the CAS index,
		// and answers both with a 500.
		if msg := invalidVariablePath(path); msg != "" {
			text(w, 500, msg)
			return
		}
		if VariableSize(v.Items) > MaxVariableBytes {
			text(w, 500, "variables are limited to 64KiB in total size")
			return
		}
		if conflict() {
			writeConflict()
			return
		}
		if len(v.Items) == 0 {
			text(w, 400, "variable missing required Items object")
			return
		}
		idx := s.bump()
		nowNS := s.now().UnixNano()
		nv := &api.Variable{Namespace: ns, Path: path, Items: v.Items, ModifyIndex: idx, ModifyTime: nowNS, CreateIndex: idx, CreateTime: nowNS}
		if cur != nil {
			nv.CreateIndex, nv.CreateTime = cur.CreateIndex, cur.CreateTime
		}
		s.vars[k] = nv
		writeJSON(w, 200, idx, nv)
	case "DELETE":
		if conflict() {
			writeConflict()
			return
		}
		idx := s.bump()
		delete(s.vars, k)
		writeRaw(w, 204, idx, "", "")
	default:
		text(w, 405, "Invalid method")
	}
}

// MaxVariableBytes is Nomad's limit on one Variable, as VariableSize
// counts it.
const MaxVariableBytes = 64 << 10

// VariableSize is what Nomad 1.6.5 counts against MaxVariableBytes: the
// bytes of every item's key and value (not the path). Measured on the real
// agent: one item whose key and value total 65,536 bytes is stored, 65,537
// is refused; two items count together; a 2-byte UTF-8 character counts 2.
func VariableSize(items map[string]string) int {
	n := 0
	for k, v := range items {
		n += len(k) + len(v)
	}
	return n
}

// invalidVariablePath returns Nomad's message for a path it refuses, or
// "": 1 to 128 characters of a-z A-Z 0-9 - _ ~ /, and under nomad/ only
// nomad/jobs and nomad/job-templates.
func invalidVariablePath(path string) string {
	ok := len(path) >= 1 && len(path) <= 128
	for _, c := range path {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '~' || c == '/') {
			ok = false
		}
	}
	if !ok {
		return fmt.Sprintf("invalid path %q", path)
	}
	if path == "nomad" || strings.HasPrefix(path, "nomad/") {
		for _, p := range []string{"nomad/jobs", "nomad/job-templates"} {
			if path == p || strings.HasPrefix(path, p+"/") {
				return ""
			}
		}
		return `only paths at "nomad/jobs" or "nomad/job-templates" and below are valid paths under the top-level "nomad" directory`
	}
	return ""
}

func (s *Server) listVars(w http.ResponseWriter, r *http.Request, ns string) {
	prefix := r.URL.Query().Get("prefix")
	out := []*api.VariableMetadata{}
	keys := make([]key, 0, len(s.vars))
	for k := range s.vars {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].ns+"/"+keys[i].id < keys[j].ns+"/"+keys[j].id })
	for _, k := range keys {
		v := s.vars[k]
		if (ns == "*" || k.ns == ns) && strings.HasPrefix(k.id, prefix) {
			out = append(out, &api.VariableMetadata{Namespace: v.Namespace, Path: v.Path, CreateIndex: v.CreateIndex, ModifyIndex: v.ModifyIndex, CreateTime: v.CreateTime, ModifyTime: v.ModifyTime})
		}
	}
	writeJSON(w, 200, s.index, out)
}

// --- helpers ---

func writeJSON(w http.ResponseWriter, status int, index uint64, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		text(w, 500, err.Error())
		return
	}
	writeRaw(w, status, index, "application/json", string(b))
}

// writeRaw writes a body; index 0 means no X-Nomad-Index header.
func writeRaw(w http.ResponseWriter, status int, index uint64, ctype, body string) {
	if ctype != "" {
		w.Header().Set("Content-Type", ctype)
	}
	if index > 0 {
		w.Header().Set("X-Nomad-Index", strconv.FormatUint(index, 10))
		w.Header().Set("X-Nomad-Knownleader", "true")
		w.Header().Set("X-Nomad-Lastcontact", "0")
	}
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

// text writes a plain-text error, as Nomad does for 4xx and 5xx; 404s
// carry the index of the table queried, 500s and 400s none.
func text(w http.ResponseWriter, status int, msg string, index ...uint64) {
	var idx uint64
	if len(index) > 0 {
		idx = index[0]
	}
	writeRaw(w, status, idx, "text/plain; charset=utf-8", msg)
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func ptr[T any](v T) *T { return &v }
