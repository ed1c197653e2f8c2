package nomad_test

import (
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers/drivertest"
	"github.com/berth-dev/berth/schema"
	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad/api"
)

// TestPlacementRendered: a workspace's placement becomes the job's
// datacenters and node pool and its groups' node class and node meta
// constraints (beside the pin to the node berth chose), and Observe
// reports what placements match on each node.
func TestPlacementRendered(t *testing.T) {
	nodes := drivertest.Nodes()
	nodes[0].Datacenter, nodes[0].Class, nodes[0].Meta = "eu-west", "a100", map[string]string{"rack": "r1", "zone": "b"}
	_, d := fakeCluster(t, nodes)
	snap, err := d.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := snap.Nodes[0]
	if n.Datacenter != "eu-west" || n.Class != "a100" || n.Meta["zone"] != "b" || n.Pool != "default" {
		t.Errorf("observed node %s: datacenter %q class %q pool %q meta %v", n.Name, n.Datacenter, n.Class, n.Pool, n.Meta)
	}

	a := startAction("train", nodes[0].Name, nodes[0].GPUs[0].ID)
	a.Spec.Spec.Placement = schema.Placement{Datacenters: []string{"eu-west"}, NodePool: "default", NodeClass: "a100", NodeMeta: map[string]string{"zone": "b", "rack": "r1"}}
	if err := d.Apply(ctx, a); err != nil {
		t.Fatal(err)
	}
	j := jobOf(t, d, "vision", "train")
	if diff := cmp.Diff([]string{"eu-west"}, j.Datacenters); diff != "" {
		t.Errorf("datacenters (-want +got):\n%s", diff)
	}
	if j.NodePool == nil || *j.NodePool != "default" {
		t.Errorf("node pool %v, want default", j.NodePool)
	}
	want := []*api.Constraint{
		{LTarget: "${node.class}", Operand: "=", RTarget: "a100"},
		{LTarget: "${meta.rack}", Operand: "=", RTarget: "r1"},
		{LTarget: "${meta.zone}", Operand: "=", RTarget: "b"},
	}
	if diff := cmp.Diff(want, j.TaskGroups[0].Constraints[1:]); diff != "" {
		t.Errorf("group constraints after the node pin (-want +got):\n%s", diff)
	}

	// Nomad checks them too: the same placement on another node fails.
	b := startAction("eval", nodes[1].Name, nodes[1].GPUs[0].ID)
	b.Spec.Spec.Placement = schema.Placement{NodeMeta: map[string]string{"zone": "b"}}
	if err := d.Apply(ctx, b); err == nil {
		t.Errorf("a job for node meta zone=b was placed on a node without it")
	}
}

// TestPortsAndServiceRendered: ports become the group's network (static
// as reserved, the others dynamic), a container task maps them by label,
// and the service registers with Nomad's provider and its health check.
func TestPortsAndServiceRendered(t *testing.T) {
	nodes := drivertest.Nodes()
	_, d := fakeCluster(t, nodes)
	a := startAction("notebook", nodes[0].Name, nodes[0].GPUs[0].ID)
	a.Spec.Spec.Ports = []schema.Port{{Label: "http", To: 8888, Scheme: "http"}, {Label: "ssh", Static: 2222}}
	a.Spec.Spec.Service = &schema.Service{Name: "vision-notebook", Port: "http", Tags: []string{"jupyter"},
		Check: &schema.ServiceCheck{Type: "http", Path: "/api", Interval: 10 * time.Second, Timeout: 2 * time.Second}}
	if err := d.Apply(ctx, a); err != nil {
		t.Fatal(err)
	}
	tg := jobOf(t, d, "vision", "notebook").TaskGroups[0]
	if len(tg.Networks) != 1 {
		t.Fatalf("networks: %+v", tg.Networks)
	}
	net := tg.Networks[0]
	if diff := cmp.Diff([]api.Port{{Label: "http", To: 8888}}, net.DynamicPorts); diff != "" {
		t.Errorf("dynamic ports (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]api.Port{{Label: "ssh", Value: 2222}}, net.ReservedPorts); diff != "" {
		t.Errorf("reserved ports (-want +got):\n%s", diff)
	}
	if got := tg.Tasks[0].Config["ports"]; !cmp.Equal(got, []any{"http", "ssh"}) && !cmp.Equal(got, []string{"http", "ssh"}) {
		t.Errorf("docker ports %#v, want [http ssh]", got)
	}
	if len(tg.Services) != 1 {
		t.Fatalf("services: %+v", tg.Services)
	}
	s := tg.Services[0]
	if s.Name != "vision-notebook" || s.PortLabel != "http" || s.Provider != "nomad" || !cmp.Equal(s.Tags, []string{"jupyter", "replica-0"}) {
		t.Errorf("service %s port %s provider %s tags %v", s.Name, s.PortLabel, s.Provider, s.Tags)
	}
	if len(s.Checks) != 1 || s.Checks[0].Type != "http" || s.Checks[0].Path != "/api" || s.Checks[0].Interval != 10*time.Second {
		t.Errorf("checks %+v", s.Checks)
	}
}
