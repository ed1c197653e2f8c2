package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
)

// ErrInjected is the error an injected fault returns (wrapped).
var ErrInjected = errors.New("sim: injected fault")

var (
	_ drivers.Cluster = (*Cluster)(nil)
	_ drivers.Store   = (*Cluster)(nil)
)

// Cluster is a simulated cluster. It is safe for concurrent use. Time
// moves with its Clock; the cluster catches up with it on every call.
type Cluster struct {
	mu    sync.Mutex
	spec  Spec
	clock Clock

	runs map[schema.Ref]*run
	// order: the runs, sorted by workspace; nallocs: their allocations;
	// holder: which run holds each GPU (addRun, dropRun).
	order   []*run
	nallocs int
	holder  map[gpuKey]schema.Ref
	// stopping counts the runs stopping, so that advance, called on every
	// observe and apply, looks for runs whose stop completed only when
	// there can be some.
	stopping int
	// used sums, by node, what the runs' allocations reserve (addRun,
	// dropRun), so that fits need not add up every allocation at each start.
	used map[string]usage
	// nodeCopy: the nodes as snapshots show them, until one changes.
	nodeCopy []drivers.Node
	// kept is the progress each workspace has saved over its finished runs.
	kept map[schema.Ref]time.Duration
	// lost is the work each workspace lost over its finished runs.
	lost map[schema.Ref]time.Duration
	// finished holds the GPU-seconds of runs that are over.
	delivered, wasted float64

	// applied: the actions applied, in order, while record is set (New
	// sets it; KeepApplied turns it off).
	applied []drivers.Action
	record  bool

	failApplies  int
	failObserves int
	applyFault   func(drivers.Action) error

	history []byte // the reconciler's history, as JSON (a deep copy)

	// exits are the runs that ended on their own (Exit), until the
	// workspace is stopped or started again; seq numbers runs (Alloc.ID).
	exits map[schema.Ref]drivers.Exit
	seq   int
}

// run is one run of a workspace: all its replicas, started together.
type run struct {
	ref      schema.Ref
	allocs   []drivers.Alloc // Phase and progress fields are computed on observe
	gpus     int
	revision string
	specHash string
	priority int
	id       string

	startedAt time.Time
	runningAt time.Time     // startedAt + StartDelay
	base      time.Duration // progress kept before this run
	interval  time.Duration
	grace     time.Duration
	signal    string

	stopping bool
	signalAt time.Time
	doneAt   time.Time
	saves    bool // the checkpoint on signal finishes within the grace

	// use is each allocation's GPU utilization (SetUse), nil: none.
	use [][]float64
}

// New returns a cluster of spec's nodes on clock. The cluster owns a copy
// of spec.
func New(spec Spec, clock Clock) *Cluster {
	s := spec
	s.Nodes = slices.Clone(spec.Nodes)
	for i := range s.Nodes {
		s.Nodes[i].GPUs = slices.Clone(s.Nodes[i].GPUs)
	}
	return &Cluster{
		spec:   s,
		clock:  clock,
		runs:   map[schema.Ref]*run{},
		holder: map[gpuKey]schema.Ref{},
		kept:   map[schema.Ref]time.Duration{},
		lost:   map[schema.Ref]time.Duration{},
		exits:  map[schema.Ref]drivers.Exit{},
		record: true,
	}
}

// KeepApplied sets whether Apply records each action it applies for
// Applied (it does from New on). A trace replay turns it off: the record
// grows with every start and preemption, so with the simulated time, and
// only tests read it. Turning it off drops what was recorded.
func (c *Cluster) KeepApplied(keep bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.record = keep
	if !keep {
		c.applied = nil
	}
}

// Name returns the cluster's name from its file.
func (c *Cluster) Name() string { return c.spec.Name }

// Now returns the cluster's clock.
func (c *Cluster) Now() time.Time { return c.clock.Now() }

// progress is the work r holds at t (kept before plus this run's).
func (r *run) progress(t time.Time) time.Duration {
	end := t
	if r.stopping && r.signalAt.Before(end) {
		end = r.signalAt
	}
	if end.Before(r.runningAt) {
		return r.base
	}
	return r.base + end.Sub(r.runningAt)
}

