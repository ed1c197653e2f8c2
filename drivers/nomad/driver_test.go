package nomad_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/drivertest"
	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/drivers/nomad/gpumeta"
	"github.com/berth-dev/berth/drivers/nomad/nomadfake"
	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/berth-dev/berth/schema"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hashicorp/nomad/api"
)

var ctx = context.Background()

func recorded(t *testing.T, prefix string) json.RawMessage {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("testdata", prefix+"-*.json"))
	if len(files) != 1 {
		t.Fatalf("recording %s: %v", prefix, files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var x struct {
		Response struct {
			Body json.RawMessage `json:"body"`
		} `json:"response"`
	}
	if err := json.Unmarshal(b, &x); err != nil {
		t.Fatal(err)
	}
	return x.Response.Body
}

// TestObserveRecordedNomad serves the bodies a real Nomad 1.6.5 sent
// (nodes, the node after `berth agent` metadata, berth's job list with
// meta, the job, the running allocation) and checks what Observe makes of
// them. The allocation list is the recorded allocation as its list stub
// (?resources=true): without its job, with its job's version.
func TestObserveRecordedNomad(t *testing.T) {
	const nodeID = "1317ad6e-a51d-6fef-4356-9a7348e09a61"
	var alloc map[string]any
	if err := json.Unmarshal(recorded(t, "29"), &alloc); err != nil {
		t.Fatal(err)
	}
	alloc["JobVersion"] = alloc["Job"].(map[string]any)["Version"]
	delete(alloc, "Job")
	stubs, err := json.Marshal([]any{alloc})
	if err != nil {
		t.Fatal(err)
	}
	bodies := map[string]json.RawMessage{
		"/v1/nodes":                          recorded(t, "03"),
		"/v1/node/" + nodeID:                 recorded(t, "22"),
		"/v1/allocations":                    stubs,
		"/v1/jobs":                           recorded(t, "26"),
		"/v1/job/" + alloc["JobID"].(string): recorded(t, "27"),
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := bodies[r.URL.Path]
		if !ok {
			http.Error(w, "not recorded: "+r.URL.Path, 404)
			return
		}
		if r.URL.Path == "/v1/jobs" && (r.URL.Query().Get("meta") != "true" || r.URL.Query().Get("namespace") != "*") {
			http.Error(w, "Observe must list jobs in every namespace with ?meta=true", 400)
			return
		}
		if r.URL.Path == "/v1/allocations" && (r.URL.Query().Get("resources") != "true" || r.URL.Query().Get("namespace") != "*") {
			http.Error(w, "Observe must list allocations in every namespace with ?resources=true", 400)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Nomad-Index", "21")
		_, _ = w.Write(b)
	}))
	defer srv.Close()
	d := realnomad.NewDriver(t, nomad.Config{Address: srv.URL})
	snap, err := d.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gpu := func(i, domain, numa int, pci string) drivers.GPU {
		return drivers.GPU{ID: "GPU-fake-" + pci, Index: i, Model: "H100-fake", MemoryBytes: 81559 << 20, Domain: domain, NUMA: numa, Healthy: true}
	}
	want := drivers.Snapshot{
		ObservedAt: snap.ObservedAt,
		Nodes: []drivers.Node{{
			Name: "gpu-node-1", ID: nodeID, Pool: "default", Datacenter: "dc1", Ready: true, Eligible: true,
			// Nomad's own default metadata, which a placement may match.
			Meta: map[string]string{
				"connect.gateway_image":     "docker.io/envoyproxy/envoy:v${NOMAD_envoy_version}",
				"connect.log_level":         "info",
				"connect.proxy_concurrency": "1",
				"connect.sidecar_image":     "docker.io/envoyproxy/envoy:v${NOMAD_envoy_version}",
			},
			// Nomad's CpuShares (MHz), memory and disk, none reserved; 2
			// reservable cores of 2245 MHz each; its healthy drivers.
			CPUMHz: 4490, MemoryBytes: 24105 << 20, DiskBytes: 76790 << 20,
			Cores: 2, CPUPerCore: 2245,
			Features: true, Drivers: []string{"exec", "java", "mock_driver", "raw_exec"}, HostVolumes: []string{},
			// berth.gpu.topology "v1;pci=18,2a,ba,db;nvlink=0-1,2-3;numa=0:0-1,1:2-3"
			GPUs: []drivers.GPU{gpu(0, 0, 0, "0"), gpu(1, 0, 0, "1"), gpu(2, 1, 1, "2"), gpu(3, 1, 1, "3")},
		}},
		Allocs: []drivers.Alloc{{
			Workspace: schema.Ref{Project: "vision", Name: "ws-medium-train"}, Replica: 0, Node: "gpu-node-1",
			GPUs: []string{"GPU-fake-3"}, CPUMHz: 200, MemoryBytes: 256 << 20, DiskBytes: 300 << 20,
			Phase: drivers.AllocRunning, Revision: "1",
			StartedAt: time.Date(2026, 11, 29, 16, 26, 6, 676618170, time.UTC),
			Priority:  50, ID: snap.Allocs[0].ID,
		}},
	}
	if d := cmp.Diff(want, snap); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}

// hookFake wraps a fake so a test can act between the driver's reads and
// its writes, as another writer would.
type hookFake struct {
	*nomadfake.Server
	mu     sync.Mutex
	before func(r *http.Request, body []byte)
}

func (h *hookFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	hook := h.before
	h.mu.Unlock()
	if hook != nil {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		hook(r, b)
	}
	h.Server.ServeHTTP(w, r)
}

func newHooked(t *testing.T) (*hookFake, *nomad.Driver, []drivers.Node) {
	t.Helper()
	nodes := drivertest.Nodes()
	fake, _ := fakeCluster(t, nodes)
	h := &hookFake{Server: fake}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	d := realnomad.NewDriver(t, nomad.Config{Address: srv.URL, PlacementTimeout: time.Second})
	if _, err := d.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	return h, d, nodes
}

