package policies

// Rule: resources besides GPUs. A node must have what a replica reserves
// besides GPUs (CPU as Nomad's MHz shares, memory, disk, exclusive
// cores), in each dimension it tracks, the task driver and host volumes
// the workspace needs, and its placement (datacenter, node pool, class,
// meta); work without GPUs is packed onto ready
// nodes where it fits, nodes without GPUs first.
//
// Scenarios: testdata/resources/.

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/schema"
)

// amount is what a replica reserves on a node besides GPUs, counted as
// Nomad counts it: CPU in MHz shares (exclusive cores' shares included),
// memory and disk in bytes (whole MiB), and whole cores held exclusively.
type amount struct{ cpu, mem, disk, cores int64 }

func (a amount) add(b amount) amount {
	return amount{a.cpu + b.cpu, a.mem + b.mem, a.disk + b.disk, a.cores + b.cores}
}

// sub takes b off a, none below zero.
func (a amount) sub(b amount) amount {
	return amount{max(a.cpu-b.cpu, 0), max(a.mem-b.mem, 0), max(a.disk-b.disk, 0), max(a.cores-b.cores, 0)}
}

func (a amount) min(b amount) amount {
	return amount{min(a.cpu, b.cpu), min(a.mem, b.mem), min(a.disk, b.disk), min(a.cores, b.cores)}
}

func (a amount) zero() bool { return a == amount{} }

// within reports whether a fits in have, dimension by dimension; a
// dimension a does not ask for (zero) always fits, even where have is
// below zero (a node that does not track it, or already overcommitted).
func (a amount) within(have amount) bool {
	return (a.cpu <= 0 || a.cpu <= have.cpu) && (a.mem <= 0 || a.mem <= have.mem) &&
		(a.disk <= 0 || a.disk <= have.disk) && (a.cores <= 0 || a.cores <= have.cores)
}

// allocAmount is what allocation a holds on its node.
func allocAmount(a *drivers.Alloc) amount {
	return amount{a.CPUMHz, a.MemoryBytes, a.DiskBytes, int64(a.Cores)}
}

// nodeAmount is what node n offers in all (before any allocation berth
// sees); a dimension the node does not track is zero.
func nodeAmount(n *drivers.Node) amount {
	return amount{n.CPUMHz, n.MemoryBytes, n.DiskBytes, int64(n.Cores)}
}

// needOn is what one replica of w reserves on node ni, in the dimensions
// the node tracks (zero in the others): its CPU share or its exclusive
// cores with their shares, memory and disk.
func (d *decider) needOn(ni int, w *wsState) amount {
	n := &d.c.nodes[ni]
	var a amount
	if n.CPUMHz > 0 {
		a.cpu = w.cpu + int64(w.cores)*n.CPUPerCore
	}
	if n.MemoryBytes > 0 {
		a.mem = w.mem
	}
	if n.DiskBytes > 0 {
		a.disk = w.disk
	}
	if n.CPUPerCore > 0 {
		a.cores = int64(w.cores)
	}
	return a
}

// fitsNode reports whether node ni can run one replica of w: it has the
// task driver and host volumes w needs, and the CPU, memory, disk and
// exclusive cores, counting extra as freed (the allocations it waits
// for).
func (d *decider) fitsNode(ni int, w *wsState, extra amount) bool {
	if w.feat >= 0 && !d.feats[w.feat].ok[ni] {
		return false
	}
	return d.needOn(ni, w).within(d.free[ni].add(extra))
}

// takeNode takes one replica's CPU, memory, disk and cores on node ni,
// first from what the allocations it waits for free (extra), then from
// the free pool; journaled.
func (d *decider) takeNode(ni int, w *wsState, extra amount) {
	d.takeAmount(ni, d.needOn(ni, w).sub(extra))
}

// takeAmount takes a off node ni's free pool; journaled.
func (d *decider) takeAmount(ni int, a amount) {
	if a.zero() {
		return
	}
	d.journal = append(d.journal, undo{slot: -2, node: int32(ni), amt: d.free[ni]})
	f := &d.free[ni]
	f.cpu, f.mem, f.disk, f.cores = f.cpu-a.cpu, f.mem-a.mem, f.disk-a.disk, f.cores-a.cores
}

// featureSet is what a workspace needs of a node besides capacity: its
// task driver and the host volumes it mounts, and its placement. ok[ni]:
// node ni has them (or does not report its features) and satisfies the
// placement, which every node reports; ready: some ready, eligible node
// does.
type featureSet struct {
	driver    string
	volumes   []string
	placement schema.Placement
	ok        []bool
	ready     bool
	// missing says what no ready node has, for the wait reason.
	missing string
}

