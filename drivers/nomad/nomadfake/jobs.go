package nomadfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
)

func (s *Server) register(w http.ResponseWriter, r *http.Request, queryNS string) {
	var req api.JobRegisterRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		text(w, 400, "Failed to decode request body: "+err.Error())
		return
	}
	j := req.Job
	if j == nil || j.ID == nil || *j.ID == "" {
		text(w, 400, "Job must be specified")
		return
	}
	// The ?namespace= query wins over Job.Namespace.
	ns := "default"
	if r.URL.Query().Get("namespace") != "" {
		ns = queryNS
	} else if j.Namespace != nil && *j.Namespace != "" {
		ns = *j.Namespace
	}
	j.Namespace = &ns
	if s.namespaces[ns] == nil {
		text(w, 500, fmt.Sprintf("1 error occurred:\n\t* job %q is in nonexistent namespace %q\n\n", *j.ID, ns))
		return
	}
	if errs := validate(j); len(errs) > 0 {
		text(w, 500, multiError(errs))
		return
	}
	k := key{ns, *j.ID}
	old := s.jobs[k]
	if req.EnforceIndex {
		const prefix = "Enforcing job modify index"
		switch {
		case req.JobModifyIndex == 0 && old != nil:
			text(w, 500, fmt.Sprintf("%s %d: job already exists", prefix, req.JobModifyIndex))
			return
		case req.JobModifyIndex != 0 && old == nil:
			text(w, 500, fmt.Sprintf("%s %d: job does not exist", prefix, req.JobModifyIndex))
			return
		case old != nil && *old.j.JobModifyIndex != req.JobModifyIndex:
			text(w, 500, fmt.Sprintf("%s %d: job exists with conflicting job modify index: %d", prefix, req.JobModifyIndex, *old.j.JobModifyIndex))
			return
		}
	}
	spec, _ := json.Marshal(j)
	groups := map[string][]byte{}
	jc, _ := json.Marshal(j.Constraints)
	for _, tg := range j.TaskGroups {
		b, _ := json.Marshal(tg)
		groups[*tg.Name] = append(append([]byte(nil), jc...), b...)
	}
	idx := s.bump()
	cur := old
	if old == nil || string(old.spec) != string(spec) || *old.j.Stop {
		version := uint64(0)
		create := idx
		if old != nil {
			version = *old.j.Version + 1
			create = *old.j.CreateIndex
		}
		defaults(j)
		j.Version = &version
		j.SubmitTime = ptr(s.now().UnixNano())
		s.setJobIndexes(j, create, idx, idx)
		cur = &job{j: j, spec: spec, groups: groups}
		if old != nil {
			cur.groups = old.groups // compared below, then replaced
		}
		s.jobs[k] = cur
	}
	eval := s.newEval(cur.j, "job-register", idx)
	s.schedule(cur, groups, eval)
	// Nomad creates the evaluation pending at EvalCreateIndex and its
	// scheduler writes it again when done (recordings 23 and 30: created
	// at 18, complete at 20).
	eval.ModifyIndex = s.bump()
	cur.groups = groups
	s.updateJobStatus(cur.j)
	writeJSON(w, 200, idx, map[string]any{
		"EvalCreateIndex": idx, "EvalID": eval.ID, "Index": idx, "JobModifyIndex": *cur.j.JobModifyIndex,
		"KnownLeader": false, "LastContact": 0, "NextToken": "", "Warnings": "",
	})
}

// validateJob answers /v1/validate/job as Nomad does: 200 with the
// validation errors listed (none for a valid job).
func (s *Server) validateJob(w http.ResponseWriter, r *http.Request) {
	var req api.JobValidateRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Job == nil {
		text(w, 400, "Job must be specified")
		return
	}
	errs := validate(req.Job)
	resp := api.JobValidateResponse{DriverConfigValidated: true, ValidationErrors: errs}
	if len(errs) > 0 {
		resp.Error = multiError(errs)
	}
	writeJSON(w, 200, 0, resp)
}

func defaults(j *api.Job) {
	if j.Type == nil {
		j.Type = ptr("service")
	}
	if j.Priority == nil {
		j.Priority = ptr(50)
	}
	if len(j.Datacenters) == 0 {
		j.Datacenters = []string{"*"}
	}
	if j.Region == nil {
		j.Region = ptr("global")
	}
	if j.Name == nil {
		j.Name = j.ID
	}
	if j.NodePool == nil {
		j.NodePool = ptr("default")
	}
	j.Stop = ptr(false)
	for _, tg := range j.TaskGroups {
		if tg.Count == nil {
			tg.Count = ptr(1)
		}
	}
}