var (
	tier    = &schema.PriorityTier{Meta: schema.Meta{Name: "high"}, Spec: schema.TierSpec{Value: 80}}
	project = &schema.Project{Meta: schema.Meta{Name: "vision"}, Spec: schema.ProjectSpec{Tier: "high", Description: "Vision team"}}
)

func startAction(name string, node string, gpus ...string) drivers.Action {
	ws := &schema.Workspace{
		Meta: schema.Meta{Name: name, Project: "vision"},
		Spec: schema.WorkspaceSpec{
			Task:       schema.Task{Driver: "docker", Image: "ghcr.io/acme/train:1", Command: "python", Args: []string{"train.py"}, Env: map[string]string{"EPOCHS": "3"}},
			Resources:  schema.WorkResources{GPUs: len(gpus), CPUMHz: 1500, MemoryBytes: 1 << 30},
			Checkpoint: schema.Checkpoint{Signal: "SIGUSR1", GracePeriod: 90 * time.Second},
			Volumes:    []schema.VolumeMount{{Name: "datasets", MountPath: "/data", ReadOnly: true}},
		},
	}
	return drivers.Action{
		Kind: drivers.ActionStart, Workspace: ws.Ref(), Spec: ws, Project: project, Tier: tier, Revision: "abc123",
		Placements: []drivers.Placement{{Node: node, GPUs: gpus}},
	}
}

func jobOf(t *testing.T, d *nomad.Driver, ns, id string) *api.Job {
	t.Helper()
	j, _, err := d.Client().Jobs().Info(id, &api.QueryOptions{Namespace: ns})
	if err != nil {
		t.Fatalf("read job %s/%s: %v", ns, id, err)
	}
	return j
}

func TestStartRendersPinnedJob(t *testing.T) {
	_, d, nodes := newHooked(t)
	g := nodes[0].GPUs
	if err := d.Apply(ctx, startAction("train", "gpu-a", g[5].ID, g[4].ID)); err != nil {
		t.Fatal(err)
	}
	j := jobOf(t, d, "vision", "train")
	tg := j.TaskGroups[0]
	task := tg.Tasks[0]
	got := map[string]any{
		"type": *j.Type, "priority": *j.Priority,
		"meta":      j.Meta,
		"node":      *tg.Constraints[0],
		"device":    task.Resources.Devices[0].Name,
		"count":     *task.Resources.Devices[0].Count,
		"pin":       *task.Resources.Devices[0].Constraints[0],
		"signal":    task.KillSignal,
		"grace":     *task.KillTimeout,
		"cpu":       task.Resources.CPU,
		"cores":     task.Resources.Cores,
		"diskMB":    *tg.EphemeralDisk.SizeMB,
		"memoryMB":  *task.Resources.MemoryMB,
		"config":    task.Config,
		"env":       task.Env,
		"mount":     *task.VolumeMounts[0].Destination,
		"volume":    tg.Volumes["datasets"].Source,
		"namespace": *j.Namespace,
	}
	want := map[string]any{
		"type": "batch", "priority": 80,
		"meta": map[string]string{
			"berth.project": "vision", "berth.workspace": "train", "berth.revision": "abc123",
			"berth.gpus": g[4].ID + "," + g[5].ID, "berth.spec-hash": drivers.Fingerprint(&startAction("train", "gpu-a", g[5].ID, g[4].ID).Spec.Spec),
			"berth.job-hash": j.Meta["berth.job-hash"],
		},
		"node":      api.Constraint{LTarget: "${node.unique.id}", Operand: "=", RTarget: "00000001-aaaa-4bbb-8ccc-000000000001"},
		"device":    "nvidia/gpu",
		"count":     uint64(2),
		"pin":       api.Constraint{LTarget: "${device.ids}", Operand: "set_contains_any", RTarget: g[4].ID + "," + g[5].ID},
		"signal":    "SIGUSR1",
		"grace":     90 * time.Second,
		"cpu":       intPtr(1500), // a MHz share, not cores
		"cores":     (*int)(nil),
		"diskMB":    300, // Nomad's default, written out
		"memoryMB":  1024,
		"config":    map[string]any{"image": "ghcr.io/acme/train:1", "command": "python", "args": []any{"train.py"}},
		"env":       map[string]string{"EPOCHS": "3"},
		"mount":     "/data",
		"volume":    "datasets",
		"namespace": "vision",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("job (-want +got)\n%s", d)
	}
	ns, _, err := d.Client().Namespaces().Info("vision", nil)
	if err != nil || ns.Description != "Vision team" || ns.Meta["berth.created-by"] != "berth" {
		t.Errorf("namespace: %+v, %v", ns, err)
	}
	// A workspace asking to be restarted is a batch job whose restart
	// block restarts it in place a bounded number of times, then fails.
	a := startAction("serve", "gpu-b", nodes[1].GPUs[0].ID)
	a.Spec.Spec.Restart = schema.Restart{Attempts: 2, Delay: 20 * time.Second}
	if err := d.Apply(ctx, a); err != nil {
		t.Fatal(err)
	}
	sj := jobOf(t, d, "vision", "serve")
	rp := sj.TaskGroups[0].RestartPolicy
	if *sj.Type != "batch" || *rp.Attempts != 2 || *rp.Mode != "fail" || *rp.Delay != 20*time.Second || *rp.Interval != nomad.RestartInterval {
		t.Errorf("restart {attempts: 2, delay: 20s}: type %s, restart %+v; want batch, 2 attempts 20s apart within %s, then fail", *sj.Type, *rp, nomad.RestartInterval)
	}
}

