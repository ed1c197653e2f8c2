package gpumeta

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Node metadata keys. Every key berth writes starts with Prefix.
const (
	Prefix      = "berth.gpu."
	KeyTopology = Prefix + "topology"
	KeyCount    = Prefix + "count"
	version     = "v1"
	// migSuffix ends the key of a MIG-enabled GPU's instances:
	// berth.gpu.g<index>.mig (KeyMIG).
	migSuffix = ".mig"
)

// KeyGPU is the key describing the GPU at index i (UUID, memory, model):
// berth.gpu.g<i>. Nomad takes a dynamic metadata key only when each of
// its dot-separated parts is an HCL identifier, which a bare index is
// not.
func KeyGPU(i int) string { return Prefix + "g" + strconv.Itoa(i) }

// KeyMIG is the key listing the MIG instances of the GPU at index i:
// berth.gpu.g<i>.mig.
func KeyMIG(i int) string { return KeyGPU(i) + migSuffix }

// GPU is one device as the agent sees it.
type GPU struct {
	Index     int
	UUID      string
	Model     string
	MemoryMiB int64
	// PCIBusID is NVML's bus ID, e.g. "00000000:18:00.0".
	PCIBusID string
	// NUMA is the NUMA node; -1 when unknown.
	NUMA int
	// Domain numbers NVLink domains from 0 in order of their lowest index.
	Domain int
	// MIG lists the UUIDs ("MIG-…") of the GPU's MIG instances, in NVML's
	// MIG device index order; nil for a GPU without MIG (not capable, MIG
	// mode off, or no instance made).
	MIG []string
}

// Encode returns the node metadata for gpus (sorted by Index first; the
// slice is not modified). Domains are renumbered by their lowest index.
func Encode(gpus []GPU) map[string]string {
	gs := append([]GPU(nil), gpus...)
	sort.Slice(gs, func(i, j int) bool { return gs[i].Index < gs[j].Index })
	short := shortPCI(gs)
	pci := make([]string, len(gs))
	domains := map[int][]int{}
	var domainOrder []int
	numa := map[int][]int{}
	for i, g := range gs {
		if short {
			b, _ := parseBus(g.PCIBusID)
			pci[i] = fmt.Sprintf("%02x", b.bus)
		} else {
			pci[i] = strings.ToLower(g.PCIBusID)
		}
		if _, ok := domains[g.Domain]; !ok {
			domainOrder = append(domainOrder, g.Domain)
		}
		domains[g.Domain] = append(domains[g.Domain], i)
		if g.NUMA >= 0 {
			numa[g.NUMA] = append(numa[g.NUMA], i)
		}
	}
	var groups []string
	for _, d := range domainOrder {
		groups = append(groups, members(domains[d]))
	}
	var numaNodes []int
	for n := range numa {
		numaNodes = append(numaNodes, n)
	}
	sort.Ints(numaNodes)
	var numaParts []string
	for _, n := range numaNodes {
		numaParts = append(numaParts, fmt.Sprintf("%d:%s", n, members(numa[n])))
	}
	meta := map[string]string{
		KeyTopology: fmt.Sprintf("%s;pci=%s;nvlink=%s;numa=%s", version, strings.Join(pci, ","), strings.Join(groups, ","), strings.Join(numaParts, ",")),
		KeyCount:    strconv.Itoa(len(gs)),
	}
	for i, g := range gs {
		meta[KeyGPU(i)] = fmt.Sprintf("uuid=%s;mem=%d;model=%s", g.UUID, g.MemoryMiB, g.Model)
		if len(g.MIG) > 0 {
			meta[KeyMIG(i)] = strings.Join(g.MIG, ",")
		}
	}
	return meta
}

