package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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
// runs on MIG instances only; one whose gpuModel no node has (row e)
// waits with a reason that names it, unregistered.
func TestRealMIGInstancesAreNotWholeGPUs(t *testing.T) {
	kit := realnomad.KitDir(t)
	c := realnomad.Client(t)
	group := addGroup(t, kit, c, "node-1", migGroup, 9728, 7)
	addGroup(t, kit, c, "node-1", "NVIDIA L40S", 46068, 1)

	dir := realSpecs(t, "", map[string]string{
		"whole": "  resources: {gpus: 6}",
		"mixed": "  resources: {gpus: 5}",
		"slice": "  resources: {gpus: 2, gpuModel: \"" + group + "\"}",
		// A kind no node has (row e): it waits, and the reason names it.
		"absent": "  resources: {gpus: 1, gpuModel: \"NVIDIA H100 80GB HBM3 MIG 3g.40gb\"}",
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
	for _, tr := range res.Transitions {
		if tr.Workspace.Name == "absent" && tr.Reason != "capacity: no usable GPU of model NVIDIA H100 80GB HBM3 MIG 3g.40gb in the cluster" {
			t.Errorf("absent: reason %q; want the model named", tr.Reason)
		}
	}
	for _, name := range []string{"whole", "mixed", "absent"} {
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

// migGroup is a MIG instance's device group as the NVIDIA device plugin
// names it.
const migGroup = "NVIDIA A100-SXM4-80GB MIG 1g.10gb"

// addGroup gives node of the kit a device group name of n devices of mib
// MiB each (MIG-… IDs for a MIG group, GPU-… for whole GPUs), as the
// NVIDIA device plugin reports another model or MIG instances, and waits
// until Nomad reports it; when t ends the group goes, and addGroup waits
// until Nomad no longer reports it, so the tests after see the node as it
// was. It returns name.
func addGroup(t *testing.T, kit realnomad.Kit, c *api.Client, node, name string, mib, n int) string {
	t.Helper()
	dir := filepath.Join(filepath.Dir(kit.GPUFile(t, node, "x")), name)
	t.Cleanup(func() {
		os.RemoveAll(dir)
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if groupSize(t, c, node, name) == 0 {
				return
			}
		}
		t.Errorf("%s still reports %q 30 s after its files went", node, name)
	})
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".memory"), []byte(fmt.Sprintf("%d\n", mib)), 0o644); err != nil {
		t.Fatal(err)
	}
	prefix := "GPU"
	if strings.Contains(name, " MIG ") {
		prefix = "MIG"
	}
	k, err := strconv.Atoi(strings.TrimPrefix(node, "node-"))
	if err != nil {
		t.Fatalf("node %q is not one of the kit's (node-K)", node)
	}
	for i := range n {
		// As the kit names a group's devices; the group's part of the ID
		// tells groups apart.
		id := fmt.Sprintf("%s-%08d-%04d-4000-8000-%012d", prefix, k, len(name), i)
		if err := os.WriteFile(filepath.Join(dir, id), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); groupSize(t, c, node, name) != n; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s reports no %q group of %d after 30 s", node, name, n)
		}
	}
	return name
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

// TestRealUnhealthyMIGInstanceMoves (issue 36, row f): a MIG instance
// that turns unhealthy moves its workspace, with its checkpoint grace,
// onto healthy instances of its model, as a whole GPU does.
func TestRealUnhealthyMIGInstanceMoves(t *testing.T) {
	kit := realnomad.KitDir(t)
	r := newRealLoop(t)
	addGroup(t, kit, r.c, "node-1", migGroup, 9728, 7)
	r.saved = filepath.Join(t.TempDir(), "saved")
	r.write("tiers.yaml", realTiers)
	script := fmt.Sprintf("trap 'sleep 2; echo saved >> %s; exit 0' TERM; sleep 3600 & wait", r.saved)
	ws := strings.Replace(realWorkspace("train", 2, script), "resources: {gpus: 2,", "resources: {gpus: 2, gpuModel: \""+migGroup+"\",", 1)
	ws = strings.Replace(ws, "gracePeriod: 2s", "gracePeriod: 10s", 1)
	r.write("train.yaml", ws)
	r.until(30*time.Second, "train runs", r.running("train"))
	st := r.state("train")
	if st.Node != "node-1" || !strings.HasPrefix(st.GPUs[0], "MIG-") {
		t.Fatalf("train runs on %s %v; want MIG instances of node-1", st.Node, st.GPUs)
	}
	gpu := st.GPUs[0]
	file := filepath.Join(filepath.Dir(kit.GPUFile(t, "node-1", "x")), migGroup, gpu)
	t.Cleanup(func() { _ = os.Chmod(file, 0o644) })
	start := time.Now()
	if err := os.Chmod(file, 0o777); err != nil {
		t.Fatal(err)
	}
	took := r.movedWithin(60*time.Second, offGPU(gpu), "GPU "+gpu+" on node node-1 is unhealthy", start)
	r.checkpointed()
	if st := r.state("train"); !strings.HasPrefix(st.GPUs[0], "MIG-") || !strings.HasPrefix(st.GPUs[1], "MIG-") {
		t.Errorf("train moved to %v; want MIG instances", st.GPUs)
	}
	realnomad.Report(t, "unhealthy MIG instance (grace 10s, 2s checkpoint): running on other instances %.1fs after it turned unhealthy", took.Seconds())
}