// TestPlacementMismatchIsStopped: another writer takes a pinned GPU
// between berth's check and its register; Nomad 1.6 places the job with
// no GPU (recording 82). berth stops it and reports a conflict.
func TestPlacementMismatchIsStopped(t *testing.T) {
	h, d, nodes := newHooked(t)
	g := nodes[0].GPUs
	h.before = func(r *http.Request, body []byte) {
		if r.Method == "PUT" && strings.Contains(string(body), `"train"`) {
			h.mu.Lock()
			h.before = nil
			h.mu.Unlock()
			h.RegisterForeignJob("default", "squatter", "00000001-aaaa-4bbb-8ccc-000000000001", []string{g[1].ID})
		}
	}
	err := d.Apply(ctx, startAction("train", "gpu-a", g[1].ID))
	if err == nil || drivers.ClassOf(err) != drivers.ClassConflict || !strings.Contains(err.Error(), "not the pinned") {
		t.Fatalf("Apply = %v, want a conflict naming the mismatch", err)
	}
	if j := jobOf(t, d, "vision", "train"); !*j.Stop {
		t.Errorf("the wrongly placed job was left running")
	}
}

// TestEnforceIndexConflict: another writer registers the job between
// berth's read and its write; EnforceIndex makes Nomad refuse (500,
// recording 34) and berth reports a conflict.
func TestEnforceIndexConflict(t *testing.T) {
	h, d, nodes := newHooked(t)
	g := nodes[0].GPUs
	if err := d.Apply(ctx, startAction("train", "gpu-a", g[0].ID)); err != nil {
		t.Fatal(err)
	}
	h.Settle()
	h.before = func(r *http.Request, body []byte) {
		if r.Method == "PUT" && strings.HasPrefix(r.URL.Path, "/v1/job") {
			h.mu.Lock()
			h.before = nil
			h.mu.Unlock()
			j := jobOf(t, d, "vision", "train")
			j.Meta["someone"] = "else"
			if _, _, err := d.Client().Jobs().Register(j, &api.WriteOptions{Namespace: "vision"}); err != nil {
				t.Errorf("other writer: %v", err)
			}
		}
	}
	a := startAction("train", "gpu-a", g[0].ID)
	a.Kind, a.Revision, a.Restarts = drivers.ActionUpdate, "def456", true
	a.Spec.Spec.Task.Args = []string{"train.py", "--epochs=4"} // a task change: registered again
	err := d.Apply(ctx, a)
	if drivers.ClassOf(err) != drivers.ClassConflict || !strings.Contains(err.Error(), "Enforcing job modify index") {
		t.Fatalf("Apply = %v, want a conflict from EnforceIndex", err)
	}
}

func TestNeverTouchesForeignJobs(t *testing.T) {
	h, d, nodes := newHooked(t)
	if _, err := d.Client().Namespaces().Register(&api.Namespace{Name: "vision", Description: "theirs"}, nil); err != nil {
		t.Fatal(err)
	}
	h.RegisterForeignJob("vision", "train", "00000001-aaaa-4bbb-8ccc-000000000001", nil)
	err := d.Apply(ctx, startAction("train", "gpu-a", nodes[0].GPUs[0].ID))
	if drivers.ClassOf(err) != drivers.ClassInvalid {
		t.Errorf("Start over a foreign job: %v, want invalid", err)
	}
	err = d.Apply(ctx, drivers.Action{Kind: drivers.ActionStop, Workspace: schema.Ref{Project: "vision", Name: "train"}, Project: project})
	if drivers.ClassOf(err) != drivers.ClassInvalid {
		t.Errorf("Stop of a foreign job: %v, want invalid", err)
	}
	if j := jobOf(t, d, "vision", "train"); *j.Stop {
		t.Errorf("berth stopped a job without its marker")
	}
	ns, _, _ := d.Client().Namespaces().Info("vision", nil)
	if ns.Description != "theirs" {
		t.Errorf("berth rewrote a namespace it did not create: %+v", ns)
	}
	deleted, err := d.PruneNamespaces(ctx, nil)
	if err != nil || len(deleted) != 0 {
		t.Errorf("PruneNamespaces deleted %v (%v); it must keep namespaces berth did not create", deleted, err)
	}
}

func TestPruneNamespaces(t *testing.T) {
	h, d, nodes := newHooked(t)
	if err := d.Apply(ctx, startAction("train", "gpu-a", nodes[0].GPUs[0].ID)); err != nil {
		t.Fatal(err)
	}
	if deleted, err := d.PruneNamespaces(ctx, nil); err != nil || len(deleted) != 0 {
		t.Errorf("a namespace with jobs was deleted: %v %v", deleted, err)
	}
	ref := schema.Ref{Project: "vision", Name: "train"}
	if err := d.Apply(ctx, drivers.Action{Kind: drivers.ActionStop, Workspace: ref, Project: project}); err != nil {
		t.Fatal(err)
	}
	h.Settle()
	if _, _, err := d.Client().Jobs().Deregister("train", true, &api.WriteOptions{Namespace: "vision"}); err != nil {
		t.Fatal(err)
	}
	deleted, err := d.PruneNamespaces(ctx, []string{"other"})
	if err != nil || !cmp.Equal(deleted, []string{"vision"}) {
		t.Errorf("PruneNamespaces = %v, %v; want [vision]", deleted, err)
	}
}