// featureOf returns the index in d.feats of the feature set a workspace
// with spec sw needs, adding it the first time (-1: it needs nothing any
// node could lack). Host volumes are named by the Volume's source (its
// name when none), as the Nomad driver mounts them; a CSI volume is not a
// node feature. (A mount's Source is what the loader resolved: the
// Volume's spec.source.)
func (d *decider) featureOf(specs *schema.Set, sw *schema.Workspace) int32 {
	driver := sw.Spec.Task.Driver
	pl := sw.Spec.Placement
	placed := !pl.IsZero()
	if len(sw.Spec.Volumes) == 0 && !placed {
		// The common case, without building a key.
		if i, ok := d.featByDriver[driver]; ok {
			return i
		}
	}
	var vols []string
	for _, m := range sw.Spec.Volumes {
		if v := specs.Volume(m.Name); v != nil && v.Spec.Type == "csi" {
			continue
		}
		vols = append(vols, cmp.Or(m.Source, m.Name))
	}
	if driver == "" && len(vols) == 0 && !placed {
		d.featByDriver[driver] = -1
		return -1
	}
	slices.Sort(vols)
	vols = slices.Compact(vols)
	// The placement's text is canonical (sorted datacenters and meta).
	key := driver + "\x00" + strings.Join(vols, "\x00") + "\x01" + pl.String()
	if i, ok := d.featIDs[key]; ok {
		return i
	}
	fs := featureSet{driver: driver, volumes: vols, placement: pl, ok: make([]bool, len(d.c.nodes))}
	lacks := map[string]bool{}
	for ni := range d.c.nodes {
		n := &d.c.nodes[ni]
		has := !placed || pl.Allows(n.Datacenter, n.Pool, n.Class, n.Meta)
		if n.Features {
			if driver != "" && !contains(n.Drivers, driver) {
				has = false
				if n.Ready && n.Eligible {
					lacks["driver"] = true
				}
			}
			for _, v := range vols {
				if !contains(n.HostVolumes, v) {
					has = false
				}
			}
		}
		fs.ok[ni] = has
		fs.ready = fs.ready || (has && n.Ready && n.Eligible)
	}
	if !fs.ready {
		fs.missing = d.missingFeature(fs)
	}
	i := int32(len(d.feats))
	d.feats = append(d.feats, fs)
	d.featIDs[key] = i
	if len(vols) == 0 && !placed {
		d.featByDriver[driver] = i
	}
	return i
}

// missingFeature names what no ready, eligible node offers of fs: the
// driver if no such node has it, else the first host volume none has,
// else the combination.
func (d *decider) missingFeature(fs featureSet) string {
	pl := fs.placement
	allows := func(n *drivers.Node) bool { return pl.Allows(n.Datacenter, n.Pool, n.Class, n.Meta) }
	ready := func(has func(n *drivers.Node) bool) bool {
		for ni := range d.c.nodes {
			n := &d.c.nodes[ni]
			if n.Ready && n.Eligible && allows(n) && (!n.Features || has(n)) {
				return true
			}
		}
		return false
	}
	in := ""
	if !pl.IsZero() {
		if !ready(func(*drivers.Node) bool { return true }) {
			return "placement: no ready, eligible node is in " + pl.String()
		}
		in = " in " + pl.String()
	}
	if fs.driver != "" && !ready(func(n *drivers.Node) bool { return contains(n.Drivers, fs.driver) }) {
		return fmt.Sprintf("no ready node%s has the %s driver", in, fs.driver)
	}
	for _, v := range fs.volumes {
		if !ready(func(n *drivers.Node) bool { return contains(n.HostVolumes, v) }) {
			return fmt.Sprintf("no ready node%s has host volume %s", in, v)
		}
	}
	what := []string{"the " + fs.driver + " driver"}
	if fs.driver == "" {
		what = nil
	}
	for _, v := range fs.volumes {
		what = append(what, "host volume "+v)
	}
	return "no ready node" + in + " has " + strings.Join(what, " and ") + " together"
}

func contains(sorted []string, s string) bool {
	_, ok := slices.BinarySearch(sorted, s)
	return ok
}