// checkpoint returns the last periodic checkpoint of this run at t (zero
// time when none) and the progress it saved.
func (r *run) checkpoint(t time.Time) (time.Time, time.Duration) {
	end := t
	if r.stopping && r.signalAt.Before(end) {
		end = r.signalAt
	}
	if r.interval <= 0 || end.Before(r.runningAt) {
		return time.Time{}, r.base
	}
	k := end.Sub(r.runningAt) / r.interval
	if k == 0 {
		return time.Time{}, r.base
	}
	return r.runningAt.Add(k * r.interval), r.base + k*r.interval
}

// AtRisk is the work a stop of ref now would lose, in GPU-seconds,
// unless it saves on the signal: its progress since its last periodic
// checkpoint, times its GPUs (0: not running). The replay counts with
// it what preemptions of each right lose.
func (c *Cluster) AtRisk(ref schema.Ref) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.runs[ref]
	if r == nil || r.stopping || r.saves {
		return 0
	}
	now := c.clock.Now()
	_, saved := r.checkpoint(now)
	return float64(r.gpus) * (r.progress(now) - saved).Seconds()
}

// ranFor is how long r has held its GPUs doing work up to t.
func (r *run) ranFor(t time.Time) time.Duration {
	return r.progress(t) - r.base
}

// advance catches the cluster up with now: runs whose stop completed are
// removed and their outcome recorded. Callers hold c.mu.
func (c *Cluster) advance(now time.Time) {
	if c.stopping == 0 {
		return
	}
	for ref, r := range c.runs {
		if !r.stopping || now.Before(r.doneAt) {
			continue
		}
		ran := r.ranFor(r.signalAt)
		c.delivered += float64(r.gpus) * ran.Seconds()
		if r.saves {
			c.kept[ref] = r.progress(r.signalAt)
		} else {
			_, saved := r.checkpoint(r.signalAt)
			lost := r.progress(r.signalAt) - saved
			c.kept[ref] = saved
			c.lost[ref] += lost
			c.wasted += float64(r.gpus) * lost.Seconds()
		}
		c.dropRun(ref)
	}
}

// Observe returns a complete snapshot at the cluster's now, or the
// injected error.
func (c *Cluster) Observe(ctx context.Context) (drivers.Snapshot, error) {
	return c.ObserveInto(ctx, nil)
}

