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
	// migAPI: the driver's library has the MIG functions Read calls
	// (migSymbols). A library without them (a driver older than MIG)
	// reads as GPUs without MIG: calling a function the library lacks
	// would kill the process.
	migAPI bool
}

// migSymbols are the NVML functions Read calls to list MIG instances.
var migSymbols = []string{"nvmlDeviceGetMigMode", "nvmlDeviceGetMaxMigDeviceCount", "nvmlDeviceGetMigDeviceHandleByIndex"}

// NewNVMLReader loads the NVIDIA driver's NVML library and initialises it.
func NewNVMLReader() (*NVMLReader, error) { return newNVMLReader(nvml.New()) }

// newNVMLReader initialises lib. When Init fails it returns at once and
// calls nothing else on lib: after a failed Init any NVML call may kill
// the process.
func newNVMLReader(lib nvml.Interface) (*NVMLReader, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML is not available on this node: %s", initMessage(ret))
	}
	r := &NVMLReader{lib: lib, migAPI: true}
	for _, sym := range migSymbols {
		if lib.Extensions().LookupSymbol(sym) != nil {
			r.migAPI = false
		}
	}
	return r, nil
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
// node (-1 when NVML cannot tell), NVLink domain (GPUs with NVLink
// peer-to-peer between them share a domain) and, for a MIG-enabled GPU,
// its MIG instances' UUIDs (migOf).
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
		var err error
		if g.MIG, err = r.migOf(i, d); err != nil {
			return nil, err
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

// migOf lists the UUIDs of GPU i's MIG instances, in NVML's MIG device
// index order. A GPU without MIG instances gives nil: MIG not supported
// (any of the MIG calls answers ERROR_NOT_SUPPORTED: a GPU before Ampere,
// a consumer GPU), MIG mode off (or only pending until a reset), no
// instance made, or a library without the MIG functions. An index with
// no instance (ERROR_NOT_FOUND, ERROR_INVALID_ARGUMENT) is skipped; any
// other error fails the read, as the other NVML calls do.
func (r *NVMLReader) migOf(i int, d nvml.Device) ([]string, error) {
	if !r.migAPI {
		return nil, nil
	}
	mode, _, ret := d.GetMigMode()
	switch {
	case ret == nvml.ERROR_NOT_SUPPORTED:
		return nil, nil
	case ret != nvml.SUCCESS:
		return nil, fmt.Errorf("nvml: device %d MIG mode: %v", i, ret)
	case mode != nvml.DEVICE_MIG_ENABLE:
		return nil, nil
	}
	n, ret := d.GetMaxMigDeviceCount()
	switch {
	case ret == nvml.ERROR_NOT_SUPPORTED:
		return nil, nil
	case ret != nvml.SUCCESS:
		return nil, fmt.Errorf("nvml: device %d MIG device count: %v", i, ret)
	}
	var out []string
	for j := 0; j < n; j++ {
		m, ret := d.GetMigDeviceHandleByIndex(j)
		switch ret {
		case nvml.SUCCESS:
		case nvml.ERROR_NOT_FOUND, nvml.ERROR_INVALID_ARGUMENT:
			continue
		case nvml.ERROR_NOT_SUPPORTED:
			return nil, nil
		default:
			return nil, fmt.Errorf("nvml: device %d MIG device %d: %v", i, j, ret)
		}
		uuid, ret := m.GetUUID()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("nvml: device %d MIG device %d UUID: %v", i, j, ret)
		}
		out = append(out, uuid)
	}
	return out, nil
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