// startWithoutGPUs places every replica of a workspace that needs no GPU
// on a ready, eligible node with the driver, host volumes, CPU, memory,
// disk and cores it needs, or tells it to wait. It packs, as GPU
// placement does: nodes without GPUs first (CPU-only work keeps off the
// nodes GPU work needs), then the node left with the least free CPU
// (then memory, then name), so whole nodes stay free for large work;
// Nomad's own scheduler bin-packs too. A replica never preempts.
func (d *decider) startWithoutGPUs(w *wsState) bool {
	d.journal = d.journal[:0]
	var pls []drivers.Placement
	for r := range w.replicas {
		best := -1
		var bestLeft amount
		bestGPU := false
		for ni := range d.c.nodes {
			n := &d.c.nodes[ni]
			if !n.Ready || !n.Eligible || !d.fitsNode(ni, w, amount{}) {
				continue
			}
			gpu := len(n.GPUs) > 0
			left := d.free[ni].sub(d.needOn(ni, w))
			if best >= 0 {
				if gpu != bestGPU {
					if gpu {
						continue
					}
				} else if left.cpu != bestLeft.cpu {
					if left.cpu > bestLeft.cpu {
						continue
					}
				} else if left.mem >= bestLeft.mem {
					continue
				}
			}
			best, bestLeft, bestGPU = ni, left, gpu
		}
		if best < 0 {
			d.rollback()
			d.wait(w, d.noNodeReason(w))
			return false
		}
		d.takeNode(best, w, amount{})
		pls = append(pls, drivers.Placement{Replica: r, Node: d.c.nodes[best].Name}) // GPUs nil for none, as drivers.PlacementsOf gives
	}
	d.journal = d.journal[:0]
	w.out.Verdict = VerdictStart
	w.out.Placements = pls
	w.out.Reason = Reason{ReasonNone, "starts; needs no GPU"}
	return true
}

// noNodeReason explains why no ready node can take one more replica of
// w, which needs no GPU.
func (d *decider) noNodeReason(w *wsState) Reason {
	if w.feat >= 0 && !d.feats[w.feat].ready {
		return d.featureReason(w)
	}
	best, found := amount{}, ""
	for ni := range d.c.nodes {
		n := &d.c.nodes[ni]
		if !n.Ready || !n.Eligible || (w.feat >= 0 && !d.feats[w.feat].ok[ni]) {
			continue
		}
		if f := d.free[ni]; found == "" || f.cpu > best.cpu {
			best, found = f, n.Name
		}
	}
	if found == "" {
		return Reason{ReasonCapacity, "capacity: no ready, eligible node"}
	}
	gang := ""
	if w.replicas > 1 {
		gang = fmt.Sprintf(" for all %d replicas", w.replicas)
	}
	return Reason{ReasonCapacity, fmt.Sprintf("capacity: no node has %s free%s (best: %s has %s)",
		resources(w.cpu, w.cores, w.mem, w.disk), gang, found, d.freeText(w, best))}
}

// freeText writes, of free amount f, the dimensions w asks for (zero
// included): "0 MHz CPU and 6 GiB memory".
func (d *decider) freeText(w *wsState, f amount) string {
	var parts []string
	if w.cpu > 0 || w.cores > 0 {
		parts = append(parts, fmt.Sprintf("%d MHz CPU", max(f.cpu, 0)))
	}
	if w.cores > 0 {
		parts = append(parts, text.Plural(int(max(f.cores, 0)), "exclusive core"))
	}
	if w.mem > 0 {
		parts = append(parts, bytesText(max(f.mem, 0))+" memory")
	}
	if w.disk > 0 {
		parts = append(parts, bytesText(max(f.disk, 0))+" disk")
	}
	return joinAnd(parts)
}

func joinAnd(parts []string) string {
	switch len(parts) {
	case 0:
		return "nothing"
	case 1:
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// resources writes CPU, cores, memory and disk for a person: "500 MHz
// CPU, 2 GiB memory and 300 MiB disk". Zero parts are left out.
func resources(cpu int64, cores int, mem, disk int64) string {
	var parts []string
	if cpu > 0 {
		parts = append(parts, fmt.Sprintf("%d MHz CPU", cpu))
	}
	if cores > 0 {
		parts = append(parts, text.Plural(cores, "exclusive core"))
	}
	if mem > 0 {
		parts = append(parts, bytesText(mem)+" memory")
	}
	if disk > 0 {
		parts = append(parts, bytesText(disk)+" disk")
	}
	return joinAnd(parts)
}

// bytesText writes whole MiB or GiB ("300 MiB", "16 GiB"), else bytes.
func bytesText(b int64) string {
	switch {
	case b%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", b>>30)
	case b%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", b>>20)
	}
	return fmt.Sprintf("%d bytes", b)
}
