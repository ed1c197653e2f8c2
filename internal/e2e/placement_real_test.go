package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/hashicorp/nomad/api"
)

// TestRealPlacementKeepsOffNode: node metadata set on one node of the
// agent (Nomad's dynamic node metadata) draws a workspace whose placement
// asks for it onto that node, and nowhere else, though the other node
// has as many free GPUs; a placement no node satisfies waits with that
// reason and is never registered.
func TestRealPlacementKeepsOffNode(t *testing.T) {
	c := realnomad.Client(t)
	nodes, _, err := c.Nodes().List(nil)
	if err != nil || len(nodes) < 2 {
		t.Fatalf("want 2 nodes: %v %d", err, len(nodes))
	}
	// The node whose name sorts last: berth would otherwise pack onto
	// the first one it finds with free GPUs.
	target := nodes[0]
	for _, n := range nodes {
		if n.Name > target.Name {
			target = n
		}
	}
	zone := "berth-test-zone"
	setMeta := func(v *string) {
		if _, err := c.Nodes().Meta().Apply(&api.NodeMetaApplyRequest{NodeID: target.ID, Meta: map[string]*string{zone: v}}, nil); err != nil {
			t.Fatalf("node meta on %s: %v", target.Name, err)
		}
	}
	b := "b"
	setMeta(&b)
	t.Cleanup(func() { setMeta(nil) })
	// The client sends dynamic metadata to the servers on its own time.
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, _, err := c.Nodes().Info(target.ID, nil)
		if err == nil && n.Meta[zone] == "b" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s has no %s=b after 30 s", target.Name, zone)
		}
		time.Sleep(200 * time.Millisecond)
	}

	dir := realSpecs(t, "", map[string]string{
		"zoned":   "  resources: {gpus: 1}\n  placement: {nodeMeta: {" + zone + ": b}}",
		"nowhere": "  resources: {gpus: 1}\n  placement: {nodeMeta: {" + zone + ": z}}",
	})
	loop, _ := resLoop(t, dir)
	res, err := loop.Once(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range res.Transitions {
		t.Logf("%s: %s %s", tr.Workspace, tr.To, tr.Reason)
	}
	a := runningAlloc(t, c, "zoned")
	if a.NodeID != target.ID {
		t.Errorf("zoned runs on %s; its placement allows only %s", a.NodeName, target.Name)
	}
	for _, tr := range res.Transitions {
		if tr.Workspace.Name == "nowhere" && !strings.Contains(tr.Reason, "placement: no ready, eligible node is in node meta "+zone+"=z") {
			t.Errorf("nowhere: reason %q", tr.Reason)
		}
	}
	if _, _, err := c.Jobs().Info("nowhere", &api.QueryOptions{Namespace: realProject}); err == nil {
		t.Errorf("nowhere has a Nomad job; berth must not register what no node can run")
	}
}