// Decode reads the topology from node metadata. It returns (nil, nil)
// when the node has no berth.gpu.topology key, and an error when the key
// is there but malformed. UUID, Model and MemoryMiB are filled from the
// per-GPU keys when present, MIG from the berth.gpu.g<index>.mig keys (nil
// without one, as in metadata written before them); a MIG list with an
// empty UUID, or a UUID listed twice, is malformed.
func Decode(meta map[string]string) ([]GPU, error) {
	raw, ok := meta[KeyTopology]
	if !ok {
		return nil, nil
	}
	fields := strings.Split(raw, ";")
	if fields[0] != version {
		return nil, fmt.Errorf("%s %q: unknown version %q (want %s)", KeyTopology, raw, fields[0], version)
	}
	parts := map[string]string{}
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return nil, fmt.Errorf("%s %q: field %q has no '='", KeyTopology, raw, f)
		}
		parts[k] = v
	}
	if parts["pci"] == "" {
		return nil, fmt.Errorf("%s %q: no pci list", KeyTopology, raw)
	}
	pcis := strings.Split(parts["pci"], ",")
	gpus := make([]GPU, len(pcis))
	for i, p := range pcis {
		if _, err := parseBus(p); err != nil {
			return nil, fmt.Errorf("%s %q: %w", KeyTopology, raw, err)
		}
		gpus[i] = GPU{Index: i, PCIBusID: p, NUMA: -1, Domain: -1}
	}
	if parts["nvlink"] != "" {
		for d, group := range strings.Split(parts["nvlink"], ",") {
			idx, err := parseMembers(group, len(gpus))
			if err != nil {
				return nil, fmt.Errorf("%s %q: nvlink: %w", KeyTopology, raw, err)
			}
			for _, i := range idx {
				if gpus[i].Domain >= 0 {
					return nil, fmt.Errorf("%s %q: nvlink: GPU %d is in two domains", KeyTopology, raw, i)
				}
				gpus[i].Domain = d
			}
		}
	}
	next := 0
	for i := range gpus { // a GPU in no group is a domain of its own
		if gpus[i].Domain > next-1 {
			next = gpus[i].Domain + 1
		}
	}
	for i := range gpus {
		if gpus[i].Domain < 0 {
			gpus[i].Domain = next
			next++
		}
	}
	if parts["numa"] != "" {
		for _, nm := range strings.Split(parts["numa"], ",") {
			n, group, ok := strings.Cut(nm, ":")
			node, err := strconv.Atoi(n)
			if !ok || err != nil || node < 0 {
				return nil, fmt.Errorf("%s %q: numa entry %q: want node:indexes", KeyTopology, raw, nm)
			}
			idx, err := parseMembers(group, len(gpus))
			if err != nil {
				return nil, fmt.Errorf("%s %q: numa: %w", KeyTopology, raw, err)
			}
			for _, i := range idx {
				gpus[i].NUMA = node
			}
		}
	}
	for i := range gpus {
		v, ok := meta[KeyGPU(i)]
		if !ok {
			continue
		}
		for _, f := range strings.Split(v, ";") {
			k, val, _ := strings.Cut(f, "=")
			switch k {
			case "uuid":
				gpus[i].UUID = val
			case "model":
				gpus[i].Model = val
			case "mem":
				gpus[i].MemoryMiB, _ = strconv.ParseInt(val, 10, 64)
			}
		}
	}
	seen := map[string]int{}
	for i := range gpus {
		v, ok := meta[KeyMIG(i)]
		if !ok {
			continue
		}
		for _, id := range strings.Split(v, ",") {
			if id == "" || strings.TrimSpace(id) != id || strings.Contains(id, ";") {
				return nil, fmt.Errorf("%s %q: want MIG UUIDs joined by ','", KeyMIG(i), v)
			}
			if j, dup := seen[id]; dup {
				return nil, fmt.Errorf("%s %q: MIG instance %s is listed twice (under GPU %d and GPU %d)", KeyMIG(i), v, id, j, i)
			}
			seen[id] = i
			gpus[i].MIG = append(gpus[i].MIG, id)
		}
	}
	return gpus, nil
}

// SamePCI reports whether two PCI bus IDs name the same device. Either
// may be the short form (a hex bus number), which matches any full ID on
// that bus.
func SamePCI(a, b string) bool {
	x, errA := parseBus(a)
	y, errB := parseBus(b)
	if errA != nil || errB != nil {
		return false
	}
	if x.short || y.short {
		return x.bus == y.bus
	}
	return x == y
}

type busID struct {
	domain, bus, dev, fn uint64
	short                bool
}

// parseBus reads "dddddddd:bb:dd.f", "dddd:bb:dd.f" or a short "bb".
func parseBus(s string) (busID, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if !strings.Contains(s, ":") {
		b, err := strconv.ParseUint(s, 16, 8)
		if err != nil {
			return busID{}, fmt.Errorf("PCI bus %q: want a hex bus or domain:bus:device.function", s)
		}
		return busID{bus: b, short: true}, nil
	}
	var id busID
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return busID{}, fmt.Errorf("PCI bus ID %q: want domain:bus:device.function", s)
	}
	devfn := strings.Split(parts[2], ".")
	if len(devfn) != 2 {
		return busID{}, fmt.Errorf("PCI bus ID %q: want domain:bus:device.function", s)
	}
	var err error
	for _, p := range []struct {
		dst  *uint64
		text string
	}{{&id.domain, parts[0]}, {&id.bus, parts[1]}, {&id.dev, devfn[0]}, {&id.fn, devfn[1]}} {
		if *p.dst, err = strconv.ParseUint(p.text, 16, 32); err != nil {
			return busID{}, fmt.Errorf("PCI bus ID %q: %q is not hex", s, p.text)
		}
	}
	return id, nil
}

func shortPCI(gs []GPU) bool {
	seen := map[uint64]bool{}
	for _, g := range gs {
		b, err := parseBus(g.PCIBusID)
		if err != nil || b.short || b.domain != 0 || b.dev != 0 || b.fn != 0 || seen[b.bus] {
			return false
		}
		seen[b.bus] = true
	}
	return true
}

// members writes sorted indexes as "a-b" runs joined by "+".
func members(idx []int) string {
	s := append([]int(nil), idx...)
	sort.Ints(s)
	var out []string
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if j > i {
			out = append(out, fmt.Sprintf("%d-%d", s[i], s[j]))
		} else {
			out = append(out, strconv.Itoa(s[i]))
		}
		i = j + 1
	}
	return strings.Join(out, "+")
}

func parseMembers(s string, n int) ([]int, error) {
	var out []int
	for _, run := range strings.Split(s, "+") {
		lo, hi, isRange := strings.Cut(run, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("index %q is not a number", run)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("range %q: want low-high", run)
			}
		}
		if a < 0 || b >= n {
			return nil, fmt.Errorf("index %q out of range 0-%d", run, n-1)
		}
		for i := a; i <= b; i++ {
			out = append(out, i)
		}
	}
	return out, nil
}
