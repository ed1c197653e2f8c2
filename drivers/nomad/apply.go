package nomad

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
	"github.com/hashicorp/nomad/api"
)

// Apply makes one action true in Nomad. Applying an action twice has the
// effect of applying it once. Errors are *drivers.Error: conflict (observe
// again and replan), invalid (report against the workspace), transient
// (retry with backoff).
//
//   - Start and Update register the workspace's job (with EnforceIndex, so
//     two writers never overwrite each other), pinned to the chosen node
//     and GPUs, after checking that those GPUs are free; then they wait to
//     see the placement and stop the job if Nomad gave any allocation
//     other GPUs than the pinned ones (Nomad 1.6, recording 82).
//   - Stop and Preempt deregister the job without purging it: the task
//     gets its kill signal and grace period; the allocation shows Stopping
//     until it is gone. The loop's Wait barrier waits for that.
//   - Purge deregisters a stopped job with purge, once the loop's prune
//     delay has passed.
func (d *Driver) Apply(ctx context.Context, a drivers.Action) error {
	switch a.Kind {
	case drivers.ActionStart, drivers.ActionUpdate:
		return d.start(ctx, a)
	case drivers.ActionStop, drivers.ActionPreempt:
		return d.stop(ctx, a)
	case drivers.ActionPurge:
		return d.purge(ctx, a)
	}
	return errorf(drivers.ClassInvalid, a.Workspace, "apply", "action %s never reaches a driver", a.Kind)
}

// namespaceOf returns the namespace of the action's workspace: from the
// project spec when the action carries it, else where berth's job is.
func (d *Driver) namespaceOf(ctx context.Context, a drivers.Action) (string, error) {
	if a.Project != nil {
		return Namespace(a.Project), nil
	}
	jobs, _, err := d.client.Jobs().ListOptions(&api.JobListOptions{Fields: &api.JobListFields{Meta: true}},
		(&api.QueryOptions{Namespace: "*", Filter: fmt.Sprintf(`Meta[%q] == %q`, MetaWorkspace, a.Workspace.Name)}).WithContext(ctx))
	if err != nil {
		return "", wrap(err, a.Workspace, "find job")
	}
	for _, j := range jobs {
		if refOf(j.Meta) == a.Workspace {
			return j.Namespace, nil
		}
	}
	return "", nil
}

// ownedJob finds the job of a's workspace and checks it carries berth's
// marker for that workspace. A nil job and nil error: there is no job.
func (d *Driver) ownedJob(ctx context.Context, a drivers.Action, verb string) (ns, id string, job *api.Job, err error) {
	ref := a.Workspace
	ns, err = d.namespaceOf(ctx, a)
	if err != nil || ns == "" {
		return "", "", nil, err
	}
	id = JobID(ref, ns)
	job, _, err = d.client.Jobs().Info(id, d.small(ctx, ns))
	if isNotFound(err) {
		return ns, id, nil, nil
	}
	if err != nil {
		return ns, id, nil, wrap(err, ref, "read job "+id)
	}
	if !isBerths(job.Meta) || refOf(job.Meta) != ref {
		return ns, id, nil, errorf(drivers.ClassInvalid, ref, verb+" job "+ns+"/"+id, "the job does not carry berth's marker for %s; berth never touches it", ref)
	}
	return ns, id, job, nil
}

func (d *Driver) stop(ctx context.Context, a drivers.Action) error {
	ref := a.Workspace
	ns, id, job, err := d.ownedJob(ctx, a, a.Kind.String())
	if err != nil || job == nil {
		return err // no job anywhere: already stopped
	}
	if job.Stop != nil && *job.Stop {
		return nil
	}
	if _, _, err := d.client.Jobs().Deregister(id, false, d.w(ctx, ns)); err != nil {
		return wrap(err, ref, a.Kind.String()+" job "+ns+"/"+id)
	}
	return nil
}

// purge removes a stopped workspace's job for good (deregister with
// purge). A job that is not stopped is refused: berth purges only what it
// stopped earlier and the specs still leave out.
func (d *Driver) purge(ctx context.Context, a drivers.Action) error {
	ref := a.Workspace
	ns, id, job, err := d.ownedJob(ctx, a, "purge")
	if err != nil || job == nil {
		return err // no job anywhere: already purged
	}
	if job.Stop == nil || !*job.Stop {
		return errorf(drivers.ClassInvalid, ref, "purge job "+ns+"/"+id, "the job is not stopped; berth purges only jobs it stopped")
	}
	if _, _, err := d.client.Jobs().Deregister(id, true, d.w(ctx, ns)); err != nil {
		return wrap(err, ref, "purge job "+ns+"/"+id)
	}
	return nil
}