func TestObserveTopologyAndForeignGPUs(t *testing.T) {
	fake := nomadfake.New()
	fake.AddNode(nomadfake.Node{ID: "n1", Name: "plain", GPUs: []nomadfake.GPU{
		{ID: "GPU-b", PCIBusID: "00000000:2a:00.0", Healthy: true},
		{ID: "GPU-a", PCIBusID: "00000000:18:00.0", Healthy: true},
		{ID: "GPU-c", PCIBusID: "00000000:3a:00.0", Healthy: false},
	}})
	fake.AddNode(nomadfake.Node{ID: "n2", Name: "draining", Drain: true})
	fake.AddNode(nomadfake.Node{ID: "n3", Name: "down", Down: true})
	fake.RegisterForeignJob("default", "web", "n1", []string{"GPU-b"})
	d := realnomad.NewDriver(t, nomad.Config{Address: fake.Start(t).URL})
	snap, err := d.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Capacity as Nomad's scheduler counts it; on plain, less what the
	// foreign job reserves (Nomad's defaults: 100 MHz, 300 MB, 300 MB).
	features := func(n drivers.Node) drivers.Node {
		n.Cores, n.CPUPerCore = 2, 2245
		n.Features, n.Drivers, n.HostVolumes = true, []string{"docker", "exec", "raw_exec"}, []string{}
		return n
	}
	want := []drivers.Node{
		features(drivers.Node{Name: "down", ID: "n3", Pool: "default", Datacenter: "dc1", Eligible: true, Status: "down", CPUMHz: 4490, MemoryBytes: 24105 << 20, DiskBytes: 76790 << 20}),
		features(drivers.Node{Name: "draining", ID: "n2", Pool: "default", Datacenter: "dc1", Ready: true, Draining: true, CPUMHz: 4490, MemoryBytes: 24105 << 20, DiskBytes: 76790 << 20}),
		features(drivers.Node{Name: "plain", ID: "n1", Pool: "default", Datacenter: "dc1", Ready: true, Eligible: true, TopologyGuessed: true,
			CPUMHz: 4490 - 100, MemoryBytes: (24105 - 300) << 20, DiskBytes: (76790 - 300) << 20,
			GPUs: []drivers.GPU{
				{ID: "GPU-a", Index: 0, Model: "H100-fake", MemoryBytes: 81559 << 20, Healthy: true},
				{ID: "GPU-b", Index: 1, Model: "H100-fake", MemoryBytes: 81559 << 20, HeldBy: "web"}, // a foreign job holds it
				{ID: "GPU-c", Index: 2, Model: "H100-fake", MemoryBytes: 81559 << 20, Healthy: false},
			}}),
	}
	if d := cmp.Diff(want, snap.Nodes); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	if len(snap.Allocs) != 0 {
		t.Errorf("a foreign job's allocation is in the snapshot: %v", snap.Allocs)
	}
}

// TestObserveTopologyByUUID: a GPU the device plugin reports without a
// PCI bus (as the nomad-dev kit's fake plugin does) is matched to berth
// agent's topology by its ID, the GPU's UUID, and one the metadata lists
// under another UUID by its PCI bus; NVML's order and the published
// domains and NUMA nodes hold. A GPU that matches neither leaves the
// node's topology guessed.
func TestObserveTopologyByUUID(t *testing.T) {
	topo := []gpumeta.GPU{
		{Index: 0, UUID: "GPU-c", PCIBusID: "00000000:18:00.0", NUMA: 0, Domain: 0},
		{Index: 1, UUID: "GPU-a", PCIBusID: "00000000:2a:00.0", NUMA: 1, Domain: 1},
		{Index: 2, UUID: "GPU-x", PCIBusID: "00000000:3a:00.0", NUMA: 0, Domain: 0},
		{Index: 3, UUID: "GPU-b", PCIBusID: "00000000:4a:00.0", NUMA: 1, Domain: 1},
	}
	gpus := []nomadfake.GPU{
		{ID: "GPU-a", Healthy: true}, {ID: "GPU-b", Healthy: true}, {ID: "GPU-c", Healthy: true},
		{ID: "GPU-d", PCIBusID: "00000000:3a:00.0", Healthy: true}, // a UUID the metadata lacks, on GPU-x's bus
	}
	n := observeNode(t, nomadfake.Node{ID: "n1", Name: "kit", Meta: gpumeta.Encode(topo), GPUs: gpus})
	if n.TopologyGuessed {
		t.Fatal("topology guessed")
	}
	want := []drivers.GPU{
		{ID: "GPU-c", Index: 0, Domain: 0, NUMA: 0},
		{ID: "GPU-a", Index: 1, Domain: 1, NUMA: 1},
		{ID: "GPU-d", Index: 2, Domain: 0, NUMA: 0},
		{ID: "GPU-b", Index: 3, Domain: 1, NUMA: 1},
	}
	for i := range want {
		want[i].Model, want[i].MemoryBytes, want[i].Healthy = "H100-fake", 81559<<20, true
	}
	if d := cmp.Diff(want, n.GPUs); d != "" {
		t.Errorf("GPUs (-want +got)\n%s", d)
	}

	gpus[3].PCIBusID = "" // GPU-d: neither its UUID nor a bus
	if n := observeNode(t, nomadfake.Node{ID: "n1", Name: "kit", Meta: gpumeta.Encode(topo), GPUs: gpus}); !n.TopologyGuessed {
		t.Errorf("a GPU the metadata does not list was matched: %+v", n.GPUs)
	}
}

func TestErrorClassesAndToken(t *testing.T) {
	const secret = "s3cret-token-value"
	fake := nomadfake.New(nomadfake.WithToken(secret))
	url := fake.Start(t).URL
	wrong := realnomad.NewDriver(t, nomad.Config{Address: url, Token: "not-" + secret})
	_, err := wrong.Observe(ctx)
	if drivers.ClassOf(err) != drivers.ClassTransient || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "NOMAD_TOKEN") || !strings.Contains(err.Error(), "examples/deploy") {
		t.Errorf("403: %v, want transient (the operator fixes the token or policy)", err)
	}
	cfg := nomad.Config{Address: url, Token: secret}
	for _, s := range []string{cfg.String(), strings.ReplaceAll(strings.TrimSpace(strings.Join([]string{cfg.GoString()}, "")), "\n", "")} {
		if strings.Contains(s, secret) {
			t.Errorf("the token is printed: %s", s)
		}
	}
	good := realnomad.NewDriver(t, cfg)
	if _, err := good.Observe(ctx); err != nil {
		t.Fatalf("with the right token: %v", err)
	}
	fake.Fail("GET", "/v1/nodes", 500, "rpc error: No cluster leader")
	_, err = good.Observe(ctx)
	if drivers.ClassOf(err) != drivers.ClassTransient || strings.Contains(err.Error(), secret) {
		t.Errorf("500 no leader: %v, want transient without the token", err)
	}
	down := realnomad.NewDriver(t, nomad.Config{Address: "http://127.0.0.1:1", Token: secret})
	_, err = down.Observe(ctx)
	if drivers.ClassOf(err) != drivers.ClassTransient || strings.Contains(err.Error(), secret) {
		t.Errorf("unreachable: %v, want transient without the token", err)
	}
}

