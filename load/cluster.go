package load

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/schema"
)

// The loader checks the specs against the cluster files in the tree
// (kind: Cluster), read with schema.ParseCluster as drivers/sim reads them: a
// workspace whose gang cannot fit any set of its nodes is an error, and
// quotas past its CPU or memory a warning. A file schema.ParseCluster rejects
// is not checked against here; berth simulate reports its errors.

type gpuShape struct {
	model        string
	domain, numa int
}

type clusterShape struct {
	name  string
	nodes []nodeShape
	// cpu (millicores) and mem (bytes) are what its nodes offer in all;
	// -1 where some node does not say.
	cpu, mem int64
}

// nodeShape is one node: its GPUs and what a placement matches.
type nodeShape struct {
	gpus                    []gpuShape
	datacenter, pool, class string
	meta                    map[string]string
}

func clusterShapes(docs []*doc) []clusterShape {
	var out []clusterShape
	for _, d := range docs {
		if c, ok := readCluster(d); ok {
			out = append(out, c)
		}
	}
	return out
}

func readCluster(d *doc) (clusterShape, bool) {
	doc, err := json.Marshal(d.raw)
	if err != nil {
		return clusterShape{}, false
	}
	f, err := schema.ParseCluster(doc)
	if err != nil {
		return clusterShape{}, false
	}
	c := clusterShape{name: f.Name}
	for _, n := range f.Nodes {
		ns := nodeShape{datacenter: n.Datacenter, pool: n.Pool, class: n.Class, meta: n.Meta}
		for _, g := range n.GPUs {
			ns.gpus = append(ns.gpus, gpuShape{model: g.Model, domain: g.Domain, numa: g.NUMA})
		}
		c.nodes = append(c.nodes, ns)
		if n.HasCPU && c.cpu >= 0 {
			c.cpu += n.CPUMHz
		} else {
			c.cpu = -1
		}
		if n.HasMemory && c.mem >= 0 {
			c.mem += n.MemoryBytes
		} else {
			c.mem = -1
		}
	}
	return c, true
}

// checkQuotaCapacity warns when the projects' CPU or memory quotas add
// up to more than the largest cluster file offers (every node of it
// saying how much): the quotas cannot all be held at once, so in-quota
// work may wait, and tiers then rank projects' in-quota work as when GPU
// quotas overcommit the cluster. The warning is at the project whose
// quota passes the cluster's total, in name order.
func checkQuotaCapacity(projects []schema.Project, clusters []clusterShape) []Diagnostic {
	var out []Diagnostic
	for _, dm := range []struct {
		name, field string
		quota       func(*schema.Project) int64
		have        func(clusterShape) int64
		text        func(int64) string
	}{
		{"CPU", "spec.quota.cpu", func(p *schema.Project) int64 { return p.Spec.Quota.CPUMHz }, func(c clusterShape) int64 { return c.cpu }, func(m int64) string { return text.CPUQuantity(m) + " CPUs" }},
		{"memory", "spec.quota.memory", func(p *schema.Project) int64 { return p.Spec.Quota.MemoryBytes }, func(c clusterShape) int64 { return c.mem }, func(b int64) string { return text.BytesQuantity(b) + " of memory" }},
	} {
		best := clusterShape{}
		have := int64(-1)
		for _, c := range clusters {
			if h := dm.have(c); h > have {
				best, have = c, h
			}
		}
		if have < 0 {
			continue
		}
		var sum int64
		var first *schema.Project
		byName := make([]*schema.Project, len(projects))
		for i := range projects {
			byName[i] = &projects[i]
		}
		sort.Slice(byName, func(i, j int) bool { return byName[i].Meta.Name < byName[j].Meta.Name })
		for _, p := range byName {
			q := dm.quota(p)
			if q <= 0 {
				continue
			}
			sum += q
			if sum > have && first == nil {
				first = p
			}
		}
		if first != nil {
			out = append(out, warnf(first.Meta.FieldPos(dm.field), "the projects' %s quotas add up to %s, more than cluster %q has (%s): they cannot all be held at once, so in-quota work may wait and tiers then rank it across projects; lower the quotas or add nodes",
				dm.name, dm.text(sum), best.name, dm.text(have)))
		}
	}
	return out
}