// ObserveInto is Observe building the snapshot's allocations in buf's
// array where it is large enough, for a caller that observes at every
// step of a long replay: a fresh array each time was 40% of what the
// replay allocated. A snapshot built on buf changes with the next
// ObserveInto on it, so the caller keeps none past that.
func (c *Cluster) ObserveInto(ctx context.Context, buf []drivers.Alloc) (drivers.Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return drivers.Snapshot{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failObserves > 0 {
		c.failObserves--
		return drivers.Snapshot{}, fmt.Errorf("sim: observe: %w", ErrInjected)
	}
	now := c.clock.Now()
	c.advance(now)
	// Nobody mutates a snapshot (drivers.Snapshot), so snapshots share one
	// copy of the nodes until a node changes, and the allocations' GPU
	// lists, which never change once started.
	if c.nodeCopy == nil {
		c.nodeCopy = slices.Clone(c.spec.Nodes)
		for i := range c.nodeCopy {
			c.nodeCopy[i].GPUs = slices.Clone(c.nodeCopy[i].GPUs)
		}
	}
	snap := drivers.Snapshot{ObservedAt: now, Nodes: c.nodeCopy}
	// Runs in Ref order, each with its replicas in order (start), so the
	// allocations come out sorted. Each run's are copied at once, then
	// given what changes with the time.
	if c.nallocs > cap(buf) {
		buf = make([]drivers.Alloc, 0, c.nallocs)
	}
	snap.Allocs = buf[:0]
	for _, r := range c.order {
		phase := drivers.AllocRunning
		switch {
		case r.stopping:
			phase = drivers.AllocStopping
		case now.Before(r.runningAt):
			phase = drivers.AllocStarting
		}
		cpAt, _ := r.checkpoint(now)
		progress := r.progress(now)
		first := len(snap.Allocs)
		snap.Allocs = append(snap.Allocs, r.allocs...)
		for i := first; i < len(snap.Allocs); i++ {
			a := &snap.Allocs[i]
			a.Phase = phase
			if r.use != nil && phase == drivers.AllocRunning {
				a.Use = &drivers.GPUUse{At: now, Percent: r.use[i-first]}
			}
			a.StartedAt = r.startedAt
			a.LastCheckpoint = cpAt
			a.Progress = progress
			a.ResumedFrom = r.base
			a.Revision = r.revision
			a.SpecHash, a.Priority = r.specHash, r.priority
		}
	}
	for _, ref := range slices.SortedFunc(maps.Keys(c.exits), cmpRef) {
		snap.Exits = append(snap.Exits, c.exits[ref])
	}
	return snap, nil
}

// Apply applies one action. Applying the same action twice has the effect
// of applying it once: starting a running workspace, or stopping one that
// is stopping or gone, does nothing. Wait is a barrier for the reconciler
// and an error here.
func (c *Cluster) Apply(ctx context.Context, a drivers.Action) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failApplies > 0 {
		c.failApplies--
		return fmt.Errorf("sim: %s %s: %w", a.Kind, a.Workspace, ErrInjected)
	}
	if c.applyFault != nil {
		if err := c.applyFault(a); err != nil {
			return fmt.Errorf("sim: %s %s: %w", a.Kind, a.Workspace, err)
		}
	}
	now := c.clock.Now()
	c.advance(now)
	var err error
	switch a.Kind {
	case drivers.ActionStart:
		if err = validate(a); err == nil {
			err = c.start(now, a)
		}
	case drivers.ActionStop, drivers.ActionPreempt:
		delete(c.exits, a.Workspace)
		c.stop(now, a.Workspace)
	case drivers.ActionUpdate:
		err = c.update(now, a)
	case drivers.ActionPurge:
		err = c.purge(a.Workspace)
	case drivers.ActionWait:
		err = fmt.Errorf("wait is a barrier for the reconciler; drivers never apply it")
	default:
		err = fmt.Errorf("unknown action kind %d", a.Kind)
	}
	if err != nil {
		return classify(a, fmt.Errorf("sim: %s %s: %w", a.Kind, a.Workspace, err))
	}
	if c.record {
		c.applied = append(c.applied, a)
	}
	return nil
}

// update changes a running workspace as Nomad does: a change to what
// its task sees (another drivers.Fingerprint) restarts it where it runs,
// losing the work since its last checkpoint, under a new run ID and the
// action's revision; a change of priority alone is made in place (the
// run, its ID and its revision stay).
func (c *Cluster) update(now time.Time, a drivers.Action) error {
	r := c.runs[a.Workspace]
	if r == nil || r.stopping {
		return nil
	}
	if a.Tier != nil {
		r.priority = a.Tier.Spec.Value
	}
	if a.Spec == nil || drivers.Fingerprint(&a.Spec.Spec) == r.specHash {
		return nil
	}
	_, saved := r.checkpoint(now)
	lost := r.progress(now) - saved
	c.delivered += float64(r.gpus) * r.ranFor(now).Seconds()
	c.wasted += float64(r.gpus) * lost.Seconds()
	c.lost[a.Workspace] += lost
	c.kept[a.Workspace] = saved
	pl := make([]drivers.Placement, 0, len(r.allocs))
	for _, al := range r.allocs {
		pl = append(pl, drivers.Placement{Replica: al.Replica, Node: al.Node, GPUs: al.GPUs})
	}
	c.dropRun(a.Workspace)
	a.Placements = pl
	return c.start(now, a)
}

