//go:build cgo

package agent

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/berth-dev/berth/drivers/nomad/gpumeta"
)

// NVMLReader reads GPUs through NVML.
type NVMLReader struct {
	lib nvml.Interface
}

// NewNVMLReader loads the NVIDIA driver's NVML library and initialises it.
func NewNVMLReader() (*NVMLReader, error) { return newNVMLReader(nvml.New()) }

// newNVMLReader initialises lib. When Init fails it returns at once and
// calls nothing else on lib: after a failed Init any NVML call may kill
// the process.
func newNVMLReader(lib nvml.Interface) (*NVMLReader, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML is not available on this node: %s", initMessage(ret))
	}
	return &NVMLReader{lib: lib}, nil
}

// initMessage explains a failed Init without calling into NVML.
func initMessage(ret nvml.Return) string {
	switch ret {
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return "the NVIDIA driver library libnvidia-ml.so.1 was not found (is the NVIDIA driver installed, and is berth agent running on a GPU node?)"
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return "the NVIDIA kernel driver is not loaded"
	case nvml.ERROR_NO_PERMISSION:
		return "no permission to talk to the NVIDIA driver"
	case nvml.ERROR_LIB_RM_VERSION_MISMATCH:
		return "the NVIDIA kernel driver and libnvidia-ml.so versions differ (reboot or reload the driver)"
	}
	return fmt.Sprintf("nvmlInit returned error code %d", int32(ret))
}

// Close shuts NVML down.
func (r *NVMLReader) Close() error {
	if ret := r.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("nvml shutdown: %v", ret)
	}
	return nil
}

// Read returns every GPU with its UUID, model, memory, PCI bus ID, NUMA
// node (-1 when NVML cannot tell) and NVLink domain: GPUs with NVLink
// peer-to-peer between them share a domain.
func (r *NVMLReader) Read() ([]gpumeta.GPU, error) {
	n, ret := r.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvml: device count: %v", ret)
	}
	devs := make([]nvml.Device, n)
	gpus := make([]gpumeta.GPU, n)
	for i := 0; i < n; i++ {
		d, ret := r.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("nvml: device %d: %v", i, ret)
		}
		devs[i] = d
		g := gpumeta.GPU{Index: i, NUMA: -1}
		if g.UUID, ret = d.GetUUID(); ret != nvml.SUCCESS {
			return nil, fmt.Errorf("nvml: device %d UUID: %v", i, ret)
		}
		if g.Model, ret = d.GetName(); ret != nvml.SUCCESS {
			return nil, fmt.Errorf("nvml: device %d name: %v", i, ret)
		}
		mem, ret := d.GetMemoryInfo()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("nvml: device %d memory: %v", i, ret)
		}
		g.MemoryMiB = int64(mem.Total >> 20)
		pci, ret := d.GetPciInfo()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("nvml: device %d PCI info: %v", i, ret)
		}
		g.PCIBusID = busID(pci.BusId)
		if numa, ret := d.GetNumaNodeId(); ret == nvml.SUCCESS {
			g.NUMA = numa
		}
		gpus[i] = g
	}
	domains := Domains(n, func(i, j int) bool {
		st, ret := devs[i].GetP2PStatus(devs[j], nvml.P2P_CAPS_INDEX_NVLINK)
		return ret == nvml.SUCCESS && st == nvml.P2P_STATUS_OK
	})
	for i := range gpus {
		gpus[i].Domain = domains[i]
	}
	return gpus, nil
}

func busID(b [32]int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}