func (s *Server) setJobIndexes(j *api.Job, create, modify, jobModify uint64) {
	j.CreateIndex, j.ModifyIndex, j.JobModifyIndex = &create, &modify, &jobModify
	if j.Version == nil {
		j.Version = ptr(uint64(0))
	}
	if j.Stop == nil {
		j.Stop = ptr(false)
	}
	if j.Status == nil {
		j.Status = ptr("pending")
	}
}

// validate returns the errors Nomad's job validation would report.
func validate(j *api.Job) []string {
	var errs []string
	if j.Priority != nil && (*j.Priority < 1 || *j.Priority > 100) {
		errs = append(errs, "job priority must be between [1, 100]")
	}
	if j.Type != nil {
		switch *j.Type {
		case "batch", "service", "system", "sysbatch":
		default:
			errs = append(errs, fmt.Sprintf("Invalid job type: %q", *j.Type))
		}
	}
	if len(j.TaskGroups) == 0 {
		errs = append(errs, "Missing job task groups")
	}
	for _, tg := range j.TaskGroups {
		if tg.Name == nil || *tg.Name == "" {
			errs = append(errs, "Job task group missing name")
			continue
		}
		if len(tg.Tasks) == 0 {
			errs = append(errs, fmt.Sprintf("Task group %s validation failed: Missing tasks for task group", *tg.Name))
		}
		for _, t := range tg.Tasks {
			if t.Driver == "" {
				errs = append(errs, fmt.Sprintf("Task group %s validation failed: Task %s validation failed: Missing task driver", *tg.Name, t.Name))
			}
		}
	}
	return errs
}

// multiError formats errors as hashicorp/go-multierror does.
func multiError(errs []string) string {
	var b strings.Builder
	if len(errs) == 1 {
		b.WriteString("1 error occurred:\n")
	} else {
		fmt.Fprintf(&b, "%d errors occurred:\n", len(errs))
	}
	for _, e := range errs {
		fmt.Fprintf(&b, "\t* %s\n", e)
	}
	b.WriteString("\n")
	return b.String()
}

func (s *Server) newEval(j *api.Job, trigger string, idx uint64) *api.Evaluation {
	e := &api.Evaluation{
		ID: s.newID(), Namespace: *j.Namespace, JobID: *j.ID, Priority: *j.Priority, Type: *j.Type,
		TriggeredBy: trigger, Status: "complete", JobModifyIndex: *j.JobModifyIndex,
		CreateIndex: idx, ModifyIndex: idx, SnapshotIndex: idx,
		CreateTime: s.now().UnixNano(), ModifyTime: s.now().UnixNano(),
	}
	s.evals[e.ID] = e
	return e
}

// schedule makes the job's allocations match its groups, as Nomad's
// scheduler would for the subset berth uses: node constraints on
// ${node.unique.id}, device requests with ${device.ids} constraints.
func (s *Server) schedule(jb *job, newGroups map[string][]byte, eval *api.Evaluation) {
	j := jb.j
	idx := eval.CreateIndex
	live := map[string]*api.Allocation{}
	for _, id := range sortedKeys(s.allocs) {
		a := s.allocs[id]
		if a.Namespace == *j.Namespace && a.JobID == *j.ID && a.DesiredStatus == "run" && !terminal(a) {
			live[a.Name] = a
		}
	}
	wanted := map[string]bool{}
	failed := map[string]*api.AllocationMetric{}
	// Nomad counts, per group, the allocations the evaluation left
	// unplaced (0 for a group it placed in full; recording 30).
	queued := map[string]int{}
	defer func() { eval.QueuedAllocations = queued }()
	for _, tg := range j.TaskGroups {
		queued[*tg.Name] = 0
		for i := 0; i < *tg.Count; i++ {
			name := fmt.Sprintf("%s.%s[%d]", *j.ID, *tg.Name, i)
			wanted[name] = true
			if a := live[name]; a != nil {
				if string(jb.groups[*tg.Name]) == string(newGroups[*tg.Name]) {
					a.Job, a.ModifyIndex = j, idx // in-place update
					continue
				}
				s.stopAlloc1(a, "stop", "alloc is being updated due to job update", idx)
			}
			if m := s.place(j, tg, i, eval); m != nil {
				failed[*tg.Name] = m
				queued[*tg.Name]++
			}
		}
	}
	for name, a := range live {
		if !wanted[name] {
			s.stopAlloc1(a, "stop", "alloc not needed due to job update", idx)
		}
	}
	if len(failed) > 0 {
		b := s.newEval(j, "queued-allocs", idx)
		b.Status, b.StatusDescription, b.PreviousEval = "blocked", "created to place remaining allocations", eval.ID
		b.JobModifyIndex = 0 // blocked evals carry none (recording 57)
		// Nomad puts the same metrics on the evaluation that failed and
		// on the blocked one it creates (checked on a v1.6.5 agent).
		b.FailedTGAllocs, eval.FailedTGAllocs = failed, failed
		eval.BlockedEval = b.ID
	}
}