func (d *Driver) start(ctx context.Context, a drivers.Action) error {
	ref := a.Workspace
	if a.Project == nil {
		return errorf(drivers.ClassInvalid, ref, "start", "a %s action needs the project spec", a.Kind)
	}
	ns := Namespace(a.Project)
	id := JobID(ref, ns)
	op := "register job " + ns + "/" + id

	// 1. Where: every placement's node must be known and its GPUs free.
	pl, err := d.resolve(ctx, a)
	if err != nil {
		return err
	}
	job, err := renderJob(a, ns, pl, d.cfg.Datacenters, d.cfg.RestartDelay)
	if err != nil {
		return err
	}
	// 2. The job as it is: berth's or nobody's. A job the last
	// observation did not list is registered at once with EnforceIndex 0,
	// which Nomad refuses if a job exists after all: then it is read.
	unseen := d.unseen(ns, id)
	for {
		err := d.register(ctx, a, ns, id, op, job, pl, unseen)
		if unseen && errors.Is(err, errJobChanged) {
			unseen = false
			continue
		}
		return err
	}
}

// errJobChanged is the cause of a register that Nomad refused because
// the job is not at the index berth enforced (it exists after all, or
// another writer changed it).
var errJobChanged = errors.New("the job changed since berth read it")

// registerFailed classifies a register Nomad refused with HTTP 500 by
// asking Nomad, not by reading its message: Nomad answers a job that does
// not validate, a stale EnforceIndex and a server-side failure (an RPC
// cut: "1 error occurred: rpc error: EOF") alike with 500 and text. So
// it asks Nomad's state and /v1/validate/job (which Nomad documents to
// list the validation errors). First it reads the job: one whose modify index
// is not the one enforced (it exists when enforce is 0, is gone, or
// another writer changed it) is a conflict wrapping errJobChanged. Then
// it validates the job: errors there are ClassInvalid, with Nomad's
// validation errors. Anything else is transient. Other
// statuses are classified as classOf does.
func (d *Driver) registerFailed(ctx context.Context, ref schema.Ref, ns, id, op string, job *api.Job, enforce uint64, err error) error {
	if code, _ := statusOf(err); code != http.StatusInternalServerError {
		return wrap(err, ref, op)
	}
	cur, _, rerr := d.client.Jobs().Info(id, d.small(ctx, ns))
	switch {
	case isNotFound(rerr) && enforce != 0:
		return &drivers.Error{Class: drivers.ClassConflict, Op: "nomad: " + op, Workspace: ref,
			Err: fmt.Errorf("%w: it is gone (%w)", errJobChanged, err)}
	case rerr == nil && (enforce == 0 || cur.JobModifyIndex == nil || *cur.JobModifyIndex != enforce):
		at := "unknown"
		if cur.JobModifyIndex != nil {
			at = fmt.Sprint(*cur.JobModifyIndex)
		}
		return &drivers.Error{Class: drivers.ClassConflict, Op: "nomad: " + op, Workspace: ref,
			Err: fmt.Errorf("%w: its modify index is %s, berth enforced %d (%w)", errJobChanged, at, enforce, err)}
	}
	if v, _, verr := d.client.Jobs().Validate(job, d.w(ctx, ns)); verr == nil && len(v.ValidationErrors) > 0 {
		return &drivers.Error{Class: drivers.ClassInvalid, Op: "nomad: " + op, Workspace: ref,
			Err: fmt.Errorf("%w (Nomad's validation: %s)", err, strings.Join(v.ValidationErrors, "; "))}
	}
	return wrap(err, ref, op)
}

