package policies

import (
	"fmt"

	"github.com/berth-dev/berth/schema"
)

// Weight is p's fair-share weight as the status reports it: 1 when the
// spec sets none.
func Weight(p schema.Project) float64 {
	if p.Spec.FairShare.Weight <= 0 {
		return 1
	}
	return p.Spec.FairShare.Weight
}

// Plural is "1 what" or "N whats".
func Plural(n int, what string) string {
	if n == 1 {
		return "1 " + what // waiting reasons are written often: no Sprintf
	}
	return fmt.Sprintf("%d %ss", n, what)
}