type devReq struct {
	task    string
	vendor  string
	typ     string
	count   int
	allowed map[string]bool // nil: any instance
}

// place puts replica i of tg on the first node that fits. When no node
// fits it returns Nomad's account of why (the caller blocks an eval):
// nodes evaluated, constraints that filtered them, dimensions exhausted.
func (s *Server) place(j *api.Job, tg *api.TaskGroup, i int, eval *api.Evaluation) *api.AllocationMetric {
	var reqs []devReq
	for _, t := range tg.Tasks {
		if t.Resources == nil {
			continue
		}
		for _, d := range t.Resources.Devices {
			r := devReq{task: t.Name, count: 1}
			if d.Count != nil {
				r.count = int(*d.Count)
			}
			parts := strings.Split(d.Name, "/")
			if len(parts) >= 2 {
				r.vendor, r.typ = parts[0], parts[1]
			} else {
				r.typ = parts[0]
			}
			for _, c := range d.Constraints {
				if c.LTarget == "${device.ids}" && c.Operand == "set_contains_any" {
					r.allowed = map[string]bool{}
					for _, id := range strings.Split(c.RTarget, ",") {
						r.allowed[strings.TrimSpace(id)] = true
					}
				}
			}
			reqs = append(reqs, r)
		}
	}
	cons := append(append([]*api.Constraint(nil), j.Constraints...), tg.Constraints...)
	m := &api.AllocationMetric{NodesAvailable: map[string]int{}, ConstraintFiltered: map[string]int{}, DimensionExhausted: map[string]int{}}
	var trap *node
	for _, id := range sortedKeys(s.nodes) {
		n := s.nodes[id]
		if n.n.Status != "ready" || n.n.SchedulingEligibility != "eligible" {
			continue
		}
		m.NodesEvaluated++
		if c := failedConstraint(n, cons); c != "" {
			m.NodesFiltered++
			m.ConstraintFiltered[c]++
			continue
		}
		if c := s.missing(n, tg); c != "" {
			m.NodesFiltered++
			m.ConstraintFiltered[c]++
			continue
		}
		if dim := s.exhausted(n, tg); dim != "" {
			m.NodesExhausted++
			m.DimensionExhausted[dim]++
			continue
		}
		free := s.freeGPUs(n)
		picked, ok := pick(reqs, free, true)
		if ok {
			a := s.newAlloc(j, tg, i, n, nil, eval.CreateIndex)
			a.EvalID = eval.ID
			setDevices(a, reqs, picked, n)
			return nil
		}
		// Nomad 1.6 (recording 82): pinned GPUs busy but others free on
		// the node: it places the alloc with no device at all.
		if _, any := pick(reqs, free, false); any && trap == nil {
			trap = n
		}
	}
	if trap != nil {
		a := s.newAlloc(j, tg, i, trap, nil, eval.CreateIndex)
		a.EvalID = eval.ID
		setDevices(a, reqs, make([][]string, len(reqs)), trap)
		s.finish(a, "failed", "Failed tasks")
		for _, st := range a.TaskStates {
			st.Failed = true
			st.Events = append(st.Events, &api.TaskEvent{Type: "Task hook failed", DisplayMessage: "devices: failed to reserve device nvidia/gpu/" + gpuModel(trap) + ": rpc error: code = InvalidArgument desc = no device ids given"})
		}
		return nil
	}
	if m.NodesEvaluated > m.NodesFiltered+m.NodesExhausted {
		m.NodesExhausted = m.NodesEvaluated - m.NodesFiltered
		m.DimensionExhausted["devices: no devices match request"] += m.NodesEvaluated - m.NodesFiltered - m.DimensionExhausted["memory"]
	}
	if len(m.ConstraintFiltered) == 0 {
		m.ConstraintFiltered = nil
	}
	if len(m.DimensionExhausted) == 0 {
		m.DimensionExhausted = nil
	}
	m.NodesAvailable["dc1"] = m.NodesEvaluated
	return m
}

