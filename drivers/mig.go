package drivers

import (
	"github.com/berth-dev/berth/schema"

	"strconv"
	"strings"
)

// MIG describes a Multi-Instance GPU instance by its device group's
// name. The NVIDIA device plugin reports each MIG instance as a device of
// its own, in a group named "<GPU> MIG <profile>", such as
// "NVIDIA A100-SXM4-40GB MIG 1g.5gb", with MIG-… IDs and its own memory;
// the GPU it slices is hidden. A GPU's Model is that group's name.
type MIG struct {
	// Parent is the model of the GPU sliced: "NVIDIA A100-SXM4-40GB".
	Parent string
	// Profile is NVIDIA's name of the slice: "1g.5gb", "3g.40gb",
	// "1g.10gb+me", or with a compute instance of its own "1c.2g.10gb".
	Profile string
	// Slices is the GPU instance's compute slices (the profile's "g"),
	// of the 7 an A100 or H100 has.
	Slices int
}

// ParseMIG reads model as the device group name of a MIG instance; ok is
// false for a whole GPU's (any name without a " MIG <profile>" suffix).
func ParseMIG(model string) (m MIG, ok bool) {
	i := strings.LastIndex(model, " MIG ")
	if i <= 0 {
		return MIG{}, false
	}
	m.Parent, m.Profile = model[:i], model[i+len(" MIG "):]
	// [<c>c.]<g>g.<mem>gb[+<extra>]
	p, _, _ := strings.Cut(m.Profile, "+")
	parts := strings.Split(p, ".")
	if len(parts) == 3 {
		if !countSuffix(parts[0], "c") {
			return MIG{}, false
		}
		parts = parts[1:]
	}
	if len(parts) != 2 || !countSuffix(parts[0], "g") || !countSuffix(parts[1], "gb") {
		return MIG{}, false
	}
	m.Slices, _ = strconv.Atoi(strings.TrimSuffix(parts[0], "g"))
	return m, true
}

// countSuffix reports whether s is a positive decimal count followed by
// unit.
func countSuffix(s, unit string) bool {
	n, ok := strings.CutSuffix(s, unit)
	if !ok || n == "" {
		return false
	}
	for _, r := range n {
		if r < '0' || r > '9' {
			return false
		}
	}
	return strings.TrimLeft(n, "0") != ""
}

// IsMIG reports whether g is a MIG instance rather than a whole GPU.
func (g *GPU) IsMIG() bool {
	_, ok := ParseMIG(g.Model)
	return ok
}

// Weight is what one device of the group named model counts in
// GPU-equivalents, for reporting: the weight of its declared kind where
// the kind gives one (kind may be nil), else 1 for a whole GPU and a MIG
// instance's compute slices of the seven a GPU has (1g.10gb: 1/7).
func Weight(kind *schema.GPUKind, model string) float64 {
	if kind != nil && kind.Spec.Weight > 0 {
		return kind.Spec.Weight
	}
	if m, ok := ParseMIG(model); ok {
		return float64(m.Slices) / 7
	}
	return 1
}