// register is start's second half: with unseen, it takes the job for
// absent without reading it.
func (d *Driver) register(ctx context.Context, a drivers.Action, ns, id, op string, job *api.Job, pl []placed, unseen bool) error {
	ref := a.Workspace
	var cur *api.Job
	if !unseen {
		var err error
		cur, _, err = d.client.Jobs().Info(id, d.small(ctx, ns))
		switch {
		case isNotFound(err):
			cur = nil
		case err != nil:
			return wrap(err, ref, "read job "+ns+"/"+id)
		case !isBerths(cur.Meta) || refOf(cur.Meta) != ref:
			return errorf(drivers.ClassInvalid, ref, op, "a job %s/%s exists without berth's marker for %s; berth never touches it", ns, id, ref)
		}
	}
	live := cur != nil && !deref2(cur.Stop) && deref(cur.Status) != "dead"
	sameTask := cur != nil && cur.Meta[MetaSpecHash] == job.Meta[MetaSpecHash] &&
		cur.Meta[MetaJobHash] == job.Meta[MetaJobHash] && jobHash(cur) == job.Meta[MetaJobHash]
	if live && sameTask {
		if derefInt(cur.Priority) == derefInt(job.Priority) {
			// Unchanged: nothing to register, but a wrong placement is still fixed.
			return d.verify(ctx, ref, ns, id, cur, nil)
		}
		// Only the priority: Nomad updates it in place (recording 32), as
		// long as nothing the task sees changes, the revision meta included.
		job.Meta[MetaRevision] = cur.Meta[MetaRevision]
	}
	if err := d.checkFree(ctx, ref, ns, id, pl); err != nil {
		return err
	}
	if err := d.ensureNamespace(ctx, a.Project); err != nil {
		return err
	}
	// 3. A run that ended on its own (its job is dead but not stopped):
	// Nomad would not run a batch job again for a register that changes
	// nothing, so stop it first, as a resume does.
	if cur != nil && !deref2(cur.Stop) && deref(cur.Status) == "dead" {
		if _, _, err := d.client.Jobs().Deregister(id, false, d.w(ctx, ns)); err != nil {
			return wrap(err, ref, "stop the ended job "+ns+"/"+id)
		}
		var err error
		if cur, _, err = d.client.Jobs().Info(id, d.small(ctx, ns)); err != nil {
			return wrap(err, ref, "read job "+ns+"/"+id)
		}
	}
	// 4. Register, refusing to overwrite a change we have not seen.
	var enforce uint64
	if cur != nil && cur.JobModifyIndex != nil {
		enforce = *cur.JobModifyIndex
	}
	resp, _, err := d.client.Jobs().EnforceRegister(job, enforce, d.w(ctx, ns))
	if err != nil {
		failed := d.registerFailed(ctx, ref, ns, id, op, job, enforce, err)
		if errors.Is(failed, errJobChanged) || !d.namespaceGone(ctx, ns, err) {
			return failed
		}
		// Deleted since this cycle ensured it: ensure it again, once.
		d.forgetNamespace(ns)
		if err := d.ensureNamespace(ctx, a.Project); err != nil {
			return err
		}
		if resp, _, err = d.client.Jobs().EnforceRegister(job, enforce, d.w(ctx, ns)); err != nil {
			return d.registerFailed(ctx, ref, ns, id, op, job, enforce, err)
		}
	}
	d.saw(ns, id)
	// 5. See where Nomad put it. A job registered with EnforceIndex 0 did
	// not exist: Nomad stored it as rendered, at version 0, so it need
	// not be read again. An update's version is Nomad's to say.
	got := job
	if cur == nil {
		zero := uint64(0)
		got.Version, got.JobModifyIndex = &zero, &resp.JobModifyIndex
	} else if got, _, err = d.client.Jobs().Info(id, d.small(ctx, ns)); err != nil {
		return wrap(err, ref, "read job "+ns+"/"+id)
	}
	return d.verify(ctx, ref, ns, id, got, resp)
}

// unseen reports whether the last observation listed no job ns/id (false
// before any observation: nothing is known).
func (d *Driver) unseen(ns, id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.jobsSeen != nil && !d.jobsSeen[[2]string{ns, id}]
}

// saw records that job ns/id exists (berth registered it).
func (d *Driver) saw(ns, id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.jobsSeen != nil {
		d.jobsSeen[[2]string{ns, id}] = true
	}
}

func deref2(b *bool) bool { return b != nil && *b }