func (c *Cluster) start(now time.Time, a drivers.Action) error {
	if r := c.runs[a.Workspace]; r != nil {
		if r.stopping {
			return fmt.Errorf("still stopping (until %s); start it again once it is gone", r.doneAt.Format(time.RFC3339))
		}
		return nil // already running: idempotent
	}
	delete(c.exits, a.Workspace) // a new run replaces an ended one
	if a.Spec == nil {
		return fmt.Errorf("start needs the workspace spec")
	}
	if len(a.Placements) == 0 {
		return fmt.Errorf("start needs a placement")
	}
	taken := map[gpuKey]bool{} // by this start's earlier replicas
	c.seq++
	r := &run{
		ref:       a.Workspace,
		revision:  a.Revision,
		specHash:  drivers.Fingerprint(&a.Spec.Spec),
		id:        fmt.Sprintf("run-%d", c.seq),
		startedAt: now,
		runningAt: now.Add(c.spec.StartDelay),
		base:      c.kept[a.Workspace],
		interval:  a.Spec.Spec.Checkpoint.Interval,
		priority:  tierValue(a.Tier),
		grace:     a.Spec.Spec.Checkpoint.GracePeriod,
		signal:    a.Spec.Spec.Checkpoint.Signal,
	}
	for _, p := range a.Placements {
		node := c.node(p.Node)
		if node == nil {
			return fmt.Errorf("replica %d: no node %q", p.Replica, p.Node)
		}
		if !node.Ready || !node.Eligible {
			return fmt.Errorf("replica %d: node %q takes no new work", p.Replica, p.Node)
		}
		if need := a.Spec.Spec.Resources.MemoryBytes; node.MemoryBytes > 0 && need > node.MemoryBytes {
			return fmt.Errorf("%w: replica %d: memory exhausted: it needs %d bytes, node %q has %d", errUnplaceable, p.Replica, need, p.Node, node.MemoryBytes)
		}
		for _, g := range p.GPUs {
			if !slices.ContainsFunc(node.GPUs, func(d drivers.GPU) bool { return d.ID == g }) {
				return fmt.Errorf("replica %d: node %q has no GPU %s", p.Replica, p.Node, g)
			}
			k := gpuKey{p.Node, g}
			if holder, ok := c.holder[k]; ok {
				return fmt.Errorf("replica %d: GPU %s on %q is held by %s", p.Replica, g, p.Node, holder)
			}
			if taken[k] {
				return fmt.Errorf("replica %d: GPU %s on %q is held by %s", p.Replica, g, p.Node, a.Workspace)
			}
			taken[k] = true
		}
		gpus := slices.Clone(p.GPUs)
		sort.Strings(gpus)
		// What the replica reserves, as Nomad would: its CPU share, or
		// its exclusive cores and their shares; memory; disk.
		res := a.Spec.Spec.Resources
		al := drivers.Alloc{
			ID:          r.id + "-" + strconv.Itoa(p.Replica),
			Workspace:   a.Workspace,
			Replica:     p.Replica,
			Node:        p.Node,
			GPUs:        gpus,
			CPUMHz:      res.CPUMHz + int64(res.ExclusiveCores)*node.CPUPerCore,
			Cores:       res.ExclusiveCores,
			MemoryBytes: res.MemoryBytes,
			DiskBytes:   res.DiskBytes,
		}
		if err := c.fits(node, al, r.allocs); err != nil {
			return fmt.Errorf("replica %d: %w", p.Replica, err)
		}
		addrs, err := c.ports(node.Name, a.Spec.Spec.Ports, r.allocs)
		if err != nil {
			return fmt.Errorf("replica %d: %w", p.Replica, err)
		}
		al.Addresses = addrs
		r.allocs = append(r.allocs, al)
		r.gpus += len(gpus)
	}
	// Replicas in order, as snapshots list them (Observe).
	byReplica := func(a, b drivers.Alloc) int { return a.Replica - b.Replica }
	if !slices.IsSortedFunc(r.allocs, byReplica) {
		slices.SortStableFunc(r.allocs, byReplica)
	}
	c.addRun(a.Workspace, r)
	return nil
}

// DynamicPortMin is the first port the simulator gives a dynamic port,
// as Nomad's default dynamic range starts.
const DynamicPortMin = 20000