// missing returns the feasibility check node n fails for group tg, as
// Nomad names it in ConstraintFiltered ("missing drivers", "missing
// compatible host volumes"), or "".
func (s *Server) missing(n *node, tg *api.TaskGroup) string {
	for _, t := range tg.Tasks {
		if d := n.n.Drivers[t.Driver]; d == nil || !d.Detected || !d.Healthy {
			return "missing drivers"
		}
	}
	for _, v := range tg.Volumes {
		if v != nil && v.Type == "host" && n.n.HostVolumes[v.Source] == nil {
			return "missing compatible host volumes"
		}
	}
	return ""
}

// exhausted returns the first dimension ("cpu", "cores", "memory",
// "disk") whose CPU shares, exclusive cores, memory or ephemeral disk left
// on node n by the allocations that hold them (those not terminal nor
// told to stop) cannot hold group tg, as Nomad's bin-packing names it in
// DimensionExhausted, or "" when the group fits.
func (s *Server) exhausted(n *node, tg *api.TaskGroup) string {
	r := n.n.NodeResources
	cpu, mem, disk := r.Cpu.CpuShares, r.Memory.MemoryMB, r.Disk.DiskMB
	cores := len(r.Cpu.ReservableCpuCores)
	for _, a := range s.allocs {
		if a.NodeID != n.n.ID || terminal(a) || a.DesiredStatus != "run" {
			continue
		}
		for _, t := range a.AllocatedResources.Tasks {
			cpu -= t.Cpu.CpuShares
			mem -= t.Memory.MemoryMB
			cores -= len(t.Cpu.ReservedCores)
		}
		disk -= a.AllocatedResources.Shared.DiskMB
	}
	want := groupResources(tg, n)
	for _, t := range want.Tasks {
		cpu -= t.Cpu.CpuShares
		mem -= t.Memory.MemoryMB
		cores -= len(t.Cpu.ReservedCores)
	}
	disk -= want.Shared.DiskMB
	switch {
	case cores < 0:
		return "cores"
	case cpu < 0:
		return "cpu"
	case mem < 0:
		return "memory"
	case disk < 0:
		return "disk"
	}
	return ""
}

// groupResources is what Nomad allocates group tg on node n: each task's
// CPU shares (Nomad's default 100; exclusive cores cost their shares,
// CpuShares / TotalCpuCores each), cores and memory (default 300), and
// the group's ephemeral disk (default 300).
func groupResources(tg *api.TaskGroup, n *node) *api.AllocatedResources {
	out := &api.AllocatedResources{Tasks: map[string]*api.AllocatedTaskResources{}, Shared: api.AllocatedSharedResources{DiskMB: 300}}
	if tg.EphemeralDisk != nil && tg.EphemeralDisk.SizeMB != nil {
		out.Shared.DiskMB = int64(*tg.EphemeralDisk.SizeMB)
	}
	for _, t := range tg.Tasks {
		tr := &api.AllocatedTaskResources{}
		tr.Cpu.CpuShares, tr.Memory.MemoryMB = 100, 300
		if r := t.Resources; r != nil {
			if r.Cores != nil && *r.Cores > 0 {
				c := n.n.NodeResources.Cpu
				tr.Cpu.CpuShares = int64(*r.Cores) * (c.CpuShares / int64(max(c.TotalCpuCores, 1)))
				for i := range *r.Cores {
					tr.Cpu.ReservedCores = append(tr.Cpu.ReservedCores, uint16(i))
				}
			} else if r.CPU != nil {
				tr.Cpu.CpuShares = int64(*r.CPU)
			}
			if r.MemoryMB != nil {
				tr.Memory.MemoryMB = int64(*r.MemoryMB)
			}
		}
		out.Tasks[t.Name] = tr
	}
	return out
}