func TestWaitForChange(t *testing.T) {
	fake := nomadfake.New()
	fake.AddNode(nomadfake.Node{ID: "n1", Name: "a"})
	d := realnomad.NewDriver(t, nomad.Config{Address: fake.Start(t).URL})
	if _, err := d.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	go func() {
		time.Sleep(50 * time.Millisecond)
		fake.SetNodeStatus("n1", "down", false)
	}()
	if err := d.WaitForChange(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > time.Second {
		t.Errorf("a change was seen after %s, want within a second", el)
	}
	snap, _ := d.Observe(ctx)
	if snap.Nodes[0].Ready {
		t.Errorf("node still ready after the change")
	}
}

// TestBusyGPUIsNeverPinned: berth pins only GPUs it knows are free; a
// GPU another job holds is refused before anything is registered.
func TestBusyGPUIsNeverPinned(t *testing.T) {
	h, d, nodes := newHooked(t)
	g := nodes[0].GPUs
	h.RegisterForeignJob("default", "web", "00000001-aaaa-4bbb-8ccc-000000000001", []string{g[2].ID})
	err := d.Apply(ctx, startAction("train", "gpu-a", g[2].ID, g[3].ID))
	if drivers.ClassOf(err) != drivers.ClassConflict || !strings.Contains(err.Error(), "held by job default/web") {
		t.Fatalf("Apply = %v, want a conflict naming the holder", err)
	}
	for _, r := range h.Requests() {
		if strings.HasPrefix(r, "PUT /v1/job") {
			t.Errorf("a job was registered on a busy GPU: %s", r)
		}
	}
}

func TestWatch(t *testing.T) {
	fake := nomadfake.New()
	fake.AddNode(nomadfake.Node{ID: "n1", Name: "a"})
	d := realnomad.NewDriver(t, nomad.Config{Address: fake.Start(t).URL})
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := d.Watch(wctx)
	if _, err := d.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	fake.SetNodeStatus("n1", "down", false)
	select {
	case <-ch:
	case <-time.After(2 * time.Second):
		t.Fatal("no change seen within 2s")
	}
}

// BenchmarkObserve: one observation of a 64-node, 512-GPU cluster with
// 256 running workspaces, over HTTP against the fake.
func BenchmarkObserve(b *testing.B) {
	var nodes []drivers.Node
	for n := 0; n < 64; n++ {
		node := drivers.Node{Name: fmt.Sprintf("gpu-%02d", n), Ready: true, Eligible: true}
		for i := 0; i < 8; i++ {
			node.GPUs = append(node.GPUs, drivers.GPU{ID: fmt.Sprintf("GPU-%02d-%d", n, i), Index: i, Domain: i / 4, NUMA: i / 4, Healthy: true})
		}
		nodes = append(nodes, node)
	}
	fake, d := fakeCluster(b, nodes)
	if _, err := d.Observe(ctx); err != nil {
		b.Fatal(err)
	}
	for n := 0; n < 64; n++ {
		for w := 0; w < 4; w++ {
			a := startAction(fmt.Sprintf("ws-%02d-%d", n, w), nodes[n].Name, nodes[n].GPUs[2*w].ID, nodes[n].GPUs[2*w+1].ID)
			a.Spec.Spec.Resources.CPUMHz = 1000 // four to a node: the fake's 4,490 MHz holds them
			if err := d.Apply(ctx, a); err != nil {
				b.Fatal(err)
			}
		}
	}
	fake.Settle()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		snap, err := d.Observe(ctx)
		if err != nil || len(snap.Allocs) != 256 {
			b.Fatalf("%d allocs, %v", len(snap.Allocs), err)
		}
	}
}

// TestEvictionsAreReported: an allocation Nomad evicted (native
// preemption, recording 52) leaves the snapshot and is reported with its
// cause.
func TestEvictionsAreReported(t *testing.T) {
	h, d, nodes := newHooked(t)
	if err := d.Apply(ctx, startAction("train", "gpu-a", nodes[0].GPUs[0].ID)); err != nil {
		t.Fatal(err)
	}
	h.Settle()
	allocs := h.AllocsOf("vision", "train")
	h.Evict(allocs[0].ID, "dbe3c873-416e-52f2-c498-a3a5aaa70b04")
	snap, err := d.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Allocs) != 0 {
		t.Errorf("an evicted allocation holds nothing, but the snapshot has %v", snap.Allocs)
	}
	ev := d.Evictions()
	want := []nomad.Eviction{{
		Workspace: schema.Ref{Project: "vision", Name: "train"}, Node: "gpu-a", GPUs: []string{nodes[0].GPUs[0].ID},
		AllocID: allocs[0].ID, By: "dbe3c873-416e-52f2-c498-a3a5aaa70b04",
		Reason: "Preempted by alloc ID dbe3c873-416e-52f2-c498-a3a5aaa70b04",
	}}
	if d := cmp.Diff(want, ev, cmpopts.IgnoreFields(nomad.Eviction{}, "At")); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	// Starting it again replaces the evicted run.
	if err := d.Apply(ctx, startAction("train", "gpu-a", nodes[0].GPUs[0].ID)); err == nil {
		h.Settle()
	} else if drivers.ClassOf(err) != drivers.ClassConflict {
		t.Fatalf("restart after eviction: %v", err)
	} else if err := d.Apply(ctx, startAction("train", "gpu-a", nodes[0].GPUs[0].ID)); err != nil {
		t.Fatalf("second restart after eviction: %v", err)
	}
	h.Settle()
	snap, _ = d.Observe(ctx)
	if len(snap.Allocs) != 1 || snap.Allocs[0].Phase != drivers.AllocRunning {
		t.Errorf("after restarting: %+v", snap.Allocs)
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Setenv("NOMAD_ADDR", "https://nomad.example:4646")
	t.Setenv("NOMAD_TOKEN", "secret-id")
	t.Setenv("NOMAD_REGION", "eu")
	t.Setenv("NOMAD_CACERT", "/etc/nomad/ca.pem")
	t.Setenv("NOMAD_CLIENT_CERT", "/etc/nomad/cli.pem")
	t.Setenv("NOMAD_CLIENT_KEY", "/etc/nomad/cli-key.pem")
	got := nomad.ConfigFromEnv("")
	want := nomad.Config{Address: "https://nomad.example:4646", Region: "eu", Token: "secret-id",
		CACert: "/etc/nomad/ca.pem", ClientCert: "/etc/nomad/cli.pem", ClientKey: "/etc/nomad/cli-key.pem"}
	if d := cmp.Diff(want, got, cmpopts.IgnoreFields(nomad.Config{}, "Now", "HTTPClient")); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	if got := nomad.ConfigFromEnv("http://10.0.0.1:4646").Address; got != "http://10.0.0.1:4646" {
		t.Errorf("override: %s", got)
	}
	if s := fmt.Sprintf("%v %+v %#v %s", got, got, got, got); strings.Contains(s, "secret-id") {
		t.Errorf("the token is printed: %s", s)
	}
}