// ports reserves ports on node for one replica, as Nomad does: a static
// port as asked (an error if a run on the node, or an earlier replica of
// this start, holds it), a dynamic one the lowest free port from
// DynamicPortMin. The host is the node's name.
func (c *Cluster) ports(node string, want []schema.Port, mine []drivers.Alloc) ([]drivers.Address, error) {
	if len(want) == 0 {
		return nil, nil
	}
	used := map[int]bool{}
	mark := func(o drivers.Alloc) {
		if o.Node == node {
			for _, ad := range o.Addresses {
				used[ad.Port] = true
			}
		}
	}
	for _, o := range mine {
		mark(o)
	}
	for _, r := range c.runs {
		for _, o := range r.allocs {
			mark(o)
		}
	}
	out := make([]drivers.Address, 0, len(want))
	for _, p := range want {
		if p.Static > 0 && used[p.Static] {
			return nil, fmt.Errorf("node %q: port %d (%s) is already reserved", node, p.Static, p.Label)
		}
		port := p.Static
		for port == 0 || (p.Static == 0 && used[port]) {
			if port == 0 {
				port = DynamicPortMin
				continue
			}
			port++
		}
		used[port] = true
		out = append(out, drivers.Address{Label: p.Label, Host: node, Port: port})
	}
	return out, nil
}

// fits reports, as an error, whether node has room for al beside every
// allocation on it (this start's earlier replicas, mine, included), in
// each dimension the node tracks: CPU shares, memory, disk and exclusive
// cores. A run still stopping holds what it has until it is gone.
func (c *Cluster) fits(node *drivers.Node, al drivers.Alloc, mine []drivers.Alloc) error {
	u := c.used[node.Name] // every run's
	u.add(&al, 1)
	for i := range mine {
		if mine[i].Node == node.Name {
			u.add(&mine[i], 1)
		}
	}
	cpu, mem, disk, cores := u.cpu, u.mem, u.disk, u.cores
	switch {
	case node.CPUMHz > 0 && cpu > node.CPUMHz:
		return fmt.Errorf("node %q has not %d MHz of CPU left (%d of %d would be held)", node.Name, al.CPUMHz, cpu, node.CPUMHz)
	case node.MemoryBytes > 0 && mem > node.MemoryBytes:
		return fmt.Errorf("node %q has not %d bytes of memory left", node.Name, al.MemoryBytes)
	case node.DiskBytes > 0 && disk > node.DiskBytes:
		return fmt.Errorf("node %q has not %d bytes of disk left", node.Name, al.DiskBytes)
	case node.CPUPerCore > 0 && cores > node.Cores:
		return fmt.Errorf("node %q has not %d exclusive cores left", node.Name, al.Cores)
	}
	return nil
}

// stop sends r its checkpoint signal: it saves all its work when the grace
// period covers the checkpoint time, else it is killed when the grace ends
// and keeps only its last periodic checkpoint.
func (c *Cluster) stop(now time.Time, ref schema.Ref) {
	r := c.runs[ref]
	if r == nil || r.stopping {
		return
	}
	r.stopping = true
	c.stopping++
	r.signalAt = now
	switch {
	case now.Before(r.runningAt):
		// Never started working: nothing to save.
		r.doneAt, r.saves = now, true
	case r.signal != "" && r.grace >= c.spec.CheckpointTime:
		r.doneAt, r.saves = now.Add(c.spec.CheckpointTime), true
	default:
		r.doneAt, r.saves = now.Add(r.grace), false
	}
	c.advance(now)
}

// purge forgets what a stopped workspace saved: a later start begins from
// nothing. A workspace that still runs is not purged.
func (c *Cluster) purge(ref schema.Ref) error {
	if r := c.runs[ref]; r != nil {
		return fmt.Errorf("%w: it still holds GPUs; stop it first", errInvalid)
	}
	delete(c.kept, ref)
	delete(c.lost, ref)
	return nil
}

func (c *Cluster) node(name string) *drivers.Node {
	for i := range c.spec.Nodes {
		if c.spec.Nodes[i].Name == name {
			return &c.spec.Nodes[i]
		}
	}
	return nil
}

// Applied returns a copy of the actions applied so far, in order (none
// while KeepApplied is off).
func (c *Cluster) Applied() []drivers.Action {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.applied)
}