// resolve maps placements to Nomad node IDs, reading the nodes again when
// the last observation does not know one.
func (d *Driver) resolve(ctx context.Context, a drivers.Action) ([]placed, error) {
	lookup := func() map[string]string {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.nodeIDs
	}
	ids := lookup()
	out := make([]placed, 0, len(a.Placements))
	for _, p := range a.Placements {
		id, ok := ids[p.Node]
		if !ok {
			stubs, _, err := d.client.Nodes().List(d.q(ctx, ""))
			if err != nil {
				return nil, wrap(err, a.Workspace, "list nodes")
			}
			m := map[string]string{}
			for _, s := range stubs {
				m[s.Name], m[s.ID] = s.ID, s.ID
			}
			d.mu.Lock()
			for k, v := range m {
				d.nodeIDs[k] = v
			}
			d.mu.Unlock()
			if id, ok = m[p.Node]; !ok {
				return nil, errorf(drivers.ClassConflict, a.Workspace, "place", "node %q is not in the cluster", p.Node)
			}
		}
		gpus := append([]string(nil), p.GPUs...)
		sort.Strings(gpus)
		p.GPUs = gpus
		out = append(out, placed{Placement: p, NodeID: id})
	}
	if len(out) == 0 {
		return nil, errorf(drivers.ClassInvalid, a.Workspace, "place", "a %s action needs at least one placement", a.Kind)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Replica < out[j].Replica })
	return out, nil
}

// checkFree refuses to pin GPUs that are missing, unhealthy or held by
// any live allocation of another job: Nomad 1.6 would place such a job
// without GPUs (recording 82).
func (d *Driver) checkFree(ctx context.Context, ref schema.Ref, ns, id string, pl []placed) error {
	for _, p := range pl {
		if len(p.GPUs) == 0 {
			continue
		}
		node, _, err := d.client.Nodes().Info(p.NodeID, d.q(ctx, ""))
		if err != nil {
			return wrap(err, ref, "read node "+p.Node)
		}
		healthy := map[string]bool{}
		if node.NodeResources != nil {
			for _, dev := range node.NodeResources.Devices {
				for _, in := range dev.Instances {
					if dev.Type == "gpu" {
						healthy[in.ID] = in.Healthy
					}
				}
			}
		}
		allocs, _, err := d.client.Nodes().Allocations(p.NodeID, d.q(ctx, ""))
		if err != nil {
			return wrap(err, ref, "list allocations of node "+p.Node)
		}
		holder := map[string]string{}
		for _, a := range allocs {
			if terminal(a) || (a.Namespace == ns && a.JobID == id) {
				continue
			}
			for _, g := range gpuIDs(a) {
				holder[g] = a.Namespace + "/" + a.JobID
			}
		}
		for _, g := range p.GPUs {
			h, ok := healthy[g]
			switch {
			case !ok:
				return errorf(drivers.ClassConflict, ref, "place", "GPU %s is not on node %s", g, p.Node)
			case !h:
				return errorf(drivers.ClassConflict, ref, "place", "GPU %s on node %s is unhealthy", g, p.Node)
			case holder[g] != "":
				return errorf(drivers.ClassConflict, ref, "place", "GPU %s on node %s is still held by job %s", g, p.Node, holder[g])
			}
		}
	}
	return nil
}