// TestRegisterErrorClasses: Nomad's answers to a register of a valid job
// at the current index, as recorded or injected, sorted into what the
// loop does next by status, never by text: a 500 is transient whatever
// its message says (the job validates and its index is current), so a
// 500 whose body reads like a validation failure or a stale index, or an
// RPC cut ("rpc error: EOF"), is retried.
func TestRegisterErrorClasses(t *testing.T) {
	var stale, prio struct {
		Response struct{ Body string } `json:"response"`
	}
	_ = json.Unmarshal(mustRead(t, "34"), &stale)
	_ = json.Unmarshal(mustRead(t, "36"), &prio)
	tests := map[string]struct {
		status int
		body   string
		want   drivers.Class
	}{
		"a stale EnforceIndex's text (34), index current": {500, stale.Response.Body, drivers.ClassTransient},
		"a validation failure's text (36), job valid":     {500, prio.Response.Body, drivers.ClassTransient},
		"rpc error: EOF":    {500, "1 error occurred:\n\t* rpc error: EOF\n\n", drivers.ClassTransient},
		"no leader":         {500, "rpc error: No cluster leader", drivers.ClassTransient},
		"unavailable":       {503, "Service Unavailable", drivers.ClassTransient},
		"bad request":       {400, "Request body is invalid", drivers.ClassInvalid},
		"permission denied": {403, "Permission denied", drivers.ClassTransient},
		"conflict":          {409, "Conflict", drivers.ClassConflict},
		"too many requests": {429, "Too Many Requests", drivers.ClassTransient},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			h, d, nodes := newHooked(t)
			h.Fail("PUT", "/v1/job", tt.status, tt.body)
			err := d.Apply(ctx, startAction("train", "gpu-a", nodes[0].GPUs[0].ID))
			if got := drivers.ClassOf(err); got != tt.want {
				t.Errorf("class %s, want %s (%v)", got, tt.want, err)
			}
			var de *drivers.Error
			if !errors.As(err, &de) || de.Workspace != (schema.Ref{Project: "vision", Name: "train"}) {
				t.Errorf("the error must name the workspace: %#v", err)
			}
		})
	}
}

// TestRegisterInvalidJob: a job Nomad's validation refuses (priority 101,
// recording 36) is invalid, with Nomad's validation errors; Nomad said
// so through /v1/validate/job, not through the register's message.
func TestRegisterInvalidJob(t *testing.T) {
	h, d, nodes := newHooked(t)
	a := startAction("train", "gpu-a", nodes[0].GPUs[0].ID)
	a.Tier = &schema.PriorityTier{Meta: schema.Meta{Name: "over"}, Spec: schema.TierSpec{Value: 101}}
	err := d.Apply(ctx, a)
	if drivers.ClassOf(err) != drivers.ClassInvalid || !strings.Contains(err.Error(), "Nomad's validation: job priority must be between [1, 100]") {
		t.Fatalf("Apply = %v, want invalid with Nomad's validation errors", err)
	}
	if !slices.Contains(h.Requests(), "PUT /v1/validate/job?namespace=vision") {
		t.Errorf("requests %v: want a validation after the refused register", h.Requests())
	}
}

// TestConcurrentStartsEnsureNamespaceOnce: the reconciler applies up to
// 32 starts at once; for a project's namespace they read it once and
// create it once, not once per applier that got there first (the real
// agent saw 32 reads and 14 creates for 300 starts in one namespace).
func TestConcurrentStartsEnsureNamespaceOnce(t *testing.T) {
	h, d, _ := newHooked(t)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := startAction(fmt.Sprintf("w%d", i), "gpu-a")
			a.Spec.Spec.Resources = schema.WorkResources{CPUMHz: 100, MemoryBytes: 16 << 20}
			errs <- d.Apply(ctx, a)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	n := map[string]int{}
	for _, r := range h.Requests() {
		if strings.Contains(r, "/v1/namespace") {
			n[strings.SplitN(r, "?", 2)[0]]++
		}
	}
	want := map[string]int{"GET /v1/namespace/vision": 1, "PUT /v1/namespace": 1}
	if d := cmp.Diff(want, n); d != "" {
		t.Errorf("namespace requests for 16 concurrent starts (-want +got):\n%s", d)
	}
}

