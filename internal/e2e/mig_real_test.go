package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/hashicorp/nomad/api"
)

// TestRealMIGInstancesAreNotWholeGPUs (issue 36, rows a and b): node-1
// gains 7 MIG instances, as the NVIDIA device plugin reports them (a
// device group "NVIDIA A100-SXM4-80GB MIG 1g.10gb" of its own, MIG-… IDs).
// A workspace that asks for 6 GPUs and names no model waits: no node
// has 6 whole GPUs, though node-1 has 4 whole GPUs and 7 instances free.
// A workspace whose gpuModel names the MIG group runs on MIG instances
// only.
func TestRealMIGInstancesAreNotWholeGPUs(t *testing.T) {
	kit := realnomad.KitDir(t)
	c := realnomad.Client(t)
	const group = "NVIDIA A100-SXM4-80GB MIG 1g.10gb"
	gdir := filepath.Join(kit.Dir, "gpus-1", group)
	if err := os.MkdirAll(gdir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Then the instances go, and the tests after see node-1 as it was.
	t.Cleanup(func() {
		os.RemoveAll(gdir)
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if groupSize(t, c, "node-1", group) == 0 {
				return
			}
		}
		t.Errorf("node-1 still reports %q 30 s after its files went", group)
	})
	if err := os.WriteFile(filepath.Join(gdir, ".memory"), []byte("9728\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 7 {
		if err := os.WriteFile(filepath.Join(gdir, fmt.Sprintf("MIG-00000001-0009-4000-8000-%012d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); groupSize(t, c, "node-1", group) != 7; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("node-1 reports no %q group of 7 instances after 30 s", group)
		}
	}

	dir := realSpecs(t, "", map[string]string{
		"whole": "  resources: {gpus: 6}",
		"slice": "  resources: {gpus: 2, gpuModel: \"" + group + "\"}",
	})
	loop, _ := resLoop(t, dir)
	res, err := loop.Once(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range res.Transitions {
		t.Logf("%s: %s %s", tr.Workspace, tr.To, tr.Reason)
	}
	a := runningAlloc(t, c, "slice")
	if a.NodeName != "node-1" {
		t.Errorf("slice runs on %s; the MIG instances are on node-1", a.NodeName)
	}
	var ids []string
	for _, tr := range a.AllocatedResources.Tasks {
		for _, dev := range tr.Devices {
			ids = append(ids, dev.DeviceIDs...)
		}
	}
	if len(ids) != 2 {
		t.Errorf("slice holds devices %v, want 2", ids)
	}
	for _, id := range ids {
		if !strings.HasPrefix(id, "MIG-") {
			t.Errorf("slice holds %s, not a MIG instance (all %v)", id, ids)
		}
	}
	waited := false
	for _, tr := range res.Transitions {
		if tr.Workspace.Name == "whole" {
			waited = strings.Contains(tr.Reason, "capacity")
			t.Logf("whole waits: %s", tr.Reason)
		}
	}
	if !waited {
		t.Errorf("whole: no transition that says it waits for capacity (%d transitions)", len(res.Transitions))
	}
	if _, _, err := c.Jobs().Info("whole", &api.QueryOptions{Namespace: realProject}); err == nil {
		t.Errorf("whole has a Nomad job: 6 whole GPUs are on no node, and MIG instances are not GPUs")
	}
}

// groupSize is how many instances node's device group named group has,
// as Nomad reports them.
func groupSize(t *testing.T, c *api.Client, node, group string) int {
	t.Helper()
	nodes, _, err := c.Nodes().List(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, stub := range nodes {
		if stub.Name != node {
			continue
		}
		n, _, err := c.Nodes().Info(stub.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, dev := range n.NodeResources.Devices {
			if dev.Name == group {
				return len(dev.Instances)
			}
		}
	}
	return 0
}