// verify waits, with blocking queries, until Nomad has evaluated the
// job (reg, the register's answer; nil for a job berth did not register
// now) and every group has an allocation of the job's current version
// (job, as Nomad holds it), and checks each allocation's GPUs against the
// pinned set. An allocation of job's version in a group that pins no GPUs
// and asks for no device cannot hold one: its full record is not read. A
// mismatch stops the job (never left running) and is a conflict. An
// evaluation that could not place every group stops the job too and is
// ClassUnplaceable, with Nomad's own reason (FailedTGAllocs).
func (d *Driver) verify(ctx context.Context, ref schema.Ref, ns, id string, job *api.Job, reg *api.JobRegisterResponse) error {
	op := "verify placement of " + ns + "/" + id
	ctx, cancel := context.WithTimeout(ctx, d.cfg.PlacementTimeout)
	defer cancel()
	timedOut := func(err error) error {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return errorf(drivers.ClassTransient, ref, op, "Nomad placed no allocation within %s", d.cfg.PlacementTimeout)
		}
		return wrap(err, ref, op)
	}
	groups := map[string]bool{}
	noGPUs := map[string]bool{} // groups that can hold no GPU
	for _, tg := range job.TaskGroups {
		groups[*tg.Name] = true
		noGPUs[*tg.Name] = pinsNoGPU(tg)
	}
	version := uint64(0)
	if job.Version != nil {
		version = *job.Version
	}
	evalID := ""
	if reg != nil {
		evalID = reg.EvalID
	}
	// 1. The evaluation: wait until Nomad's scheduler is done with it.
	// It is created at reg.EvalCreateIndex and written again when done
	// (Nomad 1.6 sometimes writes it once more, still pending, just
	// after), so the first query already waits past its creation.
	if evalID != "" {
		index := reg.EvalCreateIndex
		for {
			// Not Evaluations().Info: it asks for the related
			// evaluations too (?related=true), which berth does not use.
			ev := new(api.Evaluation)
			qm, err := d.client.Raw().Query("/v1/evaluation/"+url.PathEscape(evalID), ev, d.blocking(ctx, ns, index))
			if err != nil {
				return timedOut(err)
			}
			if len(ev.FailedTGAllocs) > 0 {
				return d.withdrawUnplaceable(ctx, ref, ns, id, ev)
			}
			if ev.Status != "pending" {
				if placedAll(ev, noGPUs) {
					return nil
				}
				break
			}
			index = qm.LastIndex
		}
	}
	// 2. The allocations of this version, one per group.
	var index uint64
	for {
		stubs, qm, err := d.client.Jobs().Allocations(id, false, d.blocking(ctx, ns, index))
		if err != nil {
			return timedOut(err)
		}
		seen := map[string]bool{}
		for _, s := range stubs {
			if s.DesiredStatus != "run" || s.JobVersion < version {
				continue
			}
			if s.JobVersion == version && noGPUs[s.TaskGroup] {
				seen[s.TaskGroup] = true
				continue
			}
			alloc, _, err := d.client.Allocations().Info(s.ID, d.small(ctx, ns))
			if err != nil {
				return wrap(err, ref, "read allocation "+s.ID)
			}
			pinned, ok := pinnedOf(alloc)
			if !ok {
				continue
			}
			if got := gpuIDs(alloc); !sameSet(got, pinned) {
				return d.withdraw(ctx, ref, ns, id, fmt.Sprintf("Nomad placed allocation %s on GPUs [%s], not the pinned [%s]",
					s.ID, strings.Join(got, ","), strings.Join(pinned, ",")))
			}
			seen[s.TaskGroup] = true
		}
		if len(seen) == len(groups) {
			return nil
		}
		if evalID == "" {
			// A job berth did not register now: Nomad may have blocked it.
			evals, _, err := d.client.Jobs().Evaluations(id, d.small(ctx, ns))
			if err != nil {
				return wrap(err, ref, "list evaluations of job "+ns+"/"+id)
			}
			for _, e := range evals {
				// Blocked evals carry no JobModifyIndex (recording 57): order by creation.
				// Not berth's registration now (a native preemption
				// queued it again): withdraw it; the next start registers
				// it afresh where berth decides.
				if e.Status == "blocked" && e.CreateIndex >= *job.JobModifyIndex {
					return d.withdraw(ctx, ref, ns, id, "Nomad has it blocked (evaluation "+e.ID+": "+placementFailure(e.FailedTGAllocs)+")")
				}
			}
		}
		index = qm.LastIndex
	}
}

// placedAll reports whether a finished evaluation says by itself that
// the job is placed, with nothing left to check: it is complete, it
// left no allocation of any group unplaced (QueuedAllocations, which
// Nomad writes per group on every evaluation it completes), and no group
// can hold a GPU (a GPU's pin is checked on the allocation). Then the
// allocations need not be listed: one request less per 0-GPU start.
func placedAll(ev *api.Evaluation, noGPUs map[string]bool) bool {
	if ev.Status != "complete" || len(ev.FailedTGAllocs) > 0 || ev.BlockedEval != "" {
		return false
	}
	for g, none := range noGPUs {
		if q, ok := ev.QueuedAllocations[g]; !none || !ok || q != 0 {
			return false
		}
	}
	return true
}

// pinsNoGPU reports whether a group, as berth renders it, pins no GPU
// and none of its tasks asks for a device: Nomad gives its allocations
// none, so there is nothing to check against the pin.
func pinsNoGPU(tg *api.TaskGroup) bool {
	v, ok := tg.Meta[MetaGPUs]
	if !ok || v != "" {
		return false
	}
	for _, t := range tg.Tasks {
		if t.Resources != nil && len(t.Resources.Devices) > 0 {
			return false
		}
	}
	return true
}

