package schema

import (
	"slices"
	"sort"
	"strings"
)

// KindGPUKind is the kind of a document that declares a kind of GPU.
const KindGPUKind = "GPUKind"

// GPUKind is a kind of GPU the platform schedules and gives quotas in: a
// model, or a MIG profile of one, recognised by the name of the Nomad
// device group its devices are in (the model as the NVIDIA plugin
// reports it). Kinds never overlap: a device group is of one kind at
// most.
type GPUKind struct {
	Meta Meta        `json:"metadata"`
	Spec GPUKindSpec `json:"spec"`
}

// GPUKindSpec is the body of a GPUKind.
type GPUKindSpec struct {
	// Match is the device group's name, or a pattern of it in which *
	// stands for any run of characters; compared without regard to case
	// (MatchPattern).
	Match string `json:"match"`
	// Weight is what one device of the kind counts in GPU-equivalents for
	// reporting; zero: not written, and a whole GPU counts 1, a MIG
	// instance its slices of seven (drivers.Weight).
	Weight      float64 `json:"weight,omitempty"`
	Description string  `json:"description,omitempty"`
}

// Matches reports whether a device group named model is of kind k: its
// name matches the pattern, and both are of MIG instances or neither
// (IsMIG), so that "NVIDIA H100*" is the whole H100s and not their MIG
// instances, whose groups' names start alike.
func (k *GPUKind) Matches(model string) bool {
	return k.IsMIG() == IsMIGName(model) && MatchPattern(k.Spec.Match, model)
}

// IsMIG reports whether k is a kind of MIG instances: its pattern names
// a MIG profile, as the NVIDIA device plugin names a MIG instance's
// group ("NVIDIA A100-SXM4-80GB MIG 1g.10gb", "* MIG 1g.10gb"). Any
// other kind is of whole GPUs.
func (k *GPUKind) IsMIG() bool { return IsMIGName(k.Spec.Match) }

// IsMIGName reports whether a device group's name, or a pattern of one,
// names a MIG instance: " MIG " in it, without regard to case.
func IsMIGName(s string) bool { return strings.Contains(strings.ToLower(s), " mig ") }

// Overlaps reports whether some device group would be of both kinds:
// both of whole GPUs or both of MIG instances, with patterns that
// overlap.
func (k *GPUKind) Overlaps(o *GPUKind) bool {
	return k.IsMIG() == o.IsMIG() && PatternsOverlap(k.Spec.Match, o.Spec.Match)
}

// KindOf returns the declared kind a device group named model is of, or
// nil when none matches. Kinds do not overlap (the loader checks it), so
// at most one does.
func (s *Set) KindOf(model string) *GPUKind {
	for i := range s.Kinds {
		if s.Kinds[i].Matches(model) {
			return &s.Kinds[i]
		}
	}
	return nil
}

// QuotaAccount returns the quota account an allocation of workspace ref
// on GPUs of model (the device group's name; "" when unknown) counts
// against in its project's quota (Resources.KindQuota): the name of the
// kind the workspace asks for (asking for several in order of
// preference, the one of them model is of, else its first) where its
// project's quota names that kind, else "" (quota.gpus), which also
// counts an allocation of a workspace the specs no longer list.
func (s *Set) QuotaAccount(ref Ref, model string) string {
	p := s.Project(ref.Project)
	if p == nil || len(p.Spec.Quota.Kinds) == 0 {
		return ""
	}
	w := s.Workspace(ref)
	if w == nil {
		return ""
	}
	ks := w.Spec.Resources.Kinds()
	if len(ks) == 0 {
		return ""
	}
	kind := ks[0]
	if k := s.KindOf(model); len(ks) > 1 && k != nil && slices.Contains(ks, k.Meta.Name) {
		kind = k.Meta.Name
	}
	return p.Spec.Quota.KindQuota(kind)
}

// AccountLimits returns the quota and the borrow limit in GPUs of quota
// account account (QuotaAccount) of project spec p: quota.gpus and
// borrowLimit.gpus for "", else the kind's quota.kinds and
// borrowLimit.kinds, Unlimited where borrowLimit.kinds leaves the kind
// out.
func (p *ProjectSpec) AccountLimits(account string) (quota, borrow int) {
	if account == "" {
		return p.Quota.GPUs, p.BorrowLimit.GPUs
	}
	borrow = Unlimited
	if b, ok := p.BorrowLimit.Kinds[account]; ok {
		borrow = b
	}
	return p.Quota.Kinds[account], borrow
}

// Kind returns the kind named name, or nil.
func (s *Set) Kind(name string) *GPUKind {
	i := sort.Search(len(s.Kinds), func(i int) bool { return s.Kinds[i].Meta.Name >= name })
	if i < len(s.Kinds) && s.Kinds[i].Meta.Name == name {
		return &s.Kinds[i]
	}
	return nil
}

// MatchPattern reports whether s matches pattern, in which * stands for
// any run of characters (none included) and every other character for
// itself, without regard to case: "NVIDIA H100*" matches "NVIDIA H100
// 80GB HBM3" and "nvidia h100 nvl".
func MatchPattern(pattern, s string) bool {
	p, t := strings.ToLower(pattern), strings.ToLower(s)
	// The classic greedy walk with one backtrack point: the last star.
	pi, ti, star, mark := 0, 0, -1, 0
	for ti < len(t) {
		switch {
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, ti
			pi++
		case pi < len(p) && p[pi] == t[ti]:
			pi++
			ti++
		case star >= 0:
			pi = star + 1
			mark++
			ti = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// PatternsOverlap reports whether some name matches both patterns (as
// MatchPattern reads them): two kinds whose patterns overlap would
// claim the same device group.
func PatternsOverlap(a, b string) bool {
	a, b = strings.ToLower(a), strings.ToLower(b)
	// seen[i][j]: the suffixes a[i:] and b[j:] were tried.
	seen := make([][]bool, len(a)+1)
	for i := range seen {
		seen[i] = make([]bool, len(b)+1)
	}
	var both func(i, j int) bool
	both = func(i, j int) bool {
		if seen[i][j] {
			return false
		}
		seen[i][j] = true
		switch {
		case i == len(a) && j == len(b):
			return true
		case i < len(a) && a[i] == '*':
			// The star matches nothing more, or takes b's next character
			// (or, where that is a star, lets b's star end first).
			return both(i+1, j) || (j < len(b) && both(i, j+1))
		case j < len(b) && b[j] == '*':
			return both(i, j+1) || (i < len(a) && both(i+1, j))
		case i < len(a) && j < len(b):
			return a[i] == b[j] && both(i+1, j+1)
		}
		return false
	}
	return both(0, 0)
}