// FailApplies makes the next n Apply calls fail with ErrInjected.
func (c *Cluster) FailApplies(n int) {
	c.mu.Lock()
	c.failApplies = n
	c.mu.Unlock()
}

// FailObserves makes the next n Observe calls fail with ErrInjected.
func (c *Cluster) FailObserves(n int) {
	c.mu.Lock()
	c.failObserves = n
	c.mu.Unlock()
}

// InjectApplyFault calls f before each Apply; a non-nil error fails that
// Apply with no effect. A nil f removes the fault.
func (c *Cluster) InjectApplyFault(f func(drivers.Action) error) {
	c.mu.Lock()
	c.applyFault = f
	c.mu.Unlock()
}

// Crash ends a workspace's run at once, as a failed task would: it keeps
// only its last periodic checkpoint. Crashing a workspace that is not
// running does nothing.
func (c *Cluster) Crash(ref schema.Ref) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	c.advance(now)
	r := c.runs[ref]
	if r == nil {
		return
	}
	if !r.stopping {
		r.stopping, r.signalAt = true, now
		c.stopping++
	}
	r.doneAt, r.saves = now, false
	c.advance(now)
}

// SetUse sets the GPU utilization a workspace's running allocations
// report from now on, as a driver reads it from its cluster
// (drivers.Alloc.Use, At the cluster's clock at each Observe): one
// percent for every GPU of the workspace, or one per GPU in the order
// its allocations list them (by replica, then Alloc.GPUs); none: no
// reading (Use nil, as until told). It lasts for the workspace's
// current run. An error when it does not run or the count is wrong.
func (c *Cluster) SetUse(ref schema.Ref, percent ...float64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(c.clock.Now())
	r := c.runs[ref]
	if r == nil {
		return fmt.Errorf("sim: %s does not run", ref)
	}
	for _, p := range percent {
		if p < 0 || p > 100 {
			return fmt.Errorf("sim: %s: utilization %v%%: want 0 to 100", ref, p)
		}
	}
	if len(percent) == 0 {
		r.use = nil
		return nil
	}
	if r.gpus == 0 {
		return fmt.Errorf("sim: %s holds no GPUs: it has no utilization", ref)
	}
	if len(percent) != 1 && len(percent) != r.gpus {
		return fmt.Errorf("sim: %s holds %d GPUs: give one utilization for all, or one per GPU, not %d", ref, r.gpus, len(percent))
	}
	use := make([][]float64, len(r.allocs))
	k := 0
	for i, al := range r.allocs {
		use[i] = make([]float64, len(al.GPUs))
		for j := range al.GPUs {
			if len(percent) == 1 {
				use[i][j] = percent[0]
			} else {
				use[i][j] = percent[k]
			}
			k++
		}
	}
	r.use = use
	return nil
}

// SetNodeReady marks a node up or down. A node going down kills what runs
// on it, like Crash, and reports each run it ended in Snapshot.Exits as
// the node's fault (drivers.EndNodeFault), as Nomad reports a lost
// allocation.
func (c *Cluster) SetNodeReady(name string, ready bool) error {
	c.mu.Lock()
	n := c.node(name)
	if n == nil {
		c.mu.Unlock()
		return fmt.Errorf("sim: no node %q", name)
	}
	n.Ready, n.Status = ready, ""
	if !ready {
		n.Status = "down"
	}
	c.nodeCopy = nil
	hashes := map[schema.Ref]string{} // the runs it ends, with their specs' hashes
	if !ready {
		for ref, r := range c.runs {
			if slices.ContainsFunc(r.allocs, func(a drivers.Alloc) bool { return a.Node == name }) {
				hashes[ref] = r.specHash
			}
		}
	}
	c.mu.Unlock()
	for v := range hashes {
		c.Crash(v)
	}
	c.mu.Lock()
	for v, hash := range hashes {
		c.exits[v] = drivers.Exit{Workspace: v, Failed: true, Class: drivers.EndNodeFault, Node: name,
			Message: "node " + name + " is down", At: c.clock.Now(), SpecHash: hash}
	}
	c.mu.Unlock()
	return nil
}

