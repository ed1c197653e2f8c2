package nomad_test

import (
	"testing"

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
