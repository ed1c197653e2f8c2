package drivers

import "testing"

func TestParseMIG(t *testing.T) {
	for _, tc := range []struct {
		model string
		want  MIG
		isMIG bool
	}{
		{"NVIDIA A100-SXM4-40GB MIG 1g.5gb", MIG{"NVIDIA A100-SXM4-40GB", "1g.5gb", 1}, true},
		{"NVIDIA A100-SXM4-80GB MIG 3g.40gb", MIG{"NVIDIA A100-SXM4-80GB", "3g.40gb", 3}, true},
		{"NVIDIA H100 80GB HBM3 MIG 1g.10gb", MIG{"NVIDIA H100 80GB HBM3", "1g.10gb", 1}, true},
		{"NVIDIA H100 80GB HBM3 MIG 7g.80gb", MIG{"NVIDIA H100 80GB HBM3", "7g.80gb", 7}, true},
		{"NVIDIA A100-SXM4-80GB MIG 1g.10gb+me", MIG{"NVIDIA A100-SXM4-80GB", "1g.10gb+me", 1}, true},
		{"NVIDIA A100-SXM4-40GB MIG 1c.2g.10gb", MIG{"NVIDIA A100-SXM4-40GB", "1c.2g.10gb", 2}, true},
		// Whole GPUs, and names that only look like one.
		{"NVIDIA H100 80GB HBM3", MIG{}, false},
		{"NVIDIA L40S", MIG{}, false},
		{"H100-fake", MIG{}, false},
		{"", MIG{}, false},
		{"MIG 1g.5gb", MIG{}, false},
		{"NVIDIA A100 MIG", MIG{}, false},
		{"NVIDIA A100 MIG 0g.5gb", MIG{}, false},
		{"NVIDIA A100 MIG 1g", MIG{}, false},
		{"NVIDIA A100 MIG xg.5gb", MIG{}, false},
		{"NVIDIA A100 MIG 1g.5gb.3", MIG{}, false},
	} {
		got, ok := ParseMIG(tc.model)
		if ok != tc.isMIG || got != tc.want {
			t.Errorf("ParseMIG(%q) = %+v, %t; want %+v, %t", tc.model, got, ok, tc.want, tc.isMIG)
		}
		g := GPU{Model: tc.model}
		if g.IsMIG() != tc.isMIG {
			t.Errorf("GPU{Model: %q}.IsMIG() = %t, want %t", tc.model, g.IsMIG(), tc.isMIG)
		}
	}
}
