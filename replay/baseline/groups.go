package baseline

import (
	"slices"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
)

// Device groups and GPU kinds.
//
// Nomad takes the devices of one request from one device group (one
// model), so the world splits a node whose GPUs are of several models
// into one node entry per model, a group, each with the node's name; a
// replica is placed on one group. A workspace may use the groups of its
// kind (resources.gpuKind: the kind's match; resources.gpuModel: that
// model), else of any whole GPU, never a MIG instance, as berth's policy
// places it. Kinds in order of preference (resources.gpuKinds, which a
// replay's jobs never have) are placed on their first kind alone: the
// baselines have no flavor fungibility. Workspaces that may use the same groups are of one class; a
// cluster of whole GPUs of one model where no workspace names a kind or
// a model has one class that may use every group, and the world checks
// nothing (kinds.mixed false).

// kinds are the classes of a decision's workspaces and which models each
// may use.
type kinds struct {
	// models are the cluster's models, as first met.
	models []string
	// classes are the kinds and models workspaces ask for; class 0 (no
	// entry) is any whole GPU.
	classes []classSpec
	// ok[c*len(models)+m]: class c may use model m.
	ok []bool
	// mixed: some class may not use some group, so placements check.
	mixed bool
	// last is the index of the model modelIndex found last.
	last int32
}

// classSpec is a class of workspaces: the kind and the model they ask for.
type classSpec struct{ kind, model string }

// clear empties k for the pool, keeping its memory.
func (k *kinds) clear() kinds {
	return kinds{models: clearAll(k.models), classes: clearAll(k.classes), ok: clearAll(k.ok)}
}

// modelIndex returns the index of model in k.models, adding it.
func (k *kinds) modelIndex(model string) int32 {
	if int(k.last) < len(k.models) && k.models[k.last] == model {
		return k.last
	}
	for i, m := range k.models {
		if m == model {
			k.last = int32(i)
			return k.last
		}
	}
	k.models = append(k.models, model)
	k.last = int32(len(k.models) - 1)
	return k.last
}

// class returns the class of a workspace asking for kind and model (not
// both empty), adding it.
func (k *kinds) class(kind, model string) int32 {
	for i, c := range k.classes {
		if c.kind == kind && c.model == model {
			return int32(i + 1)
		}
	}
	k.classes = append(k.classes, classSpec{kind, model})
	return int32(len(k.classes))
}

// settle decides which models each class may use, once every model and
// class is known: class 0 any whole GPU; a kind's class the models its
// match matches (a kind the specs do not declare: none); a model's class
// that model.
func (k *kinds) settle(specs *schema.Set) {
	n := len(k.models)
	k.ok = resize(k.ok, (len(k.classes)+1)*n)
	for m, model := range k.models {
		_, mig := drivers.ParseMIG(model)
		k.ok[m] = !mig
		k.mixed = k.mixed || mig
	}
	for c, cs := range k.classes {
		var kind *schema.GPUKind
		if cs.kind != "" {
			kind = specs.Kind(cs.kind)
		}
		for m, model := range k.models {
			ok := cs.model == "" || model == cs.model
			if cs.kind != "" {
				ok = ok && kind != nil && kind.Matches(model)
			} else if cs.model == "" {
				ok = k.ok[m]
			}
			k.ok[(c+1)*n+m] = ok
		}
	}
	k.mixed = k.mixed || len(k.classes) > 0
}

// allows reports whether class c may use the group of model m (-1: a
// node with no usable GPU).
func (k *kinds) allows(c, m int32) bool {
	return m >= 0 && k.ok[int(c)*len(k.models)+int(m)]
}

// groups lays out the nodes of snap as device groups (world.nodes) and
// their usable GPUs in one array (world.gpus), and gathers the models.
func (wd *world) groups(snap *drivers.Snapshot) {
	all := resize(wd.gpus, snap.UsableGPUs())[:0] // never grows: no GPU moves
	nodes := resize(wd.nodes, len(snap.Nodes))[:0]
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		first := len(all)
		model, more := int32(-1), false
		if n.Ready && n.Eligible {
			for gi := range n.GPUs { // by index: a GPU is large, its copy costly
				g := &n.GPUs[gi]
				if !g.Healthy {
					continue
				}
				if model < 0 {
					model = wd.kinds.modelIndex(g.Model)
				} else if !more && g.Model != wd.kinds.models[model] {
					more = true
				}
				if !more {
					all = append(all, gpu{id: g.ID})
				}
			}
		}
		if !more {
			// One model, or none: the node is one group.
			own := all[first:len(all):len(all)]
			nodes = append(nodes, node{name: n.Name, gpus: own, all: own, model: model})
			continue
		}
		// Several models: each model's GPUs together, the models in the
		// order of their first GPU, each in index order.
		all = all[:first]
		var seen [4]int32
		ms := seen[:0]
		for gi := range n.GPUs {
			if g := &n.GPUs[gi]; g.Healthy {
				if m := wd.kinds.modelIndex(g.Model); !slices.Contains(ms, m) {
					ms = append(ms, m)
				}
			}
		}
		g0 := len(nodes)
		for _, m := range ms {
			start := len(all)
			for gi := range n.GPUs {
				if g := &n.GPUs[gi]; g.Healthy && g.Model == wd.kinds.models[m] {
					all = append(all, gpu{id: g.ID})
				}
			}
			nodes = append(nodes, node{name: n.Name, gpus: all[start:len(all):len(all)], model: m})
		}
		for k := g0; k < len(nodes); k++ {
			nodes[k].all = all[first:len(all):len(all)]
		}
	}
	// Each GPU points to its group (nodes moves no more).
	for i := range nodes {
		nd := &nodes[i]
		for g := range nd.gpus {
			nd.gpus[g].node = nd
		}
	}
	wd.nodes, wd.gpus = nodes, all
}
