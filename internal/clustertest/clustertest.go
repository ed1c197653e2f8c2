package clustertest

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/berth-dev/berth/drivers"
)

// Options change how Parse names things.
type Options struct {
	// NodeGPUIDs names a node's GPUs NODE-g0, NODE-g1, … instead of g0,
	// g1, ….
	NodeGPUIDs bool
}

// Parse reads cluster text observed at now into a snapshot, its nodes
// sorted by name and its allocations by workspace and replica.
func Parse(text string, now time.Time, opt Options) (*drivers.Snapshot, error) {
	snap := &drivers.Snapshot{ObservedAt: now}
	for _, l := range Lines(text) {
		f := Fields(l)
		switch f.Words[0] {
		case "node":
			n := drivers.Node{Name: f.Words[1], ID: f.Words[1], Ready: !f.Flags["notready"], Eligible: !f.Flags["ineligible"] && !f.Flags["draining"]}
			var err error
			if st, ok := f.KV["status"]; ok {
				n.Ready, n.Status = false, st
			}
			n.Draining = f.Flags["draining"]
			if dl, ok := f.KV["deadline"]; ok {
				if n.DrainDeadline, err = Rel(now, dl); err != nil {
					return nil, err
				}
			}
			if n.CPUMHz, n.MemoryBytes, n.DiskBytes, n.Cores, err = f.Resources(); err != nil {
				return nil, err
			}
			if n.Cores > 0 {
				n.CPUPerCore = n.CPUMHz / int64(n.Cores)
			}
			// drivers= and volumes= say the node reports its features.
			n.Drivers, n.HostVolumes = f.List("drivers"), f.List("volumes")
			n.Features = n.Drivers != nil || n.HostVolumes != nil
			if pl := f.Placement(); !pl.IsZero() {
				if len(pl.Datacenters) > 0 {
					n.Datacenter = pl.Datacenters[0]
				}
				n.Pool, n.Class, n.Meta = pl.NodePool, pl.NodeClass, pl.NodeMeta
			}
			count, err := f.Int("gpus", 8)
			if err != nil {
				return nil, err
			}
			doms, err := f.Int("domains", 1)
			if err != nil {
				return nil, err
			}
			numas, err := f.Int("numa", 1)
			if err != nil {
				return nil, err
			}
			bad := map[int]bool{}
			if u, ok := f.KV["unhealthy"]; ok {
				for _, s := range strings.Split(u, ",") {
					i, err := strconv.Atoi(s)
					if err != nil {
						return nil, err
					}
					bad[i] = true
				}
			}
			heldBy := map[int]string{}
			if h, ok := f.KV["held"]; ok {
				for _, s := range strings.Split(h, ",") {
					idx, job, _ := strings.Cut(s, ":")
					i, err := strconv.Atoi(idx)
					if err != nil || job == "" {
						return nil, fmt.Errorf("held=%s: want GPU:JOB,…", h)
					}
					heldBy[i] = job
				}
			}
			model := f.KV["model"]
			if model == "" {
				model = "H100"
			}
			for i := range count {
				n.GPUs = append(n.GPUs, drivers.GPU{ID: opt.gpuID(n.Name, strconv.Itoa(i)), Index: i, Model: model, Domain: i * doms / count, NUMA: i * numas / count, Healthy: !bad[i] && heldBy[i] == "", HeldBy: heldBy[i]})
			}
			// More device groups after the first: another model's whole
			// GPUs (also=MODEL:K), then MIG instances (mig=PROFILE:K),
			// split over migparents=P parent GPUs if it says so.
			parents, err := f.Int("migparents", 0)
			if err != nil || parents < 0 {
				return nil, fmt.Errorf("migparents=%s: want a count of GPUs", f.KV["migparents"])
			}
			for _, g := range [...]struct{ key, model string }{{"also", ""}, {"mig", model + " MIG "}} {
				v, ok := f.KV[g.key]
				if !ok {
					continue
				}
				name, k, _ := strings.Cut(v, ":")
				more, err := strconv.Atoi(k)
				if err != nil || name == "" {
					return nil, fmt.Errorf("%s=%s: want NAME:COUNT", g.key, v)
				}
				for j := range more {
					i := len(n.GPUs)
					gpu := drivers.GPU{ID: opt.gpuID(n.Name, strconv.Itoa(i)), Index: i, Model: g.model + name, Healthy: !bad[i] && heldBy[i] == "", HeldBy: heldBy[i]}
					if g.key == "mig" && parents > 0 {
						p := j * parents / more
						gpu.Domain, gpu.NUMA = doms+p, p*numas/parents
					}
					n.GPUs = append(n.GPUs, gpu)
				}
			}
			snap.Nodes = append(snap.Nodes, n)
		case "alloc":
			ref, err := ParseRef(f.Words[1])
			if err != nil {
				return nil, err
			}
			a := drivers.Alloc{Workspace: ref, Node: f.KV["node"], Phase: drivers.AllocRunning}
			if a.CPUMHz, a.MemoryBytes, a.DiskBytes, a.Cores, err = f.Resources(); err != nil {
				return nil, err
			}
			if a.Replica, err = f.Int("replica", 0); err != nil {
				return nil, err
			}
			for _, s := range f.List("gpus") {
				a.GPUs = append(a.GPUs, opt.gpuID(a.Node, s))
			}
			sort.Strings(a.GPUs)
			switch f.KV["phase"] {
			case "", "running":
			case "starting":
				a.Phase = drivers.AllocStarting
			case "stopping":
				a.Phase = drivers.AllocStopping
			default:
				return nil, fmt.Errorf("phase %q", f.KV["phase"])
			}
			a.StartedAt = now.Add(-time.Hour)
			if s, ok := f.KV["started"]; ok {
				if a.StartedAt, err = Rel(now, s); err != nil {
					return nil, err
				}
			}
			if s, ok := f.KV["checkpoint"]; ok {
				if a.LastCheckpoint, err = Rel(now, s); err != nil {
					return nil, err
				}
			}
			if use, ok := f.KV["use"]; ok {
				a.Use = &drivers.GPUUse{At: now}
				if s, ok := f.KV["useAt"]; ok {
					if a.Use.At, err = Rel(now, s); err != nil {
						return nil, err
					}
				}
				for _, p := range strings.Split(use, ",") {
					v, err := strconv.ParseFloat(p, 64)
					if err != nil {
						return nil, fmt.Errorf("use=%q: %w", use, err)
					}
					a.Use.Percent = append(a.Use.Percent, v)
				}
			}
			a.SpecHash = f.KV["spec"]
			snap.Allocs = append(snap.Allocs, a)
		case "exit":
			ref, err := ParseRef(f.Words[1])
			if err != nil {
				return nil, err
			}
			e := drivers.Exit{Workspace: ref, Node: f.KV["node"], Failed: f.KV["class"] != "completed"}
			if err := e.Class.UnmarshalText([]byte(f.KV["class"])); err != nil {
				return nil, err
			}
			snap.Exits = append(snap.Exits, e)
		default:
			return nil, fmt.Errorf("unknown line %q", l)
		}
	}
	sort.Slice(snap.Nodes, func(i, j int) bool { return snap.Nodes[i].Name < snap.Nodes[j].Name })
	sort.Slice(snap.Allocs, func(i, j int) bool {
		a, b := snap.Allocs[i], snap.Allocs[j]
		if a.Workspace != b.Workspace {
			return a.Workspace.Less(b.Workspace)
		}
		return a.Replica < b.Replica
	})
	return snap, nil
}

// gpuID is the ID of GPU index i of node.
func (o Options) gpuID(node, i string) string {
	if o.NodeGPUIDs {
		return node + "-g" + i
	}
	return "g" + i
}
