package reconcile

import (
	"testing"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
	"github.com/google/go-cmp/cmp"
)

// TestEndpoints: a workspace's addresses come from its allocations that
// are not stopping, by replica and then the spec's port order; a port
// with a scheme is a URL.
func TestEndpoints(t *testing.T) {
	spec := &schema.Workspace{Spec: schema.WorkspaceSpec{Ports: []schema.Port{{Label: "http", Scheme: "http"}, {Label: "debug", Static: 7000}}}}
	own := []drivers.Alloc{
		{Replica: 1, Addresses: []drivers.Address{{Label: "debug", Host: "10.0.0.6", Port: 7000}, {Label: "http", Host: "10.0.0.6", Port: 20001}}},
		{Replica: 0, Addresses: []drivers.Address{{Label: "http", Host: "fe80::1", Port: 20000}}},
		{Replica: 2, Phase: drivers.AllocStopping, Addresses: []drivers.Address{{Label: "http", Host: "10.0.0.7", Port: 20002}}},
	}
	want := []view.Endpoint{
		{Replica: 0, Label: "http", Address: "http://[fe80::1]:20000/"},
		{Replica: 1, Label: "http", Address: "http://10.0.0.6:20001/"},
		{Replica: 1, Label: "debug", Address: "10.0.0.6:7000"},
	}
	if diff := cmp.Diff(want, endpoints(spec, own)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := endpoints(nil, nil); got != nil {
		t.Errorf("no allocations: %v", got)
	}
}
