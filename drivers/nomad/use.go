package nomad

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
	"github.com/hashicorp/nomad/api"
)

// GPU utilization (drivers.Alloc.Use, issue 38): the sampler reads it
// from Nomad on a schedule of its own, in its own goroutine
// (StartSampling), and Observe gives each running allocation the last
// reading of its GPUs, without a request: a cycle never waits for it.
//
// One request per node, never one per allocation: GET
// /v1/client/stats?node_id=ID (the node's host stats; ACL node:read)
// answers for every GPU of the node, as the NVIDIA device plugin reports
// them (DeviceStats → InstanceStats[GPU ID].Stats.Attributes["GPU
// utilization"], with the time the plugin measured it), and the GPU IDs
// map the readings to allocations (Alloc.GPUs). The allocation's own
// stats (/v1/client/allocation/ID/stats; ACL read-job) carry the same
// figures for its GPUs only, with its processes' CPU and memory, so
// reading by allocation would cost a request per allocation: 10,000 a
// round at 10,000 workspaces, against one per node that holds them
// (1,250 for 10,000 one-GPU workspaces on 8-GPU nodes). Both are
// answered by the node's client agent, through the server, each one RPC.
//
// Only the nodes that are ready and hold a running allocation of
// berth's with a whole GPU (not a MIG instance, which reports no stats)
// are read, each once per Interval, at most Rate requests a second
// (and useInFlight at once): a node's reading is due Interval after its
// last one, so the requests stay spread as they started; a node that
// first holds such an allocation is read within 1/Rate of the next
// Observe that sees it (after the nodes already due). A node that does
// not answer (down, its agent hung, ACL denied) leaves its allocations
// without a reading (nil) until it answers again, Interval later: the
// sampler logs once when a node stops answering and once when it
// answers again, never per sample.

// Defaults of UseConfig.
const (
	DefaultUseInterval = time.Minute
	DefaultUseRate     = 25.0
)

// useInFlight bounds the sampler's requests in flight: a hung client
// agent holds one until the server gives up on it (30 s, seen on
// v1.6.5) or useTimeout cuts it, and the others go on meanwhile.
const useInFlight = 4

// useTimeout cuts a stats request: Nomad answers one in milliseconds.
const useTimeout = 10 * time.Second

// utilizationAttr is the stat the NVIDIA device plugin reports a GPU's
// utilization as, in percent ("N/A" as a string when NVML has none).
const utilizationAttr = "GPU utilization"

// UseConfig says how the driver samples the GPUs' utilization
// (drivers.Alloc.Use).
type UseConfig struct {
	// Off: no sampling; every allocation's Use is nil.
	Off bool
	// Interval is how often each node is read (default
	// DefaultUseInterval).
	Interval time.Duration
	// Rate bounds the requests a second (default DefaultUseRate): with
	// more nodes to read than Interval·Rate, each is read every
	// nodes/Rate instead.
	Rate float64
}

func (c UseConfig) withDefaults() UseConfig {
	if c.Interval <= 0 {
		c.Interval = DefaultUseInterval
	}
	if c.Rate <= 0 {
		c.Rate = DefaultUseRate
	}
	return c
}

// UseStats counts the sampler's work since the driver was made.
type UseStats struct {
	// Requests is the stats requests made, Failures those that failed.
	Requests, Failures int
	// Nodes is how many nodes the last Observe gave the sampler to read.
	Nodes int
}

// gpuReading is one GPU's utilization and when the node measured it.
type gpuReading struct {
	percent float64
	at      time.Time
}

// nodeUse is a node's last reading: its GPUs' by ID; gen numbers the
// readings of all nodes, so that an allocation's Use built from it is
// known to be current (useSampler.built).
type nodeUse struct {
	gen  uint64
	gpus map[string]gpuReading
}

// builtUse is the Use an allocation was given and the reading it came
// from (0: none).
type builtUse struct {
	gen uint64
	use *drivers.GPUUse
}

// useSampler is the driver's sampler of GPU utilization.
type useSampler struct {
	cfg UseConfig
	log *slog.Logger

	mu sync.Mutex
	// due holds the nodes to read (by ID), each with when its next
	// reading is due; names their names, for the log.
	due   map[string]time.Time
	names map[string]string
	// nodes are the last readings, by node ID.
	nodes map[string]*nodeUse
	gen   uint64
	// built is the Use each allocation was given by the last Observe, by
	// allocation ID: the next one shares it while the reading is the
	// same (a snapshot is never mutated).
	built map[string]builtUse
	// failing holds the nodes whose last read failed (logged once).
	failing map[string]bool
	stats   UseStats
	// wake tells the loop the nodes to read changed.
	wake chan struct{}
	// cancel and done stop the loop and say it stopped (StartSampling).
	cancel context.CancelFunc
	done   chan struct{}
}