// failedConstraint returns the first constraint n does not meet, as
// Nomad names it in ConstraintFiltered ("${node.unique.id} = abc"), or "".
func failedConstraint(n *node, cons []*api.Constraint) string {
	for _, c := range cons {
		var v string
		switch {
		case c.LTarget == "${node.unique.id}":
			v = n.n.ID
		case c.LTarget == "${node.unique.name}":
			v = n.n.Name
		case c.LTarget == "${node.class}":
			v = n.n.NodeClass
		case c.LTarget == "${node.datacenter}":
			v = n.n.Datacenter
		case strings.HasPrefix(c.LTarget, "${meta."):
			v = n.n.Meta[strings.TrimSuffix(strings.TrimPrefix(c.LTarget, "${meta."), "}")]
		default:
			continue // attributes the fake does not model are satisfied
		}
		switch c.Operand {
		case "=", "==", "is":
			if v != c.RTarget {
				return c.LTarget + " " + c.Operand + " " + c.RTarget
			}
		case "!=", "not":
			if v == c.RTarget {
				return c.LTarget + " " + c.Operand + " " + c.RTarget
			}
		}
	}
	return ""
}

// freeGPUs returns the node's healthy GPU instances that no allocation
// Nomad wants running (desired status run, not terminal) holds, sorted.
func (s *Server) freeGPUs(n *node) []string {
	used := map[string]bool{}
	for _, a := range s.allocs {
		// Nomad's scheduler counts an allocation told to stop as gone
		// (its desired status is terminal), though its task may still be
		// running: a destructive update gets the same GPUs back.
		if a.NodeID != n.n.ID || terminal(a) || a.DesiredStatus != "run" {
			continue
		}
		for _, id := range deviceIDs(a) {
			used[id] = true
		}
	}
	var free []string
	for _, d := range n.n.NodeResources.Devices {
		if d.Type != "gpu" {
			continue
		}
		for _, inst := range d.Instances {
			if inst.Healthy && !used[inst.ID] {
				free = append(free, inst.ID)
			}
		}
	}
	sort.Strings(free)
	return free
}

// pick chooses instances for every request from free; honour false
// ignores the ${device.ids} constraints (to detect the 1.6 trap).
func pick(reqs []devReq, free []string, honour bool) ([][]string, bool) {
	taken := map[string]bool{}
	out := make([][]string, len(reqs))
	for i, r := range reqs {
		if r.typ != "gpu" {
			continue
		}
		for _, id := range free {
			if len(out[i]) == r.count {
				break
			}
			if taken[id] || (honour && r.allowed != nil && !r.allowed[id]) {
				continue
			}
			taken[id] = true
			out[i] = append(out[i], id)
		}
		if len(out[i]) < r.count {
			return nil, false
		}
	}
	return out, true
}

func gpuModel(n *node) string {
	for _, d := range n.n.NodeResources.Devices {
		if d.Type == "gpu" {
			return d.Name
		}
	}
	return ""
}

func setDevices(a *api.Allocation, reqs []devReq, picked [][]string, n *node) {
	for i, r := range reqs {
		tr := a.AllocatedResources.Tasks[r.task]
		if tr == nil {
			continue
		}
		ids := picked[i]
		if ids == nil {
			ids = []string{}
		}
		tr.Devices = append(tr.Devices, &api.AllocatedDeviceResource{Vendor: "nvidia", Type: "gpu", Name: gpuModel(n), DeviceIDs: ids})
	}
}

func (s *Server) newAlloc(j *api.Job, tg *api.TaskGroup, i int, n *node, gpus []string, idx uint64) *api.Allocation {
	now := s.now().UnixNano()
	a := &api.Allocation{
		ID: s.newID(), Namespace: *j.Namespace, JobID: *j.ID, Job: j, TaskGroup: *tg.Name,
		Name: fmt.Sprintf("%s.%s[%d]", *j.ID, *tg.Name, i), NodeID: n.n.ID, NodeName: n.n.Name,
		DesiredStatus: "run", ClientStatus: "pending",
		CreateIndex: idx, ModifyIndex: idx, AllocModifyIndex: idx, CreateTime: now, ModifyTime: now,
		AllocatedResources: groupResources(tg, n),
		TaskStates:         map[string]*api.TaskState{},
	}
	for _, t := range tg.Tasks {
		a.TaskStates[t.Name] = &api.TaskState{State: "pending", Events: []*api.TaskEvent{{Type: "Received", DisplayMessage: "Task received by client", Time: now}}}
	}
	if gpus != nil {
		for _, tr := range a.AllocatedResources.Tasks {
			tr.Devices = []*api.AllocatedDeviceResource{{Vendor: "nvidia", Type: "gpu", Name: gpuModel(n), DeviceIDs: gpus}}
			break
		}
	}
	s.allocs[a.ID] = a
	return a
}

