package clustertest

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
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
	for _, l := range lines(text) {
		f := lineFields(l)
		switch f.words[0] {
		case "node":
			n := drivers.Node{Name: f.words[1], ID: f.words[1], Ready: !f.flags["notready"], Eligible: !f.flags["ineligible"] && !f.flags["draining"]}
			var err error
			if st, ok := f.kv["status"]; ok {
				n.Ready, n.Status = false, st
			}
			n.Draining = f.flags["draining"]
			if dl, ok := f.kv["deadline"]; ok {
				if n.DrainDeadline, err = rel(now, dl); err != nil {
					return nil, err
				}
			}
			if n.CPUMHz, n.MemoryBytes, n.DiskBytes, n.Cores, err = resFields(f); err != nil {
				return nil, err
			}
			if n.Cores > 0 {
				n.CPUPerCore = n.CPUMHz / int64(n.Cores)
			}
			// drivers= and volumes= say the node reports its features.
			n.Drivers, n.HostVolumes = list(f, "drivers"), list(f, "volumes")
			n.Features = n.Drivers != nil || n.HostVolumes != nil
			if pl := placementFields(f); !pl.IsZero() {
				if len(pl.Datacenters) > 0 {
					n.Datacenter = pl.Datacenters[0]
				}
				n.Pool, n.Class, n.Meta = pl.NodePool, pl.NodeClass, pl.NodeMeta
			}
			count, err := atoi(f, "gpus", 8)
			if err != nil {
				return nil, err
			}
			doms, err := atoi(f, "domains", 1)
			if err != nil {
				return nil, err
			}
			numas, err := atoi(f, "numa", 1)
			if err != nil {
				return nil, err
			}
			bad := map[int]bool{}
			if u, ok := f.kv["unhealthy"]; ok {
				for _, s := range strings.Split(u, ",") {
					i, err := strconv.Atoi(s)
					if err != nil {
						return nil, err
					}
					bad[i] = true
				}
			}
			heldBy := map[int]string{}
			if h, ok := f.kv["held"]; ok {
				for _, s := range strings.Split(h, ",") {
					idx, job, _ := strings.Cut(s, ":")
					i, err := strconv.Atoi(idx)
					if err != nil || job == "" {
						return nil, fmt.Errorf("held=%s: want GPU:JOB,…", h)
					}
					heldBy[i] = job
				}
			}
			model := f.kv["model"]
			if model == "" {
				model = "H100"
			}
			for i := range count {
				n.GPUs = append(n.GPUs, drivers.GPU{ID: opt.gpuID(n.Name, strconv.Itoa(i)), Index: i, Model: model, Domain: i * doms / count, NUMA: i * numas / count, Healthy: !bad[i] && heldBy[i] == "", HeldBy: heldBy[i]})
			}
			snap.Nodes = append(snap.Nodes, n)
		case "alloc":
			ref, err := parseRef(f.words[1])
			if err != nil {
				return nil, err
			}
			a := drivers.Alloc{Workspace: ref, Node: f.kv["node"], Phase: drivers.AllocRunning}
			if a.CPUMHz, a.MemoryBytes, a.DiskBytes, a.Cores, err = resFields(f); err != nil {
				return nil, err
			}
			if a.Replica, err = atoi(f, "replica", 0); err != nil {
				return nil, err
			}
			for _, s := range list(f, "gpus") {
				a.GPUs = append(a.GPUs, opt.gpuID(a.Node, s))
			}
			sort.Strings(a.GPUs)
			switch f.kv["phase"] {
			case "", "running":
			case "starting":
				a.Phase = drivers.AllocStarting
			case "stopping":
				a.Phase = drivers.AllocStopping
			default:
				return nil, fmt.Errorf("phase %q", f.kv["phase"])
			}
			a.StartedAt = now.Add(-time.Hour)
			if s, ok := f.kv["started"]; ok {
				if a.StartedAt, err = rel(now, s); err != nil {
					return nil, err
				}
			}
			if s, ok := f.kv["checkpoint"]; ok {
				if a.LastCheckpoint, err = rel(now, s); err != nil {
					return nil, err
				}
			}
			snap.Allocs = append(snap.Allocs, a)
		case "exit":
			ref, err := parseRef(f.words[1])
			if err != nil {
				return nil, err
			}
			e := drivers.Exit{Workspace: ref, Node: f.kv["node"], Failed: f.kv["class"] != "completed"}
			if err := e.Class.UnmarshalText([]byte(f.kv["class"])); err != nil {
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

type fields struct {
	words []string
	kv    map[string]string
	flags map[string]bool
}

func lineFields(line string) fields {
	f := fields{kv: map[string]string{}, flags: map[string]bool{}}
	for _, w := range strings.Fields(line) {
		if k, v, ok := strings.Cut(w, "="); ok {
			f.kv[k] = v
		} else {
			f.words = append(f.words, w)
			f.flags[w] = true
		}
	}
	return f
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		out = append(out, l)
	}
	return out
}

func atoi(f fields, key string, def int) (int, error) {
	v, ok := f.kv[key]
	if !ok {
		return def, nil
	}
	if v == "unlimited" {
		return schema.Unlimited, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %w", key, v, err)
	}
	return n, nil
}

// cpuMem reads cpu=CORES (millicores: 500m) and mem=SIZE (Gi/Mi) fields.
func cpuMem(f fields) (cpu, mem int64, err error) {
	if v, ok := f.kv["cpu"]; ok {
		if m, ok := strings.CutSuffix(v, "m"); ok {
			cpu, err = strconv.ParseInt(m, 10, 64)
		} else {
			var c int64
			c, err = strconv.ParseInt(v, 10, 64)
			cpu = c * 1000
		}
		if err != nil {
			return 0, 0, fmt.Errorf("cpu=%q: %w", v, err)
		}
	}
	return cpu, mem, nil
}

// size reads SIZE (Gi/Mi) field key: mem=, disk=.
func size(f fields, key string) (int64, error) {
	var mem int64
	var err error
	if v, ok := f.kv[key]; ok {
		mult := int64(1)
		switch {
		case strings.HasSuffix(v, "Gi"):
			v, mult = strings.TrimSuffix(v, "Gi"), 1<<30
		case strings.HasSuffix(v, "Mi"):
			v, mult = strings.TrimSuffix(v, "Mi"), 1<<20
		}
		var n int64
		if n, err = strconv.ParseInt(v, 10, 64); err != nil {
			return 0, fmt.Errorf("%s=%q: %w", key, v, err)
		}
		mem = n * mult
	}
	return mem, nil
}

// resFields reads a line's cpu=, mem=, disk= and cores= fields.
func resFields(f fields) (cpu, mem, disk int64, cores int, err error) {
	if cpu, _, err = cpuMem(f); err != nil {
		return
	}
	if mem, err = size(f, "mem"); err != nil {
		return
	}
	if disk, err = size(f, "disk"); err != nil {
		return
	}
	cores, err = atoi(f, "cores", 0)
	return
}

// list reads a comma-separated field, sorted; nil when absent.
func list(f fields, key string) []string {
	v, ok := f.kv[key]
	if !ok {
		return nil
	}
	out := []string{}
	if v != "" {
		out = strings.Split(v, ",")
	}
	sort.Strings(out)
	return out
}

func rel(now time.Time, s string) (time.Time, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return time.Time{}, err
	}
	return now.Add(d), nil
}

func parseRef(s string) (schema.Ref, error) {
	var r schema.Ref
	err := r.UnmarshalText([]byte(s))
	return r, err
}

// placementFields reads dc=a,b pool=P class=C meta=k:v,k2:v2 (a
// workspace's or project's placement; a node's datacenter, pool, class
// and metadata).
func placementFields(f fields) schema.Placement {
	p := schema.Placement{Datacenters: list(f, "dc"), NodePool: f.kv["pool"], NodeClass: f.kv["class"]}
	for _, kv := range list(f, "meta") {
		k, v, _ := strings.Cut(kv, ":")
		if p.NodeMeta == nil {
			p.NodeMeta = map[string]string{}
		}
		p.NodeMeta[k] = v
	}
	return p
}