func newUseSampler(cfg UseConfig, log *slog.Logger) *useSampler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &useSampler{cfg: cfg.withDefaults(), log: log, due: map[string]time.Time{}, names: map[string]string{},
		nodes: map[string]*nodeUse{}, built: map[string]builtUse{}, failing: map[string]bool{}, wake: make(chan struct{}, 1)}
}

// UseStats returns what the sampler did so far.
func (d *Driver) UseStats() UseStats {
	s := d.use
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Nodes = len(s.due)
	return st
}

// StartSampling starts the sampler of GPU utilization in its own
// goroutine (once: later calls do nothing), unless Config.Use.Off. It
// reads the nodes the last Observe named until ctx ends or the driver
// is closed; Close waits for it. Without it, every allocation's Use is
// nil (berth plan, berth apply).
func (d *Driver) StartSampling(ctx context.Context) {
	s := d.use
	if s.cfg.Off {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done != nil {
		return
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		d.sampleLoop(ctx)
	}()
}

// stopSampling stops the sampler and waits until it has stopped.
func (s *useSampler) stop() {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// SampleNow reads every node the last Observe named at once, whether
// due or not, and returns when all have answered or failed (tests, and
// a caller that wants a reading before it observes).
func (d *Driver) SampleNow(ctx context.Context) {
	s := d.use
	s.mu.Lock()
	ids := slices.Sorted(maps.Keys(s.due))
	next := time.Now().Add(s.cfg.Interval)
	for _, id := range ids {
		s.due[id] = next
	}
	s.mu.Unlock()
	_ = eachAtOnce(len(ids), func(i int) error {
		d.readUse(ctx, ids[i])
		return nil
	})
}

// sampleLoop reads each node when it is due, at most Rate a second and
// useInFlight at once, until ctx ends.
func (d *Driver) sampleLoop(ctx context.Context) {
	s := d.use
	gap := time.Duration(float64(time.Second) / s.cfg.Rate)
	slots := make(chan struct{}, useInFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		id, wait := s.next(time.Now())
		if id == "" {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-s.wake:
			case <-t.C:
			}
			t.Stop()
			continue
		}
		select {
		case <-ctx.Done():
			return
		case slots <- struct{}{}:
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			d.readUse(ctx, id)
		}()
		if sleep(ctx, gap) != nil {
			return
		}
	}
}

// next returns the node whose reading is most overdue at now and marks
// it read until an Interval later; "" and how long to wait when none is
// due yet.
func (s *useSampler) next(now time.Time) (string, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	best := ""
	for id, at := range s.due {
		if best == "" || at.Before(s.due[best]) || (at.Equal(s.due[best]) && id < best) {
			best = id
		}
	}
	if best == "" {
		return "", time.Hour // until an Observe names a node (wake)
	}
	if at := s.due[best]; at.After(now) {
		return "", at.Sub(now)
	}
	s.due[best] = now.Add(s.cfg.Interval)
	return best, 0
}

// readUse reads node id's stats and keeps its GPUs' utilization, or
// forgets the node's last reading when it does not answer.
func (d *Driver) readUse(ctx context.Context, id string) {
	s := d.use
	ctx, cancel := context.WithTimeout(ctx, useTimeout)
	defer cancel()
	hs, err := d.client.Nodes().Stats(id, d.small(ctx, ""))
	answered := time.Now()
	if err != nil && errors.Is(ctx.Err(), context.Canceled) {
		return // the sampler stops: not the node's fault
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Requests++
	name := cmp.Or(s.names[id], id)
	if _, wanted := s.due[id]; !wanted {
		return // no longer holds what berth samples
	}
	if err != nil {
		s.stats.Failures++
		delete(s.nodes, id)
		if !s.failing[id] {
			s.failing[id] = true
			s.log.Warn("berth cannot read the GPU utilization of node "+name+"; its workspaces show none until it answers (tried again every "+s.cfg.Interval.String()+")",
				"node", name, "err", wrap(err, schema.Ref{}, "read the stats of node "+name).Error())
		}
		return
	}
	if s.failing[id] {
		delete(s.failing, id)
		s.log.Info("berth reads the GPU utilization of node "+name+" again", "node", name)
	}
	s.gen++
	s.nodes[id] = &nodeUse{gen: s.gen, gpus: readingsOf(hs, answered)}
}

// readingsOf is the utilization of each whole GPU a node's stats report
// (MIG instances report none); a GPU whose plugin could not read it
// ("N/A") is left out. A reading without its time takes answered.
func readingsOf(hs *api.HostStats, answered time.Time) map[string]gpuReading {
	out := map[string]gpuReading{}
	for _, g := range hs.DeviceStats {
		if g == nil || g.Type != "gpu" {
			continue
		}
		for id, ds := range g.InstanceStats {
			if ds == nil || ds.Stats == nil {
				continue
			}
			pct, ok := percentOf(ds.Stats.Attributes[utilizationAttr])
			if !ok {
				continue
			}
			at := ds.Timestamp
			if at.IsZero() {
				at = answered
			}
			out[id] = gpuReading{percent: pct, at: at.UTC()}
		}
	}
	return out
}

// percentOf reads a stat in percent (an integer or a float, without a
// denominator, as the plugin reports utilization), within 0–100.
func percentOf(v *api.StatValue) (float64, bool) {
	if v == nil {
		return 0, false
	}
	var p float64
	switch {
	case v.IntNumeratorVal != nil && v.IntDenominatorVal == nil:
		p = float64(*v.IntNumeratorVal)
	case v.FloatNumeratorVal != nil && v.FloatDenominatorVal == nil:
		p = *v.FloatNumeratorVal
	default:
		return 0, false
	}
	return min(max(p, 0), 100), true
}

// attachUse gives each running allocation of snap holding whole GPUs the
// last reading of them (nil without one, or one measured before the
// allocation started: the GPU's previous holder's), and names the nodes
// that hold such allocations, for the sampler to read.
func (d *Driver) attachUse(snap *drivers.Snapshot) {
	s := d.use
	if s.cfg.Off {
		return
	}
	ready := make(map[string]string, len(snap.Nodes)) // name → ID
	mig := map[string]bool{}                          // GPU IDs of MIG instances
	for _, n := range snap.Nodes {
		if n.Ready {
			ready[n.Name] = n.ID
		}
		for _, g := range n.GPUs {
			if _, ok := drivers.ParseMIG(g.Model); ok || strings.HasPrefix(g.ID, "MIG-") {
				mig[g.ID] = true
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	want := map[string]string{}
	built := make(map[string]builtUse, len(s.built))
	for i := range snap.Allocs {
		a := &snap.Allocs[i]
		id, ok := ready[a.Node]
		if a.Phase != drivers.AllocRunning || !ok || !slices.ContainsFunc(a.GPUs, func(g string) bool { return !mig[g] }) {
			continue
		}
		want[id] = a.Node
		nu := s.nodes[id]
		if nu == nil {
			continue
		}
		b, ok := s.built[a.ID]
		if !ok || b.gen != nu.gen {
			b = builtUse{gen: nu.gen, use: useOf(a, nu, mig)}
		}
		built[a.ID], a.Use = b, b.use
	}
	s.built = built
	now, changed := time.Now(), false
	for id, name := range want {
		if _, ok := s.due[id]; !ok {
			s.due[id], changed = now, true
		}
		s.names[id] = name
	}
	for id := range s.due {
		if _, ok := want[id]; !ok {
			delete(s.due, id)
			delete(s.nodes, id)
			delete(s.names, id)
			delete(s.failing, id)
		}
	}
	if changed {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// useOf is allocation a's share of its node's reading: its whole GPUs'
// utilization in the order of a.GPUs, measured since it started; nil
// when there is none. At is the oldest of them.
func useOf(a *drivers.Alloc, nu *nodeUse, mig map[string]bool) *drivers.GPUUse {
	var u *drivers.GPUUse
	for _, g := range a.GPUs {
		r, ok := nu.gpus[g]
		if !ok || mig[g] || r.at.Before(a.StartedAt) {
			continue
		}
		if u == nil {
			u = &drivers.GPUUse{At: r.at, Percent: make([]float64, 0, len(a.GPUs))}
		}
		u.Percent = append(u.Percent, r.percent)
		if r.at.Before(u.At) {
			u.At = r.at
		}
	}
	return u
}