// usable reports whether w may use gpu: of the model it names, and of
// its kind (nil: it asks for none); a MIG instance only when it names
// one, as the decision places them.
func usable(gpu gpuShape, w *schema.Workspace, kind *schema.GPUKind) bool {
	if w.Spec.Resources.GPUModel != "" {
		return strings.EqualFold(gpu.model, w.Spec.Resources.GPUModel) && (kind == nil || kind.Matches(gpu.model))
	}
	if kind == nil {
		return !schema.IsMIGName(gpu.model)
	}
	return kind.Matches(gpu.model)
}

// slots counts how many replicas of w fit on one node, all at once.
func slots(node []gpuShape, w *schema.Workspace, kind *schema.GPUKind) int {
	g := w.Spec.Resources.GPUs
	groups := map[[2]int]int{}
	for _, gpu := range node {
		if !usable(gpu, w, kind) {
			continue
		}
		key := [2]int{-1, -1}
		if w.Spec.Topology.NVLink == schema.ConstraintRequired {
			key[0] = gpu.domain
		}
		if w.Spec.Topology.NUMA == schema.ConstraintRequired {
			key[1] = gpu.numa
		}
		groups[key]++
	}
	n := 0
	for _, free := range groups {
		n += free / g
	}
	return n
}

// fits reports a workspace whose gang no set of the cluster's nodes can
// hold, even when the cluster is empty. kind is the GPU kind it asks for
// (nil: none).
func (c clusterShape) fits(w *schema.Workspace, kind *schema.GPUKind, d *doc) (Diagnostic, bool) {
	pl := w.Spec.Placement
	allowed := 0
	for _, node := range c.nodes {
		if pl.Allows(node.datacenter, node.pool, node.class, node.meta) {
			allowed++
		}
	}
	if allowed == 0 {
		return errorf(d.pos("spec.placement"), "workspace %q can never run: no node of cluster %q is in %s; change its placement (or its project's) or the cluster's nodes", w.Meta.Name, c.name, pl), false
	}
	if w.Spec.Resources.GPUs == 0 {
		return Diagnostic{}, true
	}
	total, best, ofKind := 0, 0, false
	for _, node := range c.nodes {
		if !pl.Allows(node.datacenter, node.pool, node.class, node.meta) {
			continue
		}
		s := slots(node.gpus, w, kind)
		total += s
		best = max(best, s)
		for _, gpu := range node.gpus {
			ofKind = ofKind || usable(gpu, w, kind)
		}
	}
	if total >= w.Spec.Replicas {
		return Diagnostic{}, true
	}
	where := ""
	if !pl.IsZero() {
		where = " in " + pl.String()
	}
	if kind != nil && !ofKind {
		return errorf(d.pos("spec.resources.gpuKind"), "workspace %q can never run: no node of cluster %q"+where+" has a GPU of kind %q (spec.match %q at %s); ask for another kind, or change the kind's match or the cluster's nodes", w.Meta.Name, c.name, kind.Meta.Name, kind.Spec.Match, kind.Meta.FieldPos("spec.match")), false
	}
	model, ofK := "", ""
	if w.Spec.Resources.GPUModel != "" {
		model = w.Spec.Resources.GPUModel + " "
	}
	if kind != nil {
		ofK = fmt.Sprintf(" of kind %q", kind.Meta.Name)
	}
	shape := fmt.Sprintf("%d %sGPUs%s", w.Spec.Resources.GPUs, model, ofK)
	if w.Spec.Resources.GPUs == 1 {
		shape = fmt.Sprintf("1 %sGPU%s", model, ofK)
	}
	var in []string
	if w.Spec.Topology.NVLink == schema.ConstraintRequired {
		in = append(in, "one NVLink domain")
	}
	if w.Spec.Topology.NUMA == schema.ConstraintRequired {
		in = append(in, "one NUMA node")
	}
	if len(in) > 0 {
		shape += " in " + strings.Join(in, " and ")
	}
	if total == 0 {
		return errorf(d.pos("spec.resources.gpus"), "workspace %q can never run: no node of cluster %q"+where+" has %s; lower its GPUs or relax its topology", w.Meta.Name, c.name, shape), false
	}
	return errorf(d.pos("spec.replicas"), "workspace %q can never run: its gang needs %d replicas of %s, but cluster %q can hold at most %d at once; lower its replicas or GPUs", w.Meta.Name, w.Spec.Replicas, shape, c.name, total), false
}
