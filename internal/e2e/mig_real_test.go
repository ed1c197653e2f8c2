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
// device group "NVIDIA A100-SXM4-80GB MIG 1g.10gb" of its own, MIG-… IDs),
// and an L40S (a group of another model). A workspace that asks for 6
// GPUs and names no model waits: no node has 6 whole GPUs, though node-1
// has 5 whole GPUs and 7 instances free. One that asks for 5 waits too:
// node-1's 5 whole GPUs are of two models, and Nomad takes a request's
// devices from one group. A workspace whose gpuModel names the MIG group
// runs on MIG instances only.
func TestRealMIGInstancesAreNotWholeGPUs(t *testing.T) {
	kit := realnomad.KitDir(t)
	c := realnomad.Client(t)
	const group, l40s = "NVIDIA A100-SXM4-80GB MIG 1g.10gb", "NVIDIA L40S"
	gdir, ldir := filepath.Join(kit.Dir, "gpus-1", group), filepath.Join(kit.Dir, "gpus-1", l40s)
	for _, d := range []string{gdir, ldir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Then the instances go, and the tests after see node-1 as it was.
	t.Cleanup(func() {
		os.RemoveAll(gdir)
		os.RemoveAll(ldir)
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if groupSize(t, c, "node-1", group)+groupSize(t, c, "node-1", l40s) == 0 {
				return
			}
		}
		t.Errorf("node-1 still reports %q or %q 30 s after their files went", group, l40s)
	})
	if err := os.WriteFile(filepath.Join(gdir, ".memory"), []byte("9728\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 7 {
		if err := os.WriteFile(filepath.Join(gdir, fmt.Sprintf("MIG-00000001-0009-4000-8000-%012d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ldir, ".memory"), []byte("46068\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ldir, "GPU-00000001-0010-4000-8000-000000000000"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); groupSize(t, c, "node-1", group) != 7 || groupSize(t, c, "node-1", l40s) != 1; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("node-1 reports no %q group of 7 instances and %q of 1 after 30 s", group, l40s)
		}
	}

	dir := realSpecs(t, "", map[string]string{
		"whole": "  resources: {gpus: 6}",
		"mixed": "  resources: {gpus: 5}",
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
	for _, name := range []string{"whole", "mixed"} {
		waited := false
		for _, tr := range res.Transitions {
			if tr.Workspace.Name == name {
				waited = strings.Contains(tr.Reason, "capacity")
				t.Logf("%s waits: %s", name, tr.Reason)
			}
		}
		if !waited {
			t.Errorf("%s: no transition that says it waits for capacity (%d transitions)", name, len(res.Transitions))
		}
		if _, _, err := c.Jobs().Info(name, &api.QueryOptions{Namespace: realProject}); err == nil {
			t.Errorf("%s has a Nomad job: no node has a device group of its size (MIG instances are not GPUs)", name)
		}
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