// TestRegisterNonexistentNamespace: a register into a namespace deleted
// since this cycle ensured it (Nomad: 500) makes the driver ask for the
// namespace, ensure it again when Nomad says it is gone, and register
// once more. A 500 whose text only reads so, with the namespace there,
// does not.
func TestRegisterNonexistentNamespace(t *testing.T) {
	h, d, nodes := newHooked(t)
	a := startAction("train", "gpu-a", nodes[0].GPUs[0].ID)
	if err := d.Apply(ctx, drivers.Action{Kind: drivers.ActionStop, Workspace: a.Workspace, Project: project}); err != nil {
		t.Fatal(err)
	}
	if err := d.Apply(ctx, startAction("other", "gpu-a", nodes[0].GPUs[1].ID)); err != nil { // ensures vision
		t.Fatal(err)
	}
	if _, _, err := d.Client().Jobs().Deregister("other", true, &api.WriteOptions{Namespace: "vision"}); err != nil {
		t.Fatal(err)
	}
	h.before = func(r *http.Request, body []byte) {
		if r.Method == "PUT" && r.URL.Path == "/v1/jobs" {
			h.mu.Lock()
			h.before = nil
			h.mu.Unlock()
			if _, err := d.Client().Namespaces().Delete("vision", nil); err != nil {
				t.Errorf("delete the namespace: %v", err)
			}
		}
	}
	if err := d.Apply(ctx, a); err != nil {
		t.Fatalf("Apply = %v, want the namespace ensured again and the job registered", err)
	}
	if ns, _, err := d.Client().Namespaces().Info("vision", nil); err != nil || ns.Meta[nomad.MetaCreatedBy] != "berth" {
		t.Errorf("namespace vision after the register: %+v, %v", ns, err)
	}

	h.Fail("PUT", "/v1/job", 500, "1 error occurred:\n\t* job \"x\" is in nonexistent namespace \"y\"\n\n")
	err := d.Apply(ctx, startAction("third", "gpu-a", nodes[0].GPUs[2].ID))
	if drivers.ClassOf(err) != drivers.ClassTransient {
		t.Errorf("a 500 reading like a missing namespace, the namespace there: %v, want transient", err)
	}
}

func mustRead(t *testing.T, prefix string) []byte {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("testdata", prefix+"-*.json"))
	if len(files) != 1 {
		t.Fatalf("recording %s: %v", prefix, files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func intPtr(v int) *int { return &v }

// TestRenderResources: a job asks Nomad to reserve exactly what the
// decision counted: a CPU share in MHz or exclusive cores (never both),
// memory and ephemeral disk in MiB, Nomad's defaults written out.
func TestRenderResources(t *testing.T) {
	type res struct {
		CPU, Cores       *int
		MemoryMB, DiskMB int
	}
	tests := map[string]struct {
		in   schema.WorkResources
		want res
	}{
		"share":    {schema.WorkResources{CPUMHz: 500, MemoryBytes: 2 << 30, DiskBytes: 1 << 30}, res{intPtr(500), nil, 2048, 1024}},
		"cores":    {schema.WorkResources{ExclusiveCores: 2, MemoryBytes: 300 << 20, DiskBytes: 300 << 20}, res{nil, intPtr(2), 300, 300}},
		"defaults": {schema.WorkResources{}, res{intPtr(100), nil, 300, 300}},
		"rounded":  {schema.WorkResources{CPUMHz: 100, MemoryBytes: 1e9, DiskBytes: 1}, res{intPtr(100), nil, 954, 1}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, d, nodes := newHooked(t)
			a := startAction("train", "gpu-a", nodes[0].GPUs[0].ID)
			tt.in.GPUs = 1
			a.Spec.Spec.Resources = tt.in
			if err := d.Apply(ctx, a); err != nil {
				t.Fatal(err)
			}
			tg := jobOf(t, d, "vision", "train").TaskGroups[0]
			r := tg.Tasks[0].Resources
			got := res{CPU: r.CPU, Cores: r.Cores, MemoryMB: *r.MemoryMB, DiskMB: *tg.EphemeralDisk.SizeMB}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("resources (-want +got)\n%s", diff)
			}
		})
	}
}

