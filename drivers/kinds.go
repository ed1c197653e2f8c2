package drivers

import (
	"cmp"
	"math"
	"slices"

	"github.com/berth-dev/berth/schema"
)

// KindCapacity is the cluster's GPUs of one kind: a declared kind, or,
// for device groups that match none, a model.
type KindCapacity struct {
	// Kind is the declared kind (GPUKind); empty for a model whose
	// device group matches no kind: Model stands for it.
	Kind  string `json:"kind,omitempty"`
	Model string `json:"model,omitempty"`
	// GPUs counts the devices the cluster reports (whole GPUs or MIG
	// instances); Free those work may be placed on now (healthy, on a
	// ready and eligible node) that no allocation holds.
	GPUs int `json:"gpus"`
	Free int `json:"free"`
	// GPUEquivalents and FreeGPUEquivalents weigh them by
	// Weight (the kind's weight, else 1 a whole GPU and a MIG
	// instance its slices of seven), to a thousandth.
	GPUEquivalents     float64 `json:"gpuEquivalents"`
	FreeGPUEquivalents float64 `json:"freeGPUEquivalents"`
}

// GPUsByKind counts snap's GPUs by the kind set declares for them:
// every declared kind in set's order (none of its devices: zeros), then
// each model whose device group matches no kind, by model. Nil when set
// declares no kinds.
func GPUsByKind(set *schema.Set, snap *Snapshot) []KindCapacity {
	if set == nil || len(set.Kinds) == 0 {
		return nil
	}
	out := make([]KindCapacity, len(set.Kinds))
	byKind := make(map[string]int, len(set.Kinds))
	for i := range set.Kinds {
		out[i].Kind = set.Kinds[i].Meta.Name
		byKind[out[i].Kind] = i
	}
	if snap == nil {
		return out
	}
	held := map[string]bool{} // node + "\x00" + GPU ID
	for _, a := range snap.Allocs {
		for _, g := range a.GPUs {
			held[a.Node+"\x00"+g] = true
		}
	}
	type group struct {
		kind *schema.GPUKind
		i    int // in out
	}
	groups := map[string]group{} // by model: KindOf once per model
	var models []KindCapacity
	for ni := range snap.Nodes {
		n := &snap.Nodes[ni]
		for _, g := range n.GPUs {
			gr, ok := groups[g.Model]
			if !ok {
				gr.kind = set.KindOf(g.Model)
				if gr.kind != nil {
					gr.i = byKind[gr.kind.Meta.Name]
				} else {
					gr.i = -1 - len(models) // models[-1-i]
					models = append(models, KindCapacity{Model: g.Model})
				}
				groups[g.Model] = gr
			}
			var c *KindCapacity
			if gr.i >= 0 {
				c = &out[gr.i]
			} else {
				c = &models[-1-gr.i]
			}
			w := Weight(gr.kind, g.Model)
			c.GPUs++
			c.GPUEquivalents += w
			if n.Ready && n.Eligible && g.Healthy && !held[n.Name+"\x00"+g.ID] {
				c.Free++
				c.FreeGPUEquivalents += w
			}
		}
	}
	slices.SortFunc(models, func(a, b KindCapacity) int { return cmp.Compare(a.Model, b.Model) })
	out = append(out, models...)
	for i := range out {
		// Sevenths add up to 0.999…: to a thousandth, as a reader counts.
		out[i].GPUEquivalents = math.Round(out[i].GPUEquivalents*1000) / 1000
		out[i].FreeGPUEquivalents = math.Round(out[i].FreeGPUEquivalents*1000) / 1000
	}
	return out
}
