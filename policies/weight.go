package policies

import "github.com/berth-dev/berth/schema"

// Weight is p's fair-share weight, as the decision and the status use
// it: the spec's when it sets one; else its quota's GPUs, at least 1, so
// that borrowed capacity is shared in proportion to the quotas.
func Weight(p schema.Project) float64 {
	if w := p.Spec.FairShare.Weight; w > 0 {
		return w
	}
	n := p.Spec.Quota.GPUs
	for _, k := range p.Spec.Quota.Kinds {
		n += k
	}
	return float64(max(n, 1))
}
