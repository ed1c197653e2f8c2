package gpumeta

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The key recorded from a real Nomad agent (shared/nomad/16).
const recorded = "v1;pci=18,2a,ba,db;nvlink=0-1,2-3;numa=0:0-1,1:2-3"

func TestDecodeRecorded(t *testing.T) {
	got, err := Decode(map[string]string{KeyTopology: recorded, KeyCount: "4"})
	if err != nil {
		t.Fatal(err)
	}
	want := []GPU{
		{Index: 0, PCIBusID: "18", Domain: 0, NUMA: 0},
		{Index: 1, PCIBusID: "2a", Domain: 0, NUMA: 0},
		{Index: 2, PCIBusID: "ba", Domain: 1, NUMA: 1},
		{Index: 3, PCIBusID: "db", Domain: 1, NUMA: 1},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	tests := map[string]struct {
		gpus     []GPU
		topology string
	}{
		"two NVLink domains on two NUMA nodes, short PCI": {
			gpus: []GPU{
				{Index: 0, UUID: "GPU-a", PCIBusID: "00000000:18:00.0", NUMA: 0, Domain: 0, Model: "H100", MemoryMiB: 81559},
				{Index: 1, UUID: "GPU-b", PCIBusID: "00000000:2A:00.0", NUMA: 0, Domain: 0, Model: "H100", MemoryMiB: 81559},
				{Index: 2, UUID: "GPU-c", PCIBusID: "00000000:BA:00.0", NUMA: 1, Domain: 1, Model: "H100", MemoryMiB: 81559},
				{Index: 3, UUID: "GPU-d", PCIBusID: "00000000:DB:00.0", NUMA: 1, Domain: 1, Model: "H100", MemoryMiB: 81559},
			},
			topology: recorded,
		},
		"interleaved domains, full PCI ids": {
			gpus: []GPU{
				{Index: 0, UUID: "GPU-a", PCIBusID: "00000001:18:00.0", NUMA: 0, Domain: 5},
				{Index: 1, UUID: "GPU-b", PCIBusID: "00000001:19:00.0", NUMA: 0, Domain: 7},
				{Index: 2, UUID: "GPU-c", PCIBusID: "00000001:1a:00.0", NUMA: 1, Domain: 5},
			},
			topology: "v1;pci=00000001:18:00.0,00000001:19:00.0,00000001:1a:00.0;nvlink=0+2,1;numa=0:0-1,1:2",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			meta := Encode(tt.gpus)
			if got := meta[KeyTopology]; got != tt.topology {
				t.Errorf("topology = %q, want %q", got, tt.topology)
			}
			got, err := Decode(meta)
			if err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if !SamePCI(got[i].PCIBusID, tt.gpus[i].PCIBusID) {
					t.Errorf("GPU %d: PCI %q does not match %q", i, got[i].PCIBusID, tt.gpus[i].PCIBusID)
				}
				got[i].PCIBusID = tt.gpus[i].PCIBusID
			}
			// Domains come back renumbered by their lowest index.
			want := append([]GPU(nil), tt.gpus...)
			renum := map[int]int{}
			for i := range want {
				if _, ok := renum[want[i].Domain]; !ok {
					renum[want[i].Domain] = len(renum)
				}
				want[i].Domain = renum[want[i].Domain]
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	for name, v := range map[string]string{
		"unknown version":    "v2;pci=18",
		"no pci":             "v1;nvlink=0",
		"bad bus":            "v1;pci=zz",
		"index out of range": "v1;pci=18,19;nvlink=0-2",
		"two domains":        "v1;pci=18,19;nvlink=0-1,1",
		"bad numa":           "v1;pci=18;numa=x:0",
	} {
		if _, err := Decode(map[string]string{KeyTopology: v}); err == nil {
			t.Errorf("%s: Decode(%q) = nil error", name, v)
		}
	}
	if g, err := Decode(map[string]string{"other": "x"}); g != nil || err != nil {
		t.Errorf("no key: got %v, %v; want nil, nil", g, err)
	}
}

func TestSamePCI(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"00000000:18:00.0", "18", true},
		{"00000000:18:00.0", "0000:18:00.0", true},
		{"00000000:18:00.0", "19", false},
		{"00000001:18:00.0", "00000000:18:00.0", false},
		{"garbage", "18", false},
	} {
		if got := SamePCI(tt.a, tt.b); got != tt.want {
			t.Errorf("SamePCI(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

// migNode is 2 whole GPUs, a MIG-enabled GPU with 7 instances, and a GPU
// without MIG.
func migNode() []GPU {
	var mig []string
	for i := range 7 {
		mig = append(mig, fmt.Sprintf("MIG-%08d-0000-5000-8000-000000000000", i))
	}
	return []GPU{
		{Index: 0, UUID: "GPU-a", PCIBusID: "00000000:18:00.0", NUMA: 0, Domain: 0, Model: "NVIDIA A100-SXM4-80GB", MemoryMiB: 81920},
		{Index: 1, UUID: "GPU-b", PCIBusID: "00000000:2A:00.0", NUMA: 0, Domain: 0, Model: "NVIDIA A100-SXM4-80GB", MemoryMiB: 81920},
		{Index: 2, UUID: "GPU-c", PCIBusID: "00000000:BA:00.0", NUMA: 1, Domain: 1, Model: "NVIDIA A100-SXM4-80GB", MemoryMiB: 81920, MIG: mig},
		{Index: 3, UUID: "GPU-d", PCIBusID: "00000000:DB:00.0", NUMA: 1, Domain: 2, Model: "NVIDIA L40S", MemoryMiB: 46068},
	}
}

// TestMIGRoundTrip: a MIG-enabled GPU's instances come back under it;
// the keys a reader of the old format reads are the same as without
// them, and the old format reads as no MIG instances.
func TestMIGRoundTrip(t *testing.T) {
	gpus := migNode()
	meta := Encode(gpus)
	if got, want := meta[KeyMIG(2)], strings.Join(gpus[2].MIG, ","); got != want || KeyMIG(2) != "berth.gpu.g2.mig" {
		t.Errorf("%s = %q, want %q", KeyMIG(2), got, want)
	}
	for _, i := range []int{0, 1, 3} {
		if v, ok := meta[KeyMIG(i)]; ok {
			t.Errorf("GPU %d without MIG has %s = %q", i, KeyMIG(i), v)
		}
	}
	got, err := Decode(meta)
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		got[i].PCIBusID = gpus[i].PCIBusID
	}
	if d := cmp.Diff(gpus, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}

	// What an old reader reads (berth.gpu.topology, berth.gpu.count,
	// berth.gpu.g<index>) is unchanged by the MIG key, which it ignores.
	plain := migNode()
	plain[2].MIG = nil
	old := Encode(plain)
	for k, v := range meta {
		if k == KeyMIG(2) {
			continue
		}
		if old[k] != v {
			t.Errorf("%s = %q with MIG instances, %q without", k, v, old[k])
		}
	}
	if len(old) != len(meta)-1 {
		t.Errorf("keys: %d with MIG instances, %d without; want one more", len(meta), len(old))
	}

	// Metadata written before the MIG key: no MIG instances.
	back, err := Decode(old)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range back {
		if g.MIG != nil {
			t.Errorf("old metadata: GPU %d has MIG %v", g.Index, g.MIG)
		}
	}
	rec, err := Decode(map[string]string{KeyTopology: recorded})
	if err != nil || len(rec) != 4 || rec[0].MIG != nil {
		t.Errorf("recorded key: %+v, %v", rec, err)
	}
}

func TestMIGDecodeErrors(t *testing.T) {
	for name, v := range map[string]map[string]string{
		"empty list":          {KeyMIG(0): ""},
		"empty UUID":          {KeyMIG(0): "MIG-a,,MIG-b"},
		"spaces":              {KeyMIG(0): "MIG-a, MIG-b"},
		"twice on one GPU":    {KeyMIG(0): "MIG-a,MIG-a"},
		"under two GPUs":      {KeyMIG(0): "MIG-a", KeyMIG(1): "MIG-a"},
		"semicolon in a UUID": {KeyMIG(1): "MIG-a;b"},
	} {
		v[KeyTopology] = "v1;pci=18,19"
		if _, err := Decode(v); err == nil {
			t.Errorf("%s: Decode(%v) = nil error", name, v)
		}
	}
	// A MIG key past the last GPU is not this topology's: ignored.
	got, err := Decode(map[string]string{KeyTopology: "v1;pci=18", KeyMIG(1): "MIG-a"})
	if err != nil || len(got) != 1 || got[0].MIG != nil {
		t.Errorf("stray key: %+v, %v", got, err)
	}
}
