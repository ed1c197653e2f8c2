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

// TestKindsWholeOrMIG: a kind whose match names a MIG profile matches
// MIG instances only, any other whole GPUs only; so a whole-GPU kind
// and a MIG kind never overlap, whatever their patterns.
func TestKindsWholeOrMIG(t *testing.T) {
	kind := func(match string) *GPUKind { return &GPUKind{Spec: GPUKindSpec{Match: match}} }
	h100, slice, all := kind("NVIDIA H100*"), kind("* MIG 1g.10gb"), kind("*")
	for _, c := range []struct {
		k     *GPUKind
		model string
		want  bool
	}{
		{h100, "NVIDIA H100 80GB HBM3", true},
		{h100, "NVIDIA H100 80GB HBM3 MIG 1g.10gb", false},
		{slice, "NVIDIA H100 80GB HBM3 MIG 1g.10gb", true},
		{slice, "NVIDIA H100 80GB HBM3", false},
		{all, "NVIDIA L40S", true},
		{all, "NVIDIA A100-SXM4-80GB MIG 3g.40gb", false},
	} {
		if got := c.k.Matches(c.model); got != c.want {
			t.Errorf("kind %q matches %q: %v, want %v", c.k.Spec.Match, c.model, got, c.want)
		}
	}
	if h100.Overlaps(slice) || all.Overlaps(slice) || !all.Overlaps(h100) || !slice.Overlaps(kind("* MIG *")) {
		t.Error("overlaps: a whole-GPU kind and a MIG kind never overlap; two of one sort do where their patterns do")
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

// TestQuotaAccount: a workspace counts against the kind it asks for
// where its project's quota names that kind, else against quota.gpus, as
// does an allocation of a workspace the specs no longer list; a kind's
// borrow limit left out is unlimited.
func TestQuotaAccount(t *testing.T) {
	s := &Set{
		Projects: []Project{
			{Meta: Meta{Name: "ml"}, Spec: ProjectSpec{Quota: Resources{GPUs: 1, Kinds: map[string]int{"h100": 8, "l40s": 4}},
				BorrowLimit: BorrowLimit{GPUs: 2, Kinds: map[string]int{"h100": 3}}}},
			{Meta: Meta{Name: "plain"}, Spec: ProjectSpec{Quota: Resources{GPUs: 2}}},
		},
		Workspaces: []Workspace{
			{Meta: Meta{Name: "train", Project: "ml"}, Spec: WorkspaceSpec{Resources: WorkResources{GPUKind: "h100"}}},
			{Meta: Meta{Name: "misc", Project: "ml"}, Spec: WorkspaceSpec{Resources: WorkResources{GPUKind: "a10"}}},
			{Meta: Meta{Name: "any", Project: "ml"}},
			{Meta: Meta{Name: "pref", Project: "ml"}, Spec: WorkspaceSpec{Resources: WorkResources{GPUKinds: []string{"l40s", "h100"}}}},
			{Meta: Meta{Name: "big", Project: "plain"}, Spec: WorkspaceSpec{Resources: WorkResources{GPUKind: "h100"}}},
		},
	}
	s.Sort()
	s.Kinds = []GPUKind{{Meta: Meta{Name: "h100"}, Spec: GPUKindSpec{Match: "H100*"}}, {Meta: Meta{Name: "l40s"}, Spec: GPUKindSpec{Match: "L40S"}}}
	// A workspace of kinds in order of preference counts against the
	// kind of the GPUs it holds, its first where they are of none.
	for ref, want := range map[string]string{"ml/train": "h100", "ml/misc": "", "ml/any": "", "ml/gone": "", "plain/big": "", "nope/x": "",
		"ml/pref H100 SXM": "h100", "ml/pref L40S": "l40s", "ml/pref": "l40s", "ml/pref A10": "l40s"} {
		var r Ref
		ref, model, _ := strings.Cut(ref, " ")
		if err := r.UnmarshalText([]byte(ref)); err != nil {
			t.Fatal(err)
		}
		if got := s.QuotaAccount(r, model); got != want {
			t.Errorf("QuotaAccount(%s, %q) = %q, want %q", ref, model, got, want)
		}
	}
	p := &s.Project("ml").Spec
	for account, want := range map[string][2]int{"": {1, 2}, "h100": {8, 3}, "l40s": {4, Unlimited}} {
		if q, b := p.AccountLimits(account); q != want[0] || b != want[1] {
			t.Errorf("AccountLimits(%q) = %d, %d, want %d, %d", account, q, b, want[0], want[1])
		}
	}
}