func (s *Server) run(a *api.Allocation) {
	a.ClientStatus, a.ClientDescription = "running", "Tasks are running"
	t := s.now()
	for _, st := range a.TaskStates {
		st.State, st.StartedAt = "running", t
		st.Events = append(st.Events, &api.TaskEvent{Type: "Started", DisplayMessage: "Task started by client", Time: t.UnixNano()})
	}
}

func (s *Server) finish(a *api.Allocation, status, desc string) {
	a.ClientStatus, a.ClientDescription = status, desc
	t := s.now()
	for _, st := range a.TaskStates {
		if st.StartedAt.IsZero() {
			st.StartedAt = t
		}
		st.State, st.FinishedAt = "dead", t
	}
}

// stopAlloc1 asks an allocation to stop; it keeps its devices until the
// client reports it terminal (Settle).
func (s *Server) stopAlloc1(a *api.Allocation, desired, desc string, idx uint64) {
	a.DesiredStatus, a.DesiredDescription, a.ModifyIndex = desired, desc, idx
	if a.ClientStatus == "pending" {
		s.finish(a, "complete", "All tasks have completed")
	}
	if desired == "stop" {
		for _, st := range a.TaskStates {
			st.Events = append(st.Events, &api.TaskEvent{Type: "Killing", DisplayMessage: "Sent interrupt. Waiting " + killTimeout(a) + " before force killing"})
		}
	}
}

func killTimeout(a *api.Allocation) string {
	for _, tg := range a.Job.TaskGroups {
		if *tg.Name == a.TaskGroup {
			for _, t := range tg.Tasks {
				if t.KillTimeout != nil {
					return t.KillTimeout.String()
				}
			}
		}
	}
	return (5 * time.Second).String()
}

func (s *Server) stopAlloc(w http.ResponseWriter, id string) {
	a := s.allocs[id]
	if a == nil {
		text(w, 404, "alloc not found", s.index)
		return
	}
	idx := s.bump()
	s.stopAlloc1(a, "stop", "alloc was stopped by user", idx)
	e := s.newEval(a.Job, "alloc-stop", idx)
	writeJSON(w, 200, idx, map[string]any{"EvalID": e.ID, "Index": idx})
}

// unblock retries blocked evaluations, as capacity frees up.
func (s *Server) unblock() {
	for _, id := range sortedKeys(s.evals) {
		e := s.evals[id]
		if e.Status != "blocked" {
			continue
		}
		jb := s.jobs[key{e.Namespace, e.JobID}]
		e.Status = "complete"
		if jb == nil || *jb.j.Stop {
			e.Status = "canceled"
			continue
		}
		idx := s.bump()
		next := s.newEval(jb.j, "queued-allocs", idx)
		s.schedule(jb, jb.groups, next)
		s.updateJobStatus(jb.j)
	}
}

func (s *Server) updateJobStatus(j *api.Job) {
	running, live := false, false
	for _, a := range s.allocs {
		if a.Namespace != *j.Namespace || a.JobID != *j.ID || terminal(a) {
			continue
		}
		live = true
		if a.ClientStatus == "running" {
			running = true
		}
	}
	blocked := false
	for _, e := range s.evals {
		if e.Namespace == *j.Namespace && e.JobID == *j.ID && e.Status == "blocked" {
			blocked = true
		}
	}
	switch {
	case running:
		j.Status = ptr("running")
	case *j.Stop && !live:
		j.Status = ptr("dead")
	case live || blocked:
		j.Status = ptr("pending")
	default:
		j.Status = ptr("dead")
	}
}

func (s *Server) getJob(w http.ResponseWriter, ns, id string) {
	jb := s.jobs[key{ns, id}]
	if jb == nil {
		text(w, 404, "job not found", s.index)
		return
	}
	writeJSON(w, 200, s.index, jb.j)
}

