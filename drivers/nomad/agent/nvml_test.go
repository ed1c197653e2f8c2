//go:build cgo

package agent

import (
	"fmt"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/google/go-cmp/cmp"

	"github.com/berth-dev/berth/drivers/nomad/gpumeta"
)

// topology sets answers on a go-nvml mock server: deterministic UUIDs and
// PCI bus IDs, NUMA nodes, and NVLink peer-to-peer within each domain.
func topology(s *server.Server, numa func(i int) int, domain func(i int) int) {
	devs := make([]*server.Device, len(s.Devices))
	for i, d := range s.Devices {
		devs[i] = d.(*server.Device)
	}
	for i, d := range devs {
		i, d := i, d
		d.UUID = fmt.Sprintf("GPU-%08d-0000-4000-8000-000000000000", i)
		bus := fmt.Sprintf("00000000:%02X:00.0", []int{0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb}[i%8])
		d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
			var p nvml.PciInfo
			for k := 0; k < len(bus); k++ {
				p.BusId[k] = int8(bus[k])
			}
			return p, nvml.SUCCESS
		}
		d.GetNumaNodeIdFunc = func() (int, nvml.Return) {
			if numa == nil {
				return 0, nvml.ERROR_NOT_SUPPORTED
			}
			return numa(i), nvml.SUCCESS
		}
		d.GetP2PStatusFunc = func(other nvml.Device, idx nvml.GpuP2PCapsIndex) (nvml.GpuP2PStatus, nvml.Return) {
			j := other.(*server.Device).Index
			if idx == nvml.P2P_CAPS_INDEX_NVLINK && domain != nil && domain(i) == domain(j) {
				return nvml.P2P_STATUS_OK, nvml.SUCCESS
			}
			return nvml.P2P_STATUS_NOT_SUPPORTED, nvml.SUCCESS
		}
	}
}

func TestReadMockedTopologies(t *testing.T) {
	tests := map[string]struct {
		numa, domain func(int) int
		want         string
	}{
		"DGX H100: two 4-GPU NVLink domains on two NUMA nodes": {
			numa:   func(i int) int { return i / 4 },
			domain: func(i int) int { return i / 4 },
			want:   "v1;pci=18,2a,3a,5d,9a,ab,ba,db;nvlink=0-3,4-7;numa=0:0-3,1:4-7",
		},
		"NVSwitch: one domain of 8, four NUMA nodes": {
			numa:   func(i int) int { return i / 2 },
			domain: func(int) int { return 0 },
			want:   "v1;pci=18,2a,3a,5d,9a,ab,ba,db;nvlink=0-7;numa=0:0-1,1:2-3,2:4-5,3:6-7",
		},
		"PCIe box: no NVLink, NUMA unknown": {
			want: "v1;pci=18,2a,3a,5d,9a,ab,ba,db;nvlink=0,1,2,3,4,5,6,7;numa=",
		},
		"interleaved NVLink pairs": {
			numa:   func(i int) int { return 0 },
			domain: func(i int) int { return i % 2 },
			want:   "v1;pci=18,2a,3a,5d,9a,ab,ba,db;nvlink=0+2+4+6,1+3+5+7;numa=0:0-7",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			s := dgxh100.New()
			topology(s, tt.numa, tt.domain)
			r, err := newNVMLReader(s)
			if err != nil {
				t.Fatal(err)
			}
			gpus, err := r.Read()
			if err != nil {
				t.Fatal(err)
			}
			meta := gpumeta.Encode(gpus)
			if got := meta[gpumeta.KeyTopology]; got != tt.want {
				t.Errorf("topology = %q\nwant       %q", got, tt.want)
			}
			if meta[gpumeta.KeyCount] != "8" {
				t.Errorf("count = %q", meta[gpumeta.KeyCount])
			}
			if got, want := meta["berth.gpu.5"], "uuid=GPU-00000005-0000-4000-8000-000000000000;mem=81920;model=NVIDIA H100 80GB HBM3"; got != want {
				t.Errorf("berth.gpu.5 = %q, want %q", got, want)
			}
			// The driver reads back what the agent wrote.
			back, err := gpumeta.Decode(meta)
			if err != nil {
				t.Fatal(err)
			}
			for i := range back {
				if back[i].Domain != gpus[i].Domain || back[i].UUID != gpus[i].UUID || !gpumeta.SamePCI(back[i].PCIBusID, gpus[i].PCIBusID) {
					t.Errorf("GPU %d: decoded %+v from %+v", i, back[i], gpus[i])
				}
			}
			if err := r.Close(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestInitFailureCallsNothingElse: with no driver library, Init fails and
// the reader calls no other NVML function (the bare mock panics on any
// function it was not given).
func TestInitFailureCallsNothingElse(t *testing.T) {
	for ret, want := range map[nvml.Return]string{
		nvml.ERROR_LIBRARY_NOT_FOUND: "libnvidia-ml.so.1 was not found",
		nvml.ERROR_DRIVER_NOT_LOADED: "kernel driver is not loaded",
		nvml.ERROR_UNKNOWN:           "error code 999",
	} {
		lib := &mock.Interface{InitFunc: func() nvml.Return { return ret }}
		r, err := newNVMLReader(lib)
		if r != nil || err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "NVML is not available") {
			t.Errorf("Init %d: reader %v, error %v; want an error saying %q", ret, r, err, want)
		}
		if n := len(lib.InitCalls()); n != 1 {
			t.Errorf("Init called %d times", n)
		}
	}
}

func TestDomains(t *testing.T) {
	// 0-1 linked, 1-3 linked (so 0,1,3 share a domain), 2 alone.
	links := map[[2]int]bool{{0, 1}: true, {1, 3}: true}
	got := Domains(4, func(i, j int) bool { return links[[2]int{i, j}] })
	if d := cmp.Diff([]int{0, 0, 1, 0}, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}

// TestLiveNVML reads the real GPUs where NVML is there (a GPU node) and
// checks the metadata round-trips; elsewhere it skips, saying why.
func TestLiveNVML(t *testing.T) {
	r, err := NewNVMLReader()
	if err != nil {
		t.Skipf("no NVML on this machine: %v", err)
	}
	defer r.Close()
	gpus, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	meta := gpumeta.Encode(gpus)
	back, err := gpumeta.Decode(meta)
	if err != nil || len(back) != len(gpus) {
		t.Fatalf("decode %v: %v", meta, err)
	}
	for i, g := range gpus {
		if !strings.HasPrefix(g.UUID, "GPU-") || !gpumeta.SamePCI(g.PCIBusID, back[i].PCIBusID) || g.MemoryMiB <= 0 || g.Model == "" {
			t.Errorf("GPU %d: %+v", i, g)
		}
	}
	t.Logf("%s: %s", Summary(gpus), meta[gpumeta.KeyTopology])
}
