//go:build cgo

package agent

import (
	"fmt"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
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
			if got, want := meta["berth.gpu.g5"], "uuid=GPU-00000005-0000-4000-8000-000000000000;mem=81920;model=NVIDIA H100 80GB HBM3"; got != want {
				t.Errorf("berth.gpu.g5 = %q, want %q", got, want)
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

// migUUID is MIG instance j of GPU i in migServer.
func migUUID(i, j int) string { return fmt.Sprintf("MIG-%08d-%04d-5000-8000-000000000000", i, j) }

// migServer is a node of 4 A100s: GPUs 0 and 1 whole (MIG mode off),
// GPU 2 MIG-enabled with 7 1g.10gb instances, GPU 3 one whose MIG calls
// are not supported (it answers as a GPU before Ampere does). GPUs 0-1
// share NVLink on NUMA node 0; 2 and 3 are on NUMA node 1, each a domain
// of its own. No GPU but 2 answers the MIG device calls: the mock panics
// if the reader asks them.
func migServer(t *testing.T) (*server.Server, []*server.Device) {
	t.Helper()
	s, err := server.New(server.WithGPUs(gpus.Multiple(4, gpus.A100_SXM4_80GB)...))
	if err != nil {
		t.Fatal(err)
	}
	topology(s, func(i int) int { return i / 2 }, func(i int) int { return []int{0, 0, 1, 2}[i] })
	devs := make([]*server.Device, len(s.Devices))
	for i, d := range s.Devices {
		devs[i] = d.(*server.Device)
	}
	mig := devs[2]
	mig.MigMode = nvml.DEVICE_MIG_ENABLE
	mig.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	mig.GetMigDeviceHandleByIndexFunc = func(j int) (nvml.Device, nvml.Return) {
		if j < 0 || j >= 7 {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		return &mock.Device{GetUUIDFunc: func() (string, nvml.Return) { return migUUID(2, j), nvml.SUCCESS }}, nvml.SUCCESS
	}
	old := devs[3]
	old.GetNameFunc = func() (string, nvml.Return) { return "NVIDIA L40S", nvml.SUCCESS }
	old.GetMigModeFunc = func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED }
	return s, devs
}

// TestReadMIG: the MIG-enabled GPU's 7 instances are published under it
// (berth.gpu.g2.mig); the whole GPUs, MIG mode off or MIG not supported,
// have none, and the whole-GPU topology is as without MIG.
func TestReadMIG(t *testing.T) {
	s, _ := migServer(t)
	r, err := newNVMLReader(s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for j := range 7 {
		want = append(want, migUUID(2, j))
	}
	for i, g := range got {
		w := []string(nil)
		if i == 2 {
			w = want
		}
		if d := cmp.Diff(w, g.MIG); d != "" {
			t.Errorf("GPU %d MIG (-want +got)\n%s", i, d)
		}
	}
	meta := gpumeta.Encode(got)
	if v, want := meta[gpumeta.KeyTopology], "v1;pci=18,2a,3a,5d;nvlink=0-1,2,3;numa=0:0-1,1:2-3"; v != want {
		t.Errorf("topology = %q, want %q", v, want)
	}
	if v, want := meta["berth.gpu.g2.mig"], strings.Join(want, ","); v != want {
		t.Errorf("berth.gpu.g2.mig = %q, want %q", v, want)
	}
	if len(meta) != 2+4+1 {
		t.Errorf("metadata %v: want topology, count, 4 GPUs and one MIG list", meta)
	}
	if v, want := meta["berth.gpu.g3"], "uuid=GPU-00000003-0000-4000-8000-000000000000;mem=81920;model=NVIDIA L40S"; v != want {
		t.Errorf("berth.gpu.g3 = %q, want %q", v, want)
	}
	back, err := gpumeta.Decode(meta)
	if err != nil || !cmp.Equal(back[2].MIG, want) {
		t.Errorf("decoded %+v, %v", back, err)
	}
	if sum, want := Summary(got), "4 GPUs (1× NVIDIA L40S, 3× NVIDIA A100-SXM4-80GB) in 3 NVLink domain(s), 7 MIG instance(s) on 1 of them"; sum != want {
		t.Errorf("Summary = %q, want %q", sum, want)
	}
}

// TestReadMIGSparse: an index without an instance (ERROR_NOT_FOUND, as
// after an instance was destroyed) is skipped.
func TestReadMIGSparse(t *testing.T) {
	s, devs := migServer(t)
	devs[2].GetMigDeviceHandleByIndexFunc = func(j int) (nvml.Device, nvml.Return) {
		if j%3 != 0 {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return &mock.Device{GetUUIDFunc: func() (string, nvml.Return) { return migUUID(2, j), nvml.SUCCESS }}, nvml.SUCCESS
	}
	r, _ := newNVMLReader(s)
	got, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{migUUID(2, 0), migUUID(2, 3), migUUID(2, 6)}; !cmp.Equal(got[2].MIG, want) {
		t.Errorf("MIG = %v, want %v", got[2].MIG, want)
	}
}

// TestReadMIGErrors: a MIG call failing otherwise than "not supported"
// fails the read with an error naming the GPU (the agent reports it as
// any NVML error), and a GPU answering "not supported" at any step has no
// instances.
func TestReadMIGErrors(t *testing.T) {
	tests := map[string]struct {
		set  func(d *server.Device)
		want string // error; "" none
	}{
		"MIG mode: GPU lost": {
			set: func(d *server.Device) {
				d.GetMigModeFunc = func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_GPU_IS_LOST }
			},
			want: "nvml: device 2 MIG mode: ERROR_GPU_IS_LOST",
		},
		"device count: no permission": {
			set: func(d *server.Device) {
				d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_NO_PERMISSION }
			},
			want: "nvml: device 2 MIG device count: ERROR_NO_PERMISSION",
		},
		"handle: unknown error": {
			set: func(d *server.Device) {
				d.GetMigDeviceHandleByIndexFunc = func(int) (nvml.Device, nvml.Return) { return nil, nvml.ERROR_UNKNOWN }
			},
			want: "nvml: device 2 MIG device 0: ERROR_UNKNOWN",
		},
		"instance UUID: unknown error": {
			set: func(d *server.Device) {
				d.GetMigDeviceHandleByIndexFunc = func(int) (nvml.Device, nvml.Return) {
					return &mock.Device{GetUUIDFunc: func() (string, nvml.Return) { return "", nvml.ERROR_UNKNOWN }}, nvml.SUCCESS
				}
			},
			want: "nvml: device 2 MIG device 0 UUID: ERROR_UNKNOWN",
		},
		"MIG mode pending, not current": {
			set: func(d *server.Device) {
				d.GetMigModeFunc = func() (int, int, nvml.Return) { return nvml.DEVICE_MIG_DISABLE, nvml.DEVICE_MIG_ENABLE, nvml.SUCCESS }
				d.GetMaxMigDeviceCountFunc = nil
			},
		},
		"device count not supported": {
			set: func(d *server.Device) {
				d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
				d.GetMigDeviceHandleByIndexFunc = nil
			},
		},
		"handle not supported": {
			set: func(d *server.Device) {
				d.GetMigDeviceHandleByIndexFunc = func(int) (nvml.Device, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
			},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			s, devs := migServer(t)
			tt.set(devs[2])
			r, err := newNVMLReader(s)
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.Read()
			if tt.want != "" {
				if err == nil || err.Error() != tt.want {
					t.Errorf("error %v, want %q", err, tt.want)
				}
				return
			}
			if err != nil || len(got) != 4 || got[2].MIG != nil {
				t.Errorf("got %+v, %v; want 4 GPUs without MIG instances", got, err)
			}
		})
	}
}

// TestReadWithoutMIGFunctions: a driver library without the MIG
// functions (older than MIG) reads as GPUs without MIG; no MIG function
// is called (calling one the library lacks would kill the process).
func TestReadWithoutMIGFunctions(t *testing.T) {
	s, devs := migServer(t)
	s.LookupSymbolFunc = func(sym string) error {
		if sym == "nvmlDeviceGetMaxMigDeviceCount" {
			return fmt.Errorf("%s: undefined symbol", sym)
		}
		return nil
	}
	for _, d := range devs {
		d.GetMigModeFunc, d.GetMaxMigDeviceCountFunc, d.GetMigDeviceHandleByIndexFunc = nil, nil, nil
	}
	r, err := newNVMLReader(s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Read()
	if err != nil || len(got) != 4 {
		t.Fatalf("got %+v, %v", got, err)
	}
	for _, g := range got {
		if g.MIG != nil {
			t.Errorf("GPU %d: MIG %v", g.Index, g.MIG)
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