// blocking returns query options for a blocking query: it answers once
// Nomad's index passes index (at once for 0), or after the wait.
// Its answers are small, as small's.
func (d *Driver) blocking(ctx context.Context, ns string, index uint64) *api.QueryOptions {
	return (&api.QueryOptions{Namespace: ns, WaitIndex: index, WaitTime: 10 * time.Second, Headers: identity}).WithContext(ctx)
}

// small returns query options for a request whose answer is small.
func (d *Driver) small(ctx context.Context, ns string) *api.QueryOptions {
	return (&api.QueryOptions{Namespace: ns, Headers: identity}).WithContext(ctx)
}

// withdrawUnplaceable stops a job Nomad could not place and reports
// Nomad's reason as ClassUnplaceable.
func (d *Driver) withdrawUnplaceable(ctx context.Context, ref schema.Ref, ns, id string, ev *api.Evaluation) error {
	op := "place " + ns + "/" + id
	why := "Nomad could not place it: " + placementFailure(ev.FailedTGAllocs)
	if _, _, err := d.client.Jobs().Deregister(id, false, d.w(ctx, ns)); err != nil {
		return wrap(fmt.Errorf("%s; stopping it failed: %w", why, err), ref, op)
	}
	return errorf(drivers.ClassUnplaceable, ref, op, "%s; the job is stopped and tried again later", why)
}

// placementFailure renders Nomad's account of a failed placement, group
// by group: the nodes evaluated, the constraints that filtered them, the
// dimensions exhausted.
func placementFailure(failed map[string]*api.AllocationMetric) string {
	var parts []string
	for _, g := range slices.Sorted(maps.Keys(failed)) {
		m := failed[g]
		if m == nil {
			continue
		}
		var why []string
		for _, c := range slices.Sorted(maps.Keys(m.ConstraintFiltered)) {
			why = append(why, fmt.Sprintf("constraint %q filtered %d", c, m.ConstraintFiltered[c]))
		}
		for _, c := range slices.Sorted(maps.Keys(m.ClassFiltered)) {
			why = append(why, fmt.Sprintf("node class %q filtered %d", c, m.ClassFiltered[c]))
		}
		for _, dim := range slices.Sorted(maps.Keys(m.DimensionExhausted)) {
			why = append(why, fmt.Sprintf("%s exhausted on %d", dim, m.DimensionExhausted[dim]))
		}
		for _, q := range m.QuotaExhausted {
			why = append(why, "quota "+q)
		}
		if len(why) == 0 {
			why = append(why, "no node fits")
		}
		parts = append(parts, fmt.Sprintf("group %s: %d node(s) evaluated; %s", g, m.NodesEvaluated, strings.Join(why, "; ")))
	}
	if len(parts) == 0 {
		return "no reason given"
	}
	return strings.Join(parts, " | ")
}

// withdraw stops a job Nomad placed wrongly and reports why.
func (d *Driver) withdraw(ctx context.Context, ref schema.Ref, ns, id, why string) error {
	if _, _, err := d.client.Jobs().Deregister(id, false, d.w(ctx, ns)); err != nil {
		return wrap(fmt.Errorf("%s; stopping it failed: %w", why, err), ref, "verify placement of "+ns+"/"+id)
	}
	return errorf(drivers.ClassConflict, ref, "verify placement of "+ns+"/"+id, "%s; the job is stopped", why)
}

// nsEnsured is what ensureNamespace found or made a namespace: berth's
// with this description and meta (as fmt.Sprint prints them), or
// someone else's (used as it is).
type nsEnsured struct {
	foreign     bool
	description string
	meta        string
}