// TestHostVolumeBySource: a mount asks Nomad for the Volume's source (the
// host volume's name on the client), and the fake, like Nomad, places it
// only on a node that has that host volume; berth observes node features
// the decision checks.
func TestHostVolumeBySource(t *testing.T) {
	nodes := drivertest.Nodes()
	nodes[0].HostVolumes = []string{"nfs-datasets"}
	_, d := fakeCluster(t, nodes)
	snap, err := d.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := snap.Nodes[0]; !n.Features || !slices.Contains(n.HostVolumes, "nfs-datasets") || !slices.Contains(n.Drivers, "docker") {
		t.Fatalf("node %s features: %v drivers %v volumes %v", n.Name, n.Features, n.Drivers, n.HostVolumes)
	}
	a := startAction("train", nodes[0].Name, nodes[0].GPUs[0].ID)
	a.Spec.Spec.Volumes[0].Source = "nfs-datasets"
	if err := d.Apply(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got := jobOf(t, d, "vision", "train").TaskGroups[0].Volumes["datasets"].Source; got != "nfs-datasets" {
		t.Errorf("volume source %q, want nfs-datasets", got)
	}
	// A host volume no node has: Nomad cannot place it.
	b := startAction("lost", nodes[0].Name, nodes[0].GPUs[1].ID)
	b.Spec.Spec.Volumes[0].Source = "nowhere"
	if err := d.Apply(ctx, b); err == nil {
		t.Errorf("a start needing a host volume no node has was placed")
	}
}

// TestNamespaceCreationRefused: a token that may not create the project's
// namespace (the documented reconciler policy in Nomad CE) gets an error
// that tells the operator what to do.
func TestNamespaceCreationRefused(t *testing.T) {
	h, d, nodes := newHooked(t)
	h.Fail("PUT", "/v1/namespace", 403, "Permission denied")
	h.Fail("POST", "/v1/namespace", 403, "Permission denied")
	err := d.Apply(ctx, startAction("train", "gpu-a", nodes[0].GPUs[0].ID))
	if err == nil || !strings.Contains(err.Error(), "nomad namespace apply vision") || !strings.Contains(err.Error(), "management token") {
		t.Errorf("Apply = %v, want an error saying to create the namespace or grant the right", err)
	}
}

// requestsSince returns the method and path (no query) of the requests
// the fake got from index from on.
func requestsSince(h *hookFake, from int) []string {
	var out []string
	for _, r := range h.Requests()[from:] {
		out = append(out, strings.SplitN(r, "?", 2)[0])
	}
	return out
}

// smallStart is a 0-GPU start that leaves room for many on one node.
func smallStart(name string) drivers.Action {
	a := startAction(name, "gpu-a")
	a.Spec.Spec.Resources.CPUMHz, a.Spec.Spec.Resources.MemoryBytes = 100, 64<<20
	return a
}

// TestStartRequests: the requests one start of a new 0-GPU workspace
// costs (issue 12, item 7): register (EnforceIndex 0: the observation
// listed no such job) and wait for the evaluation, which says it left
// nothing queued: the allocations of a job that can hold no GPU are not
// listed, nor read in full. The namespace is read once per cycle
// (Observe to Observe).
func TestStartRequests(t *testing.T) {
	h, d, _ := newHooked(t)
	var mu sync.Mutex
	encodings := map[string][]string{} // path prefix -> Accept-Encoding values
	h.mu.Lock()
	h.before = func(r *http.Request, _ []byte) {
		for _, p := range []string{"/v1/evaluation/", "/v1/job/", "/v1/jobs"} {
			if strings.HasPrefix(r.URL.Path, p) {
				mu.Lock()
				encodings[p] = r.Header.Values("Accept-Encoding")
				mu.Unlock()
			}
		}
	}
	h.mu.Unlock()
	from := len(h.Requests())
	if err := d.Apply(ctx, smallStart("a")); err != nil {
		t.Fatal(err)
	}
	first := requestsSince(h, from)
	if !slices.Contains(first, "GET /v1/namespace/vision") || !slices.Contains(first, "PUT /v1/namespace") {
		t.Errorf("the first start must read and create the namespace: %q", first)
	}
	from = len(h.Requests())
	if err := d.Apply(ctx, smallStart("b")); err != nil {
		t.Fatal(err)
	}
	got := requestsSince(h, from)
	want := []string{"PUT /v1/jobs", "GET /v1/evaluation/"}
	if len(got) != len(want) {
		t.Fatalf("second start: %d requests %q, want %d like %q", len(got), got, len(want), want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("request %d: %s, want %s…", i, got[i], want[i])
		}
	}
	if a := h.AllocsOf("vision", "b"); len(a) != 1 || a[0].DesiredStatus != "run" {
		t.Fatalf("workspace b not placed: %+v", a)
	}
	// Small answers without gzip: Nomad's gzip handler reads the first value.
	mu.Lock()
	for p, v := range encodings {
		if len(v) == 0 || v[0] != "identity" {
			t.Errorf("%s… asked with Accept-Encoding %q, want identity first", p, v)
		}
	}
	if len(encodings) != 2 {
		t.Errorf("requests seen: %v", encodings)
	}
	mu.Unlock()

	// A new cycle checks the namespace again, once.
	if _, err := d.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	from = len(h.Requests())
	for _, ws := range []string{"c", "d"} {
		if err := d.Apply(ctx, smallStart(ws)); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for _, r := range requestsSince(h, from) {
		if strings.HasPrefix(r, "GET /v1/namespace/") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("namespace read %d times in a cycle of two starts, want 1", n)
	}
}

// TestStartRecreatesDeletedNamespace: a namespace deleted after the
// driver ensured it (by a person, or another berth's prune) is created
// again by the next start, in the same cycle.
func TestStartRecreatesDeletedNamespace(t *testing.T) {
	h, d, _ := newHooked(t)
	if err := d.Apply(ctx, smallStart("a")); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a"} {
		if _, _, err := d.Client().Jobs().Deregister(id, true, &api.WriteOptions{Namespace: "vision"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Client().Namespaces().Delete("vision", nil); err != nil {
		t.Fatal(err)
	}
	if err := d.Apply(ctx, smallStart("b")); err != nil {
		t.Fatalf("start after the namespace was deleted: %v", err)
	}
	ns, _, err := d.Client().Namespaces().Info("vision", nil)
	if err != nil || ns.Meta[nomad.MetaCreatedBy] != "berth" || ns.Description != "Vision team" {
		t.Fatalf("namespace not created again as berth's: %+v, %v", ns, err)
	}
	if a := h.AllocsOf("vision", "b"); len(a) != 1 {
		t.Fatalf("workspace b not placed: %+v", a)
	}
}

// TestStartOfAJobNotObserved: a job that appeared after the observation
// (berth took it for absent and registered with EnforceIndex 0) is read
// after Nomad refuses: someone else's is refused, berth's own is used.
func TestStartOfAJobNotObserved(t *testing.T) {
	h, d, _ := newHooked(t)
	h.RegisterForeignJob("vision", "x", "00000001-aaaa-4bbb-8ccc-000000000001", nil)
	err := d.Apply(ctx, smallStart("x"))
	if drivers.ClassOf(err) != drivers.ClassInvalid || !strings.Contains(err.Error(), "without berth's marker") {
		t.Fatalf("Apply over a foreign job = %v, want invalid naming the marker", err)
	}
	if j := jobOf(t, d, "vision", "x"); j.Meta[nomad.MetaWorkspace] != "" {
		t.Fatalf("the foreign job was overwritten: %v", j.Meta)
	}

	// berth's own job, registered by another berth since the observation.
	other := realnomad.NewDriver(t, nomad.Config{Address: d.Client().Address(), PlacementTimeout: time.Second})
	if err := other.Apply(ctx, smallStart("y")); err != nil {
		t.Fatal(err)
	}
	before := jobOf(t, d, "vision", "y")
	from := len(h.Requests())
	if err := d.Apply(ctx, smallStart("y")); err != nil {
		t.Fatalf("Apply of berth's job registered since the observation: %v", err)
	}
	got := requestsSince(h, from)
	if len(got) < 2 || got[0] != "PUT /v1/jobs" || got[1] != "GET /v1/job/y" {
		t.Errorf("requests %q, want a refused register, then a read", got)
	}
	if after := jobOf(t, d, "vision", "y"); *after.JobModifyIndex != *before.JobModifyIndex {
		t.Errorf("an unchanged job was registered again (JobModifyIndex %d -> %d)", *before.JobModifyIndex, *after.JobModifyIndex)
	}
}