// SetNodeDraining starts (deadline: when it ends; zero, none) or ends a
// drain of a node: while it drains nothing new is placed on it. What runs
// there keeps running: berth moves it, as a drain asks.
func (c *Cluster) SetNodeDraining(name string, draining bool, deadline time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.node(name)
	if n == nil {
		return fmt.Errorf("sim: no node %q", name)
	}
	n.Draining, n.Eligible, n.DrainDeadline = draining, !draining, time.Time{}
	if draining {
		n.DrainDeadline = deadline
	}
	c.nodeCopy = nil
	return nil
}

// SetGPUHealthy marks a GPU of a node healthy or not (an Xid error); a
// run on it keeps running.
func (c *Cluster) SetGPUHealthy(node, id string, healthy bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.node(node)
	if n == nil {
		return fmt.Errorf("sim: no node %q", node)
	}
	for i := range n.GPUs {
		if n.GPUs[i].ID == id {
			n.GPUs[i].Healthy = healthy
			c.nodeCopy = nil
			return nil
		}
	}
	return fmt.Errorf("sim: node %s has no GPU %q", node, id)
}

// RemoveGPU takes a GPU off its node, as a GPU fallen off the bus; a run
// that holds it keeps running on what it has.
func (c *Cluster) RemoveGPU(node, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.node(node)
	if n == nil {
		return fmt.Errorf("sim: no node %q", node)
	}
	i := slices.IndexFunc(n.GPUs, func(g drivers.GPU) bool { return g.ID == id })
	if i < 0 {
		return fmt.Errorf("sim: node %s has no GPU %q", node, id)
	}
	n.GPUs = slices.Delete(n.GPUs, i, i+1)
	c.nodeCopy = nil
	return nil
}

// WorkStats is what one workspace got from the cluster.
type WorkStats struct {
	// Progress is the work it holds now (or kept, when not running).
	Progress time.Duration `json:"progress"`
	// Lost is the work it lost to stops without enough grace, over all runs.
	Lost time.Duration `json:"lost"`
}

// Stats is what the cluster delivered and lost so far.
type Stats struct {
	At                  time.Time                `json:"at"`
	GPUSecondsDelivered float64                  `json:"gpuSecondsDelivered"`
	GPUSecondsLost      float64                  `json:"gpuSecondsLost"`
	Workspaces          map[schema.Ref]WorkStats `json:"workspaces"`
}

// Stats returns the cluster's accounting at its now. Delivered counts the
// GPU-seconds of useful work (lost work included until it is lost); Lost
// counts the GPU-seconds thrown away by stops without enough grace.
func (c *Cluster) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	c.advance(now)
	s := Stats{At: now, GPUSecondsDelivered: c.delivered, GPUSecondsLost: c.wasted, Workspaces: map[schema.Ref]WorkStats{}}
	for ref, p := range c.kept {
		s.Workspaces[ref] = WorkStats{Progress: p, Lost: c.lost[ref]}
	}
	for ref, r := range c.runs {
		s.GPUSecondsDelivered += float64(r.gpus) * r.ranFor(now).Seconds()
		s.Workspaces[ref] = WorkStats{Progress: r.progress(now), Lost: c.lost[ref]}
	}
	return s
}

// LoadHistory returns a copy of the history last saved (empty at first).
func (c *Cluster) LoadHistory(ctx context.Context) (drivers.History, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var h drivers.History
	if c.history == nil {
		return h, nil
	}
	if err := json.Unmarshal(c.history, &h); err != nil {
		return h, fmt.Errorf("sim: load history: %w", err)
	}
	return h, nil
}

// SaveHistory keeps a copy of h.
func (c *Cluster) SaveHistory(ctx context.Context, h drivers.History) error {
	b, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("sim: save history: %w", err)
	}
	c.mu.Lock()
	c.history = b
	c.mu.Unlock()
	return nil
}