// ensureNamespace creates the project's namespace, or updates its
// description and meta when berth created it. A namespace berth did not
// create is used as it is. Within one reconcile cycle (until the next
// Observe) a namespace already ensured as the project wants it is not
// read again; forgetNamespace drops one that turned out gone.
func (d *Driver) ensureNamespace(ctx context.Context, p *schema.Project) error {
	name := Namespace(p)
	ref := schema.Ref{Project: p.Meta.Name}
	want := &api.Namespace{
		Name:        name,
		Description: nsDescription(p),
		Meta:        map[string]string{MetaCreatedBy: createdBy, MetaProject: p.Meta.Name, "berth.tier": p.Spec.Tier},
	}
	ours := nsEnsured{description: want.Description, meta: fmt.Sprint(want.Meta)}
	d.mu.Lock()
	lock := d.nsLocks[name]
	if lock == nil {
		lock = new(sync.Mutex)
		d.nsLocks[name] = lock
	}
	d.mu.Unlock()
	// The appliers of one cycle wait here for the first to ensure it.
	lock.Lock()
	defer lock.Unlock()
	d.mu.Lock()
	had, ok := d.namespaces[name]
	d.mu.Unlock()
	if ok && (had.foreign || had == ours) {
		return nil
	}
	remember := func(e nsEnsured) error {
		d.mu.Lock()
		d.namespaces[name] = e
		d.mu.Unlock()
		return nil
	}
	cur, _, err := d.client.Namespaces().Info(name, d.small(ctx, ""))
	if err != nil && !isNotFound(err) {
		return wrap(err, ref, "read namespace "+name)
	}
	if cur != nil && err == nil && cur.Meta[MetaCreatedBy] != createdBy {
		return remember(nsEnsured{foreign: true})
	}
	if cur != nil && err == nil && cur.Description == want.Description && fmt.Sprint(cur.Meta) == ours.meta {
		return remember(ours)
	}
	if _, err := d.client.Namespaces().Register(want, d.w(ctx, "")); err != nil {
		if code, _ := statusOf(err); (code == http.StatusForbidden || code == http.StatusUnauthorized) && cur == nil {
			return errorf(drivers.ClassTransient, ref, "create namespace "+name,
				"Nomad refused (%v): berth's token may not create namespaces (in Nomad CE that needs a management token). Create it yourself (nomad namespace apply %s) or give berth a token that may; berth then uses it as it is", err, name)
		}
		return wrap(err, ref, "write namespace "+name)
	}
	if cur == nil {
		d.namespaceCreated(name)
	}
	return remember(ours)
}

// forgetNamespace drops what ensureNamespace remembers of one namespace
// (Nomad said it does not exist, or berth deleted it).
func (d *Driver) forgetNamespace(name string) {
	d.mu.Lock()
	delete(d.namespaces, name)
	d.mu.Unlock()
}

// forgetNamespaces drops all of it: a new reconcile cycle checks each
// namespace again.
func (d *Driver) forgetNamespaces() {
	d.mu.Lock()
	clear(d.namespaces)
	d.mu.Unlock()
}

// namespaceGone reports whether a write into ns that Nomad refused with
// err (a 500: Nomad answers a write into a nonexistent namespace so) was
// refused because ns does not exist: Nomad says so when asked for it
// (404), whatever the write's message said.
func (d *Driver) namespaceGone(ctx context.Context, ns string, err error) bool {
	if code, _ := statusOf(err); code != http.StatusInternalServerError {
		return false
	}
	_, _, err = d.client.Namespaces().Info(ns, d.small(ctx, ""))
	return isNotFound(err)
}

func nsDescription(p *schema.Project) string {
	if p.Spec.Description != "" {
		return p.Spec.Description
	}
	return "berth project " + p.Meta.Name + " (tier " + p.Spec.Tier + ")"
}

// PruneNamespaces deletes the namespaces berth created for projects no
// longer in keep. A namespace berth did not create is never deleted; one
// that still has jobs is kept (Nomad refuses too, recording 59).
func (d *Driver) PruneNamespaces(ctx context.Context, keep []string) ([]string, error) {
	nss, _, err := d.client.Namespaces().List(d.q(ctx, ""))
	if err != nil {
		return nil, wrap(err, schema.Ref{}, "list namespaces")
	}
	kept := map[string]bool{}
	for _, k := range keep {
		kept[k] = true
	}
	var deleted []string
	for _, ns := range nss {
		if kept[ns.Name] || ns.Meta[MetaCreatedBy] != createdBy {
			continue
		}
		jobs, _, err := d.client.Jobs().List(d.q(ctx, ns.Name))
		if err != nil {
			return deleted, wrap(err, schema.Ref{}, "list jobs of namespace "+ns.Name)
		}
		if len(jobs) > 0 {
			continue
		}
		d.forgetNamespace(ns.Name)
		if _, err := d.client.Namespaces().Delete(ns.Name, d.w(ctx, "")); err != nil {
			return deleted, wrap(err, schema.Ref{}, "delete namespace "+ns.Name)
		}
		deleted = append(deleted, ns.Name)
	}
	return deleted, nil
}
