package nomadfake

import (
	"testing"

	"github.com/berth-dev/berth/drivers/nomad/gpumeta"
)

// TestDottedIdentifier: the fake takes the dynamic metadata keys Nomad
// takes (each dot-separated part an HCL identifier: Nomad v1.6.5 answered
// 400 to berth.gpu.0), and every key berth agent writes is one.
func TestDottedIdentifier(t *testing.T) {
	for key, want := range map[string]bool{
		"gpu": true, "berth.gpu.topology": true, "berth.gpu.g0": true, "berth.gpu.g12.mig": true, "a-b._c": true,
		"berth.gpu.0": false, "berth.gpu.0.mig": false, "": false, "a..b": false, "a.": false, "-a": false, "a b": false, "a/b": false,
	} {
		if got := DottedIdentifier(key); got != want {
			t.Errorf("DottedIdentifier(%q) = %v, want %v", key, got, want)
		}
	}
	gpus := []gpumeta.GPU{
		{Index: 0, UUID: "GPU-a", PCIBusID: "00000000:18:00.0"},
		{Index: 1, UUID: "GPU-b", PCIBusID: "00000000:2a:00.0", MIG: []string{"MIG-a", "MIG-b"}},
	}
	for key := range gpumeta.Encode(gpus) {
		if !DottedIdentifier(key) {
			t.Errorf("berth agent writes %q, which Nomad refuses", key)
		}
	}
}