func (s *Server) deregister(w http.ResponseWriter, ns, id string, purge bool) {
	k := key{ns, id}
	jb := s.jobs[k]
	if jb == nil {
		// Stopping an unknown job is not an error (recording 77).
		writeJSON(w, 200, 0, map[string]any{"EvalCreateIndex": 0, "EvalID": "", "Index": 0, "JobModifyIndex": 0,
			"KnownLeader": false, "LastContact": 0, "NextToken": "", "VolumeEvalID": "", "VolumeEvalIndex": 0})
		return
	}
	idx := s.bump()
	j := jb.j
	if !*j.Stop {
		j.Stop = ptr(true)
		j.Version = ptr(*j.Version + 1)
		j.JobModifyIndex = ptr(idx)
	}
	j.ModifyIndex = ptr(idx)
	for _, aid := range sortedKeys(s.allocs) {
		a := s.allocs[aid]
		if a.Namespace == ns && a.JobID == id && a.DesiredStatus == "run" && !terminal(a) {
			s.stopAlloc1(a, "stop", "alloc not needed due to job update", idx)
		}
	}
	for _, e := range s.evals {
		if e.Namespace == ns && e.JobID == id && e.Status == "blocked" {
			e.Status = "canceled"
		}
	}
	e := s.newEval(j, "job-deregister", idx)
	if purge {
		delete(s.jobs, k)
	} else {
		s.updateJobStatus(j)
		j.Status = ptr("dead")
	}
	writeJSON(w, 200, idx, map[string]any{"EvalCreateIndex": idx, "EvalID": e.ID, "Index": idx, "JobModifyIndex": idx,
		"KnownLeader": false, "LastContact": 0, "NextToken": "", "VolumeEvalID": "", "VolumeEvalIndex": 0})
}

func stub(a *api.Allocation) *api.AllocationListStub {
	return &api.AllocationListStub{
		ID: a.ID, EvalID: a.EvalID, Name: a.Name, Namespace: a.Namespace, NodeID: a.NodeID, NodeName: a.NodeName,
		JobID: a.JobID, JobType: *a.Job.Type, JobVersion: *a.Job.Version, TaskGroup: a.TaskGroup,
		DesiredStatus: a.DesiredStatus, DesiredDescription: a.DesiredDescription,
		ClientStatus: a.ClientStatus, ClientDescription: a.ClientDescription, TaskStates: a.TaskStates,
		PreemptedByAllocation: a.PreemptedByAllocation, PreemptedAllocations: a.PreemptedAllocations,
		CreateIndex: a.CreateIndex, ModifyIndex: a.ModifyIndex, CreateTime: a.CreateTime, ModifyTime: a.ModifyTime,
	}
}

func (s *Server) jobAllocs(w http.ResponseWriter, ns, id string) {
	out := []*api.AllocationListStub{} // an unknown job has none: 200 [] (recording 74)
	for _, aid := range sortedKeys(s.allocs) {
		if a := s.allocs[aid]; a.Namespace == ns && a.JobID == id {
			out = append(out, stub(a))
		}
	}
	writeJSON(w, 200, s.index, out)
}

// listAllocs answers /v1/allocations; with ?resources=true each stub
// carries its AllocatedResources.
func (s *Server) listAllocs(w http.ResponseWriter, ns string, resources bool) {
	out := []*api.AllocationListStub{}
	for _, aid := range sortedKeys(s.allocs) {
		if a := s.allocs[aid]; ns == "*" || a.Namespace == ns {
			st := stub(a)
			if resources {
				st.AllocatedResources = a.AllocatedResources
			}
			out = append(out, st)
		}
	}
	writeJSON(w, 200, s.index, out)
}

// ForgetVersions makes the job's older versions unknown to
// /v1/job/:id/versions, as Nomad forgets all but a job's last few.
func (s *Server) ForgetVersions(ns, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.forgot == nil {
		s.forgot = map[key]bool{}
	}
	s.forgot[key{ns, id}] = true
}

// jobVersions answers /v1/job/:id/versions: the job's current version and
// every older one an allocation still runs, newest first.
func (s *Server) jobVersions(w http.ResponseWriter, ns, id string) {
	jb := s.jobs[key{ns, id}]
	if jb == nil {
		text(w, 404, "job versions not found", s.index)
		return
	}
	seen := map[uint64]bool{*jb.j.Version: true}
	out := []*api.Job{jb.j}
	for _, aid := range sortedKeys(s.allocs) {
		if s.forgot[key{ns, id}] {
			break
		}
		if a := s.allocs[aid]; a.Namespace == ns && a.JobID == id && a.Job != nil && !seen[*a.Job.Version] {
			seen[*a.Job.Version] = true
			out = append(out, a.Job)
		}
	}
	sort.Slice(out, func(i, j int) bool { return *out[i].Version > *out[j].Version })
	writeJSON(w, 200, s.index, map[string]any{"Versions": out, "Diffs": nil})
}

func (s *Server) jobEvals(w http.ResponseWriter, ns, id string) {
	out := []*api.Evaluation{}
	for _, eid := range sortedKeys(s.evals) { // by ID: not time order, as in Nomad
		if e := s.evals[eid]; e.Namespace == ns && e.JobID == id {
			out = append(out, e)
		}
	}
	writeJSON(w, 200, s.index, out)
}

