package reconcile

import (
	"fmt"
	"net"
	"sort"
	"strconv"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
)

// endpoints lists the addresses of a workspace's allocations that are
// not stopping, sorted by replica, then in the spec's port order (then
// label, for ports the spec no longer lists). spec may be nil.
func endpoints(spec *schema.Workspace, own []drivers.Alloc) []view.Endpoint {
	scheme := map[string]string{}
	order := map[string]int{}
	if spec != nil {
		for i, p := range spec.Spec.Ports {
			scheme[p.Label], order[p.Label] = p.Scheme, i
		}
	}
	var out []view.Endpoint
	for _, a := range own {
		if a.Phase == drivers.AllocStopping {
			continue
		}
		for _, ad := range a.Addresses {
			addr := net.JoinHostPort(ad.Host, strconv.Itoa(ad.Port))
			if s := scheme[ad.Label]; s != "" {
				addr = fmt.Sprintf("%s://%s/", s, addr)
			}
			out = append(out, view.Endpoint{Replica: a.Replica, Label: ad.Label, Address: addr})
		}
	}
	rank := func(l string) int {
		if i, ok := order[l]; ok {
			return i
		}
		return len(order)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Replica != b.Replica {
			return a.Replica < b.Replica
		}
		if rank(a.Label) != rank(b.Label) {
			return rank(a.Label) < rank(b.Label)
		}
		return a.Label < b.Label
	})
	return out
}
