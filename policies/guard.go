package policies

// Rule: the starvation guard. Before the queue runs it picks the
// longest-waiting workspace at maximum aging that smaller arrivals could
// starve; its reservation is made just before the first workspace that
// does not outrank it (boundBy).

// boundBy reports whether w comes no earlier in the queue's classes than
// g: w borrows while g fits in its quota, or both are alike and w's tier
// is not higher.
func (d *decider) boundBy(w, g *wsState) bool {
	wq, gq := d.inQuota(d.projs[w.proj], w), d.inQuota(d.projs[g.proj], g)
	if wq != gq {
		return gq
	}
	return w.tier <= g.tier
}

// starved picks, before the queue runs, the workspace the starvation guard
// reserves the best free GPUs for: the workspace that has waited longest among those whose aging boost is
// at its maximum, that need more GPUs than the smallest workspace waiting
// in their tier (only those can be starved by smaller arrivals taking GPUs
// one by one) and whose quota would let them run; highest tier first, then
// longest waiting, then Ref.
func (d *decider) starved() int32 {
	ag := d.policy.Aging
	if ag.Interval <= 0 || ag.Step <= 0 || ag.MaxBoost <= 0 {
		return -1
	}
	minNeed := map[int]int{}
	for _, p := range d.projs {
		for _, wi := range p.queue {
			w := d.ws[wi]
			if n, ok := minNeed[w.tier]; !ok || w.gpus*w.replicas < n {
				minNeed[w.tier] = w.gpus * w.replicas
			}
		}
	}
	var best *wsState
	bestIdx := int32(-1)
	for _, p := range d.projs {
		for _, wi := range p.queue {
			w := d.ws[wi]
			need := w.gpus * w.replicas
			if w.boost < ag.MaxBoost || w.gpus <= 0 || need <= minNeed[w.tier] {
				continue
			}
			if best != nil && (w.tier < best.tier || (w.tier == best.tier && (w.queuedSince.After(best.queuedSince) || (w.queuedSince.Equal(best.queuedSince) && !w.ref.Less(best.ref))))) {
				continue
			}
			if _, over := d.overLimit(p, w); over {
				continue
			}
			mi := d.c.modelIndex(w.model)
			if mi < 0 || d.c.index[mi][w.levels[len(w.levels)-1]].maxK < w.gpus {
				continue
			}
			best, bestIdx = w, wi
		}
	}
	return bestIdx
}
