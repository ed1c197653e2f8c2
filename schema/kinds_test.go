package schema

import (
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestMatchPattern(t *testing.T) {
	for _, c := range []struct {
		pattern, s string
		want       bool
	}{
		{"NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3", true},
		{"NVIDIA H100 80GB HBM3", "nvidia h100 80gb hbm3", true},
		{"NVIDIA H100*", "NVIDIA H100 NVL", true},
		{"NVIDIA H100*", "NVIDIA H10", false},
		{"* MIG 1g.10gb", "NVIDIA A100-SXM4-80GB MIG 1g.10gb", true},
		{"* MIG 1g.10gb", "NVIDIA A100-SXM4-80GB MIG 1g.10gb+me", false},
		{"*MIG*", "NVIDIA A100-SXM4-80GB", false},
		{"*", "", true},
		{"a*b*c", "abxbc", true},
		{"a*b*c", "acb", false},
	} {
		if got := MatchPattern(c.pattern, c.s); got != c.want {
			t.Errorf("MatchPattern(%q, %q) = %v, want %v", c.pattern, c.s, got, c.want)
		}
	}
}

// TestPatternsOverlap checks the overlap test against brute force: over
// a two-letter alphabet, two patterns overlap exactly when some string
// of bounded length matches both (a shortest common match is no longer
// than the two patterns together).
func TestPatternsOverlap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		gen := rapid.StringOfN(rapid.SampledFrom([]rune{'a', 'b', '*'}), 0, 5, -1)
		a, b := gen.Draw(t, "a"), gen.Draw(t, "b")
		want := false
		for n := 0; n <= len(a)+len(b) && !want; n++ {
			for bits := 0; bits < 1<<n && !want; bits++ {
				var s strings.Builder
				for i := range n {
					s.WriteByte("ab"[bits>>i&1])
				}
				want = MatchPattern(a, s.String()) && MatchPattern(b, s.String())
			}
		}
		if got := PatternsOverlap(a, b); got != want {
			t.Fatalf("PatternsOverlap(%q, %q) = %v, want %v", a, b, got, want)
		}
	})
}