func (s *Server) jobSummary(w http.ResponseWriter, ns, id string) {
	jb := s.jobs[key{ns, id}]
	if jb == nil {
		text(w, 404, "job not found", s.index)
		return
	}
	sum := map[string]*api.TaskGroupSummary{}
	for _, tg := range jb.j.TaskGroups {
		sum[*tg.Name] = &api.TaskGroupSummary{}
	}
	for _, a := range s.allocs {
		if a.Namespace != ns || a.JobID != id {
			continue
		}
		g := sum[a.TaskGroup]
		if g == nil {
			g = &api.TaskGroupSummary{}
			sum[a.TaskGroup] = g
		}
		switch a.ClientStatus {
		case "pending":
			g.Starting++
		case "running":
			g.Running++
		case "complete":
			g.Complete++
		case "failed":
			g.Failed++
		case "lost":
			g.Lost++
		}
	}
	for _, e := range s.evals {
		if e.Namespace == ns && e.JobID == id && e.Status == "blocked" {
			for g := range e.FailedTGAllocs {
				if sum[g] != nil {
					sum[g].Queued++
				}
			}
		}
	}
	flat := map[string]api.TaskGroupSummary{}
	for g, v := range sum {
		flat[g] = *v
	}
	writeJSON(w, 200, s.index, &api.JobSummary{JobID: id, Namespace: ns, Summary: flat, CreateIndex: *jb.j.CreateIndex, ModifyIndex: s.index})
}

// metaFilter matches the filter forms berth uses: Meta["k"] is not empty,
// Meta["k"] is empty, Meta["k"] == "v".
var metaFilter = regexp.MustCompile(`^Meta\["([^"]+)"\] (is not empty|is empty|== "([^"]*)")$`)

// parseFilter returns a matcher over an object's Meta, or the 400 text
// Nomad gives for an expression it cannot read.
func parseFilter(f string) (func(map[string]string) bool, error) {
	if f == "" {
		return func(map[string]string) bool { return true }, nil
	}
	m := metaFilter.FindStringSubmatch(f)
	if m == nil {
		return nil, fmt.Errorf("failed to create result paginator: failed to read filter expression: %q is not a form the fake reads (Meta[\"k\"] is not empty / is empty / == \"v\")", f)
	}
	return func(meta map[string]string) bool {
		v, ok := meta[m[1]]
		switch m[2] {
		case "is not empty":
			return ok && v != ""
		case "is empty":
			return v == ""
		}
		return v == m[3]
	}, nil
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request, ns string) {
	q := r.URL.Query()
	match, err := parseFilter(q.Get("filter"))
	if err != nil {
		text(w, 400, err.Error())
		return
	}
	keys := sortedJobKeys(s.jobs)
	out := []*api.JobListStub{}
	for _, k := range keys {
		j := s.jobs[k].j
		if (ns != "*" && k.ns != ns) || !match(j.Meta) {
			continue
		}
		st := &api.JobListStub{
			ID: *j.ID, Name: *j.Name, Namespace: k.ns, Datacenters: j.Datacenters, Type: *j.Type, Priority: *j.Priority,
			Stop: *j.Stop, Status: *j.Status, CreateIndex: *j.CreateIndex, ModifyIndex: *j.ModifyIndex,
			JobModifyIndex: *j.JobModifyIndex,
		}
		if j.SubmitTime != nil {
			st.SubmitTime = *j.SubmitTime
		}
		if q.Get("meta") == "true" { // stubs carry Meta only when asked
			st.Meta = j.Meta
		}
		out = append(out, st)
	}
	writeJSON(w, 200, s.index, out)
}

func sortedJobKeys(m map[key]*job) []key {
	out := make([]key, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ns != out[j].ns {
			return out[i].ns < out[j].ns
		}
		return out[i].id < out[j].id
	})
	return out
}

func terminal(a *api.Allocation) bool {
	switch a.ClientStatus {
	case "complete", "failed", "lost":
		return true
	}
	return false
}

func deviceIDs(a *api.Allocation) []string {
	var out []string
	if a.AllocatedResources == nil {
		return nil
	}
	for _, t := range a.AllocatedResources.Tasks {
		for _, d := range t.Devices {
			if d.Type == "gpu" {
				out = append(out, d.DeviceIDs...)
			}
		}
	}
	return out
}
