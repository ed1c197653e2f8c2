package drivers

import (
	"slices"
	"sort"
	"strings"

	"github.com/berth-dev/berth/schema"
)

// Where names the nodes allocs run on (comma-separated, in order of
// first appearance) and their GPUs, sorted.
func Where(allocs []Alloc) (string, []string) {
	var nodes, gpus []string
	for _, a := range allocs {
		if !slices.Contains(nodes, a.Node) {
			nodes = append(nodes, a.Node)
		}
		gpus = append(gpus, a.GPUs...)
	}
	sort.Strings(gpus)
	return strings.Join(nodes, ","), gpus
}

// WherePlaced is Where for the placements of a start.
func WherePlaced(ps []Placement) (string, []string) {
	var allocs []Alloc
	for _, p := range ps {
		allocs = append(allocs, Alloc{Node: p.Node, GPUs: p.GPUs})
	}
	return Where(allocs)
}

// AllStopping reports whether every one of allocs is stopping (true for
// none).
func AllStopping(allocs []Alloc) bool {
	for _, a := range allocs {
		if a.Phase != AllocStopping {
			return false
		}
	}
	return true
}

// ShortGPUs abbreviates UUID-shaped device IDs ("GPU-" and more than 12
// characters) to their first 12 characters when that tells them apart
// within ids; otherwise it keeps those 12 and the shortest tail (at least
// 4 characters) that does: GPU-00000000…0001, GPU-00000000…0002. Other
// IDs are printed whole. Two different IDs never print the same.
func ShortGPUs(ids []string) []string {
	out := make([]string, len(ids))
	long := func(id string) bool { return strings.HasPrefix(id, "GPU-") && len(id) > 12 }
	heads := map[string]int{}
	for _, id := range ids {
		if long(id) {
			heads[id[:12]]++
		}
	}
	for i, id := range ids {
		if !long(id) {
			out[i] = id
			continue
		}
		if heads[id[:12]] == 1 && !slices.Contains(ids, id[:12]) {
			out[i] = id[:12]
			continue
		}
		out[i] = id
		for n := 4; 12+n < len(id); n++ {
			tail := id[len(id)-n:]
			unique := true
			for _, o := range ids {
				if o != id && long(o) && o[:12] == id[:12] && strings.HasSuffix(o, tail) {
					unique = false
					break
				}
			}
			if unique {
				out[i] = id[:12] + "…" + tail
				break
			}
		}
	}
	return out
}

// AllocsOf returns ref's allocations in allocs, which are sorted by
// workspace as a Snapshot's are: found by binary search, a subslice of
// allocs, read-only, clipped so that an append copies it.
func AllocsOf(allocs []Alloc, ref schema.Ref) []Alloc {
	lo := sort.Search(len(allocs), func(i int) bool { return !allocs[i].Workspace.Less(ref) })
	hi := lo
	for hi < len(allocs) && allocs[hi].Workspace == ref {
		hi++
	}
	return allocs[lo:hi:hi]
}

// ByWorkspace groups allocs by workspace. Sorted by workspace, as a
// Snapshot's are, they are grouped without copying: each group is a
// subslice of allocs, read-only, clipped so that an append copies it.
func ByWorkspace(allocs []Alloc) map[schema.Ref][]Alloc {
	out := make(map[schema.Ref][]Alloc, len(allocs))
	for i := 0; i < len(allocs); {
		ref := allocs[i].Workspace
		j := i + 1
		for j < len(allocs) && allocs[j].Workspace == ref {
			j++
		}
		if g, ok := out[ref]; ok {
			out[ref] = append(g, allocs[i:j]...) // unsorted input: g is clipped, so this copies
		} else {
			out[ref] = allocs[i:j:j]
		}
		i = j
	}
	return out
}
