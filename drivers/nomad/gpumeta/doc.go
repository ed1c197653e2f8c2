// Package gpumeta is the format of the GPU topology that `berth agent`
// publishes as Nomad node metadata and the Nomad driver reads back: which
// GPUs of a node share an NVLink domain and which NUMA node each sits on.
//
// The main key, berth.gpu.topology, is compact and versioned:
//
//	v1;pci=18,2a,ba,db;nvlink=0-1,2-3;numa=0:0-1,1:2-3
//
// pci lists each GPU's PCI bus (NVML index order; the short hex bus when
// every GPU sits at domain 0, device 0, function 0, the full bus ID
// otherwise); nvlink lists the domains as groups of indexes ("a-b" ranges
// joined by "+"); numa maps a NUMA node to its indexes. berth.gpu.count
// and one berth.gpu.g<index> key per GPU (UUID, model, memory) complete
// it: g0, not 0, as Nomad takes a dynamic metadata key only when each of
// its dot-separated parts is an HCL identifier. The driver matches Nomad's device instances to these GPUs by the
// instance's ID, which the NVIDIA device plugin sets to the GPU's UUID,
// and else by the PCI bus ID the plugin reports as its locality.
//
// MIG: a MIG-enabled GPU stays in the lists above (it is a PCI device, and
// NVML indexes it), and one more key, berth.gpu.g<index>.mig, lists its
// MIG instances' UUIDs joined by ",", in NVML's MIG device order:
//
//	berth.gpu.g2.mig = MIG-5d1c…,MIG-8e0a…,MIG-c3f2…
//
// The NVIDIA device plugin hides a MIG-enabled GPU and reports each
// instance as a device of its own whose ID is that UUID, so the key is
// how the driver finds an instance's parent GPU (its index, hence its PCI
// bus, NVLink domain and NUMA node). A GPU without MIG (not capable, MIG
// mode off, or no instance made) has no such key. The key is an addition
// to v1, not a new version: a reader that predates it ignores it (it
// reads berth.gpu.topology and berth.gpu.g<index> only), and metadata
// written before it reads as GPUs without MIG instances.
//
// It is pure: no I/O, no clock. It must never import anything of berth.
package gpumeta
