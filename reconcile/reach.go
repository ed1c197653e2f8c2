package reconcile

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
)

// Endpoint is where one port of one replica of a workspace is
// reachable, taken from the allocation the cluster placed (so it follows
// the workspace to another node after a preemption and a resume).
// Address is "host:port", or a URL when the port has a scheme.
type Endpoint struct {
	Replica int    `json:"replica"`
	Label   string `json:"label"`
	Address string `json:"address"`
}

// endpoints lists the addresses of a workspace's allocations that are
// not stopping, sorted by replica, then in the spec's port order (then
// label, for ports the spec no longer lists). spec may be nil.
func endpoints(spec *schema.Workspace, own []drivers.Alloc) []Endpoint {
	scheme := map[string]string{}
	order := map[string]int{}
	if spec != nil {
		for i, p := range spec.Spec.Ports {
			scheme[p.Label], order[p.Label] = p.Scheme, i
		}
	}
	var out []Endpoint
	for _, a := range own {
		if a.Phase == drivers.AllocStopping {
			continue
		}
		for _, ad := range a.Addresses {
			addr := net.JoinHostPort(ad.Host, strconv.Itoa(ad.Port))
			if s := scheme[ad.Label]; s != "" {
				addr = fmt.Sprintf("%s://%s/", s, addr)
			}
			out = append(out, Endpoint{Replica: a.Replica, Label: ad.Label, Address: addr})
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

// connectText writes endpoints for a person: "http at
// http://10.0.0.5:24301/" or, for a gang, "replica 0 http at …; replica
// 1 http at …"; "" when there are none.
func connectText(eps []Endpoint) string {
	gang := false
	for _, e := range eps {
		gang = gang || e.Replica != eps[0].Replica
	}
	var parts []string
	for _, e := range eps {
		s := e.Label + " at " + e.Address
		if gang {
			s = "replica " + strconv.Itoa(e.Replica) + " " + s
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}
