package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/drivers/nomad/gpumeta"
	"github.com/berth-dev/berth/internal/realnomad"
	gocmp "github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad/api"
)

// fakeGPUs is the topology the fake NVML gives a node whose GPUs (the
// kit's fake device plugin's, by ID) are ids: NVML index i is ids[i];
// GPUs of the same parity share an NVLink domain and a NUMA node (0 and
// 2, 1 and 3), so the GPUs next to each other in the plugin's order are
// in different domains, as a guess of one domain would not place them.
func fakeGPUs(ids []string) []gpumeta.GPU {
	buses := []int{0x18, 0x2a, 0xba, 0xdb, 0x3a, 0x5d, 0x9a, 0xab}
	out := make([]gpumeta.GPU, len(ids))
	for i, id := range ids {
		out[i] = gpumeta.GPU{Index: i, UUID: id, Model: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559,
			PCIBusID: fmt.Sprintf("00000000:%02X:00.0", buses[i]), NUMA: i % 2, Domain: i % 2}
	}
	return out
}

// writeFakeNVML writes gpus as the fake NVML's GPU file
// (testdata/fakenvml/fakenvml.c): one line a GPU, its NVLink peers those
// of its domain.
func writeFakeNVML(t *testing.T, path string, gpus []gpumeta.GPU) {
	t.Helper()
	var b strings.Builder
	for _, g := range gpus {
		var peers []string
		for _, h := range gpus {
			if h.Index != g.Index && h.Domain == g.Domain {
				peers = append(peers, strconv.Itoa(h.Index))
			}
		}
		if peers == nil {
			peers = []string{"-"}
		}
		fmt.Fprintf(&b, "%s %s %d %d %s %s\n", g.UUID, g.PCIBusID, g.MemoryMiB, g.NUMA, strings.Join(peers, ","), g.Model)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// kitGPUs returns the IDs of node's H100-fake GPUs as Nomad reports them,
// sorted.
func kitGPUs(t *testing.T, c *api.Client, nodeID string) []string {
	t.Helper()
	n, _, err := c.Nodes().Info(nodeID, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range n.NodeResources.Devices {
		if d.Name == "H100-fake" {
			for _, in := range d.Instances {
				ids = append(ids, in.ID)
			}
		}
	}
	slices.Sort(ids)
	if len(ids) < 2 {
		t.Fatalf("node %s has %d H100-fake GPUs; the kit gives each 4", nodeID, len(ids))
	}
	return ids
}

// gpuMeta is the berth.gpu.* part of node's metadata as the servers
// have it.
func gpuMeta(c *api.Client, nodeID string) (map[string]string, error) {
	n, _, err := c.Nodes().Info(nodeID, nil)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for k, v := range n.Meta {
		if strings.HasPrefix(k, gpumeta.Prefix) {
			out[k] = v
		}
	}
	return out, nil
}

// TestRealPackAgent runs the pack's agent job as it renders on the kit's
// two nodes, marked as GPU nodes (meta.gpu): a system job running the
// berth built here with cgo (agent_command) over a fake NVML
// (testdata/fakenvml, on agent_env's LD_LIBRARY_PATH) that gives each
// node its own fake GPUs, by the kit's device plugin's IDs, in two NVLink
// domains. On an agent with ACLs on and Nomad 1.7+ (make e2e-v2) the job
// renders with workload identity and reaches its node's client through
// the Task API socket, under examples/deploy/berth-agent.policy.hcl
// bound to the job and nothing else: dynamic node metadata is a write a
// workload identity may make. On Nomad 1.6 it talks to its own node's
// client over HTTP (nomad_addr).
//
// An allocation runs on every GPU node and never restarts. node-2 starts
// without its GPU file (NVML's "driver not loaded"): its agent says so
// once and waits, running, and publishes as soon as the file is there.
// Each node's berth.gpu.* metadata is then exactly what its GPUs give,
// berth's Nomad driver reads it (topology not guessed; each GPU's NVLink
// domain and NUMA node), and a 2-GPU workspace runs on 2 GPUs of one
// NVLink domain, which a guessed topology would not choose. With
// workload identity, once the policy is deleted the agent is refused.
func TestRealPackAgent(t *testing.T) {
	c := realnomad.Client(t)
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("the fake NVML and berth's NVML reader are compiled with cc")
	}
	nomadBin, why := workloadIdentity(t, c)
	wi := why == ""
	dir := t.TempDir()

	// 1. The fake NVML and berth built with cgo, as the agent needs it.
	lib := exec.Command("cc", "-shared", "-fPIC", "-Wl,-soname,libnvidia-ml.so.1", "-o", filepath.Join(dir, "libnvidia-ml.so.1"), "testdata/fakenvml/fakenvml.c")
	if out, err := lib.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", lib.Args, err, out)
	}
	bin := filepath.Join(dir, "berth")
	build := exec.Command("go", "build", "-o", bin, "./cmd/berth")
	build.Dir, build.Env = "../..", append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/berth with cgo: %v\n%s", err, out)
	}

	// 2. Each node's fake GPUs: node-1's file now, node-2's later.
	nodes := realnomad.NodeIDs(t, c)
	names := slices.Sorted(maps.Keys(nodes))
	if len(names) != 2 {
		t.Fatalf("nodes %v: the kit starts node-1 and node-2", names)
	}
	want := map[string][]gpumeta.GPU{}
	for _, n := range names {
		want[n] = fakeGPUs(kitGPUs(t, c, nodes[n]))
	}
	gpuFile := func(node string) string { return filepath.Join(dir, node+".gpus") }
	writeFakeNVML(t, gpuFile("node-1"), want["node-1"])

	// 3. Both nodes are GPU nodes; when the test ends (after the job
	// stops) they are not, and hold no berth.gpu.* metadata, for the
	// tests after.
	setMeta := func(node string, meta map[string]*string) error {
		_, err := c.Nodes().Meta().Apply(&api.NodeMetaApplyRequest{NodeID: nodes[node], Meta: meta}, nil)
		return err
	}
	for _, n := range names {
		if err := setMeta(n, map[string]*string{"gpu": ptr("true")}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, n := range names {
			unset := map[string]*string{"gpu": nil}
			m, err := gpuMeta(c, nodes[n])
			if err != nil {
				t.Error(err)
			}
			for k := range m {
				unset[k] = nil
			}
			if err := setMeta(n, unset); err != nil {
				t.Errorf("unset %s's metadata: %v", n, err)
			}
		}
		// The clients send metadata to the servers in their own time.
		waitFor(t, "no node with meta.gpu or berth.gpu.* metadata", time.Minute, func() error {
			for _, n := range names {
				m, err := gpuMeta(c, nodes[n])
				if err != nil {
					return err
				}
				info, _, err := c.Nodes().Info(nodes[n], nil)
				if err != nil {
					return err
				}
				if len(m) > 0 || info.Meta["gpu"] != "" {
					return fmt.Errorf("%s still has %d berth.gpu.* keys, gpu=%q", n, len(m), info.Meta["gpu"])
				}
			}
			return nil
		})
	})

	waitFor(t, "the servers seeing meta.gpu on both nodes", time.Minute, func() error {
		for _, n := range names {
			info, _, err := c.Nodes().Info(nodes[n], nil)
			if err != nil {
				return err
			}
			if info.Meta["gpu"] != "true" {
				return fmt.Errorf("%s: meta %v", n, info.Meta)
			}
		}
		return nil
	})

	// 4. The pack's agent job, with workload identity where the agent
	// has it; the interval down from 30 s, so node-2's wait is short.
	env, err := json.Marshal(map[string]string{"LD_LIBRARY_PATH": dir, "FAKE_NVML_GPUS": filepath.Join(dir, "${node.unique.name}.gpus")})
	if err != nil {
		t.Fatal(err)
	}
	// Over HTTP, each agent reaches its own client at the address it
	// advertises: the kit's node-2 is not at its network address, port
	// 4646, the pack's default. Nomad 1.6 names that attribute
	// nomad.advertise.address, 2.0 unique.advertise.address.
	info, _, err := c.Nodes().Info(nodes["node-1"], nil)
	if err != nil {
		t.Fatal(err)
	}
	advertise := "nomad.advertise.address"
	if _, ok := info.Attributes["unique.advertise.address"]; ok {
		advertise = "unique.advertise.address"
	}
	job := renderPack(t, c, map[string]string{
		"image": "unused", "specs_repo": "unused", "agent_command": bin, "agent_env": string(env),
		"workload_identity": strconv.FormatBool(wi), "nomad_addr": "http://${attr." + advertise + "}",
	})["berth-agent"]
	task := job.TaskGroups[0].Tasks[0]
	if args := fmt.Sprint(task.Config["args"]); args != "[agent --interval 30s]" || task.Config["command"] != bin || len(task.Artifacts) != 0 {
		t.Fatalf("the pack's agent runs %v %s with artifacts %v; want %s agent --interval 30s, none", task.Config["command"], args, task.Artifacts, bin)
	}
	task.Config["args"] = []string{"agent", "--interval", "1s"}
	if wi {
		if task.Env["NOMAD_ADDR"] != "unix://${NOMAD_SECRETS_DIR}/api.sock" || task.Identity == nil || !task.Identity.Env || len(task.Templates) != 0 {
			t.Fatalf("the pack's agent does not reach Nomad with its identity alone: env %v, identity %+v, %d templates", task.Env, task.Identity, len(task.Templates))
		}
		policy, err := filepath.Abs("../../examples/deploy/berth-agent.policy.hcl")
		if err != nil {
			t.Fatal(err)
		}
		bindPolicy(t, c, nomadBin, "default", "berth-agent", "berth-agent", policy)
	} else {
		// The token, where the job's template reads it (its task waits
		// for the Variable); with ACLs off it is not checked.
		t.Logf("the agent reaches Nomad over HTTP, with the static token's template (%s)", why)
		tok := cmp.Or(os.Getenv("NOMAD_TOKEN"), "unused-acl-is-off")
		if _, _, err := c.Variables().Create(&api.Variable{Path: "nomad/jobs/berth-agent", Items: api.VariableItems{"token": tok}}, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Variables().Delete("nomad/jobs/berth-agent", nil) })
	}
	if _, _, err := c.Jobs().Register(job, nil); err != nil {
		t.Fatalf("register the pack's berth-agent: %v", err)
	}
	t.Cleanup(func() { stopJob(t, c, "berth-agent") })

	// 5. An allocation runs on every GPU node, and none restarts.
	allocs := map[string]*api.AllocationListStub{}
	healthy := func() error {
		list, _, err := c.Jobs().Allocations("berth-agent", false, nil)
		if err != nil {
			return err
		}
		clear(allocs)
		for _, a := range list {
			for _, ts := range a.TaskStates {
				if ts.Restarts > 0 || ts.Failed {
					t.Fatalf("the agent on %s restarted or failed:%s", a.NodeName, allocEvents(c, a.ID))
				}
			}
			if a.ClientStatus == api.AllocClientStatusRunning {
				allocs[a.NodeName] = a
			}
		}
		if len(allocs) != len(names) {
			var all []string
			for _, a := range list {
				all = append(all, a.NodeName+":"+a.ClientStatus)
			}
			return fmt.Errorf("the agent runs on %v, want %v (allocations %v)", slices.Sorted(maps.Keys(allocs)), names, all)
		}
		return nil
	}
	waitFor(t, "the agent running on every GPU node", 2*time.Minute, healthy)

	published := func(node string) func() error {
		return func() error {
			got, err := gpuMeta(c, nodes[node])
			if err != nil {
				return err
			}
			if d := gocmp.Diff(gpumeta.Encode(want[node]), got); d != "" {
				return fmt.Errorf("%s's berth.gpu.* metadata (-want +got):\n%s", node, d)
			}
			return nil
		}
	}
	// 6. node-1 publishes its GPUs; node-2, without NVML's GPUs, waits.
	waitFor(t, "node-1's GPUs published", time.Minute, published("node-1"))
	waitFor(t, "node-2's agent saying NVML is not there", time.Minute, func() error {
		out := allocLogs(t, c, allocs["node-2"], "agent")
		if !strings.Contains(out, "NVML is not available on this node: the NVIDIA kernel driver is not loaded; publishing nothing, trying again every 1s") {
			return fmt.Errorf("its log so far:\n%s", out)
		}
		return nil
	})
	if m, err := gpuMeta(c, nodes["node-2"]); err != nil || len(m) != 0 {
		t.Fatalf("node-2, without NVML, has berth.gpu.* metadata %v (%v)", m, err)
	}
	writeFakeNVML(t, gpuFile("node-2"), want["node-2"])
	waitFor(t, "node-2's GPUs published once NVML has them", time.Minute, published("node-2"))
	if err := healthy(); err != nil {
		t.Fatal(err)
	}
	if out := allocLogs(t, c, allocs["node-2"], "agent"); strings.Count(out, "NVML is not available") != 1 || !strings.Contains(out, "NVML is available") {
		t.Errorf("node-2's agent log: want one line saying NVML is not there, then one that it is:\n%s", out)
	} else {
		t.Logf("node-2's agent log:\n%s", out)
	}

	// 7. berth reads it: the driver's topology, then a placement.
	d := realnomad.NewDriver(t, nomad.ConfigFromEnv(""))
	snap, err := d.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	domain := map[string]int{} // GPU ID → NVLink domain
	for _, n := range snap.Nodes {
		if !slices.Contains(names, n.Name) {
			continue
		}
		if n.TopologyGuessed {
			t.Errorf("berth guesses %s's topology: it does not read the agent's", n.Name)
		}
		for _, g := range n.GPUs {
			for _, w := range want[n.Name] {
				if w.UUID == g.ID {
					domain[g.ID] = w.Domain
					if g.Index != w.Index || g.Domain != w.Domain || g.NUMA != w.NUMA {
						t.Errorf("%s: berth reads index %d, NVLink domain %d, NUMA node %d; the agent published %d, %d, %d",
							g.ID, g.Index, g.Domain, g.NUMA, w.Index, w.Domain, w.NUMA)
					}
				}
			}
		}
	}
	if len(domain) != len(want["node-1"])+len(want["node-2"]) {
		t.Fatalf("berth reads %d of the nodes' GPUs with the agent's topology: %v", len(domain), domain)
	}
	loop, _ := resLoop(t, realSpecs(t, "", map[string]string{"pair": "  resources: {gpus: 2}"}))
	if _, err := loop.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	a := runningAlloc(t, c, "pair")
	ids := wtDeviceIDs(a)
	if len(ids) != 2 || domain[ids[0]] != domain[ids[1]] {
		t.Fatalf("pair runs on %s's GPUs %v, in NVLink domains %d and %d; want 2 of one domain", a.NodeName, ids, domain[ids[0]], domain[ids[len(ids)-1]])
	}
	t.Logf("pair runs on %s's GPUs %v, both in NVLink domain %d", a.NodeName, ids, domain[ids[0]])

	// 8. With workload identity, the bound policy is what lets the agent
	// in: without it, its next round is refused.
	if wi {
		if _, err := c.ACLPolicies().Delete("berth-agent", nil); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "node-1's agent refused once its job's policy is gone", time.Minute, func() error {
			if out := allocLogs(t, c, allocs["node-1"], "agent"); !strings.Contains(out, "Permission denied") {
				return fmt.Errorf("its log so far:\n%s", out)
			}
			return nil
		})
	}
}