// Exit ends a workspace's run at once as a task that exits with code
// does, on its own: code 0 completes it (all its work kept), any other
// code fails it (the work since its last checkpoint lost). The run is
// reported in Snapshot.Exits until the workspace is stopped or started
// again; nothing restarts it by itself. Exiting a workspace that is not
// running, or is stopping, does nothing.
func (c *Cluster) Exit(ref schema.Ref, code int) { c.end(ref, code, true) }

// Finish ends a workspace's run at once with all its work kept, as a job
// that completed does: its GPUs are free and nothing is lost. Finishing a
// workspace that is not running, or is already stopping, does nothing
// (a stop ends as the stop says). Trace replay calls it when a job's work
// is done.
func (c *Cluster) Finish(ref schema.Ref) { c.end(ref, 0, false) }

// end ends ref's run with exit code (0 keeps all its work, any other
// code only what its last checkpoint saved), reported in Snapshot.Exits
// when report is set.
func (c *Cluster) end(ref schema.Ref, code int, report bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	c.advance(now)
	r := c.runs[ref]
	if r == nil || r.stopping {
		return
	}
	c.delivered += float64(r.gpus) * r.ranFor(now).Seconds()
	if code == 0 {
		c.kept[ref] = r.progress(now)
	} else {
		_, saved := r.checkpoint(now)
		lost := r.progress(now) - saved
		c.kept[ref], c.lost[ref] = saved, c.lost[ref]+lost
		c.wasted += float64(r.gpus) * lost.Seconds()
	}
	if report {
		c.exits[ref] = drivers.Exit{Workspace: ref, Failed: code != 0, ExitCode: code,
			Message: fmt.Sprintf("Exit Code: %d", code), At: now, SpecHash: r.specHash}
	}
	c.dropRun(ref)
}

// runAt orders runs by their workspace, for a binary search of order.
func runAt(r *run, ref schema.Ref) int { return cmpRef(r.ref, ref) }

// addRun and dropRun keep runs, its sorted keys (order) and the GPUs'
// holders together.
func (c *Cluster) addRun(ref schema.Ref, r *run) {
	c.dropRun(ref)
	i, _ := slices.BinarySearchFunc(c.order, ref, runAt)
	c.order = slices.Insert(c.order, i, r)
	c.nallocs += len(r.allocs)
	c.reserve(r, +1)
	c.runs[ref] = r
	for _, al := range r.allocs {
		for _, g := range al.GPUs {
			c.holder[gpuKey{al.Node, g}] = ref
		}
	}
}

func (c *Cluster) dropRun(ref schema.Ref) {
	r := c.runs[ref]
	if r == nil {
		return
	}
	if i, ok := slices.BinarySearchFunc(c.order, ref, runAt); ok {
		c.order = slices.Delete(c.order, i, i+1)
	}
	c.nallocs -= len(r.allocs)
	c.reserve(r, -1)
	if r.stopping {
		c.stopping--
	}
	for _, al := range r.allocs {
		for _, g := range al.GPUs {
			delete(c.holder, gpuKey{al.Node, g})
		}
	}
	delete(c.runs, ref)
}

// usage is what allocations reserve on one node.
type usage struct {
	cpu, mem, disk int64
	cores          int
}

// add adds (d = 1) or takes away (d = -1) al's reservation.
func (u *usage) add(al *drivers.Alloc, d int) {
	u.cpu += int64(d) * al.CPUMHz
	u.mem += int64(d) * al.MemoryBytes
	u.disk += int64(d) * al.DiskBytes
	u.cores += d * al.Cores
}

// reserve counts r's allocations in c.used (d = 1) or out of it (-1).
func (c *Cluster) reserve(r *run, d int) {
	if c.used == nil {
		c.used = map[string]usage{}
	}
	for i := range r.allocs {
		al := &r.allocs[i]
		u := c.used[al.Node]
		u.add(al, d)
		c.used[al.Node] = u
	}
}

// gpuKey names one GPU of one node.
type gpuKey struct{ node, gpu string }

func cmpRef(a, b schema.Ref) int {
	if c := strings.Compare(a.Project, b.Project); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

func tierValue(t *schema.PriorityTier) int {
	if t == nil {
		return 0
	}
	return t.Spec.Value
}
