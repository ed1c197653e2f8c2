package policies

import (
	"fmt"

	"github.com/berth-dev/berth/schema"
)

// Weight is p's fair-share weight, as the decision and the status use
// it: the spec's when it sets one; else its quota's GPUs, at least 1, so
// that borrowed capacity is shared in proportion to the quotas.
func Weight(p schema.Project) float64 {
	if w := p.Spec.FairShare.Weight; w > 0 {
		return w
	}
	return float64(max(p.Spec.Quota.GPUs, 1))
}

// Plural is "1 what" or "N whats".
func Plural(n int, what string) string {
	if n == 1 {
		return "1 " + what // waiting reasons are written often: no Sprintf
	}
	return fmt.Sprintf("%d %ss", n, what)
}
