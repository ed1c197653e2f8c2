package e2e

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/berth-dev/berth/schema"
	"github.com/hashicorp/nomad/api"
)

// useInterval is the sampling interval of the GPU utilization rows.
const useInterval = 3 * time.Second

// gpuStart starts workspace name of project berth-real on node's gpus.
func gpuStart(name, node string, gpus ...string) drivers.Action {
	a := realSmallStart(name, node)
	a.Spec.Spec.Resources.GPUs = len(gpus)
	a.Placements[0].GPUs = gpus
	return a
}

// useDriver is a driver over the agent at NOMAD_ADDR (token: the
// environment's, or token when not empty) sampling every useInterval.
func useDriver(t *testing.T, token string) *nomad.Driver {
	t.Helper()
	cfg := nomad.ConfigFromEnv("")
	if token != "" {
		cfg.Token = token
	}
	cfg.Use = nomad.UseConfig{Interval: useInterval}
	return realnomad.NewDriver(t, cfg)
}

// freeOn returns n GPUs of node's group model that no allocation holds.
func freeOn(t *testing.T, snap drivers.Snapshot, node, model string, n int) []string {
	t.Helper()
	held := map[string]bool{}
	for _, a := range snap.Allocs {
		for _, g := range a.GPUs {
			held[g] = true
		}
	}
	var out []string
	for _, nd := range snap.Nodes {
		for _, g := range nd.GPUs {
			if nd.Name == node && g.Model == model && g.Healthy && !held[g.ID] && len(out) < n {
				out = append(out, g.ID)
			}
		}
	}
	if len(out) < n {
		t.Fatalf("%s has %d free %s GPUs, want %d", node, len(out), model, n)
	}
	slices.Sort(out)
	return out
}

// setUse writes percent into the kit's file of a GPU of node, as
// `echo 85 > DIR/gpus-K/GPU-…` does; the file is emptied (0) when t
// ends.
func setUse(t *testing.T, kit realnomad.Kit, node, gpu string, percent int) {
	t.Helper()
	f := kit.GPUFile(t, node, gpu)
	if err := os.WriteFile(f, fmt.Appendf(nil, "%d\n", percent), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.WriteFile(f, nil, 0o644) })
}

// waitUse observes d until ref's replica 0 has a reading ok accepts;
// it returns the allocation and how long it took.
func waitUse(t *testing.T, d *nomad.Driver, ref schema.Ref, within time.Duration, ok func(*drivers.GPUUse) bool) (drivers.Alloc, time.Duration) {
	t.Helper()
	start := time.Now()
	var last drivers.Alloc
	for time.Since(start) < within {
		snap, err := d.Observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range snap.Allocs {
			if a.Workspace == ref && a.Replica == 0 {
				last = a
				if a.Phase == drivers.AllocRunning && ok(a.Use) {
					return a, time.Since(start)
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: no such reading within %s; last allocation %s on %s %v, Use %+v", ref, within, last.Phase, last.Node, last.GPUs, last.Use)
	return drivers.Alloc{}, 0
}

func percentIs(want ...float64) func(*drivers.GPUUse) bool {
	return func(u *drivers.GPUUse) bool { return u != nil && slices.Equal(u.Percent, want) }
}

// TestRealGPUUse (issue 38, rows a and b): a running workspace's
// allocation carries its GPUs' utilization, in the order of its GPUs,
// read from its node's stats (node-2: the server forwards to the
// client); `echo 85` into one GPU's file shows within one sampling
// interval (and the device plugin's and the client's own second each),
// and `echo 0` back; one request per node per interval.
func TestRealGPUUse(t *testing.T) {
	kit := realnomad.KitDir(t)
	realnomad.Client(t)
	d := useDriver(t, "")
	snap, err := d.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gpus := freeOn(t, snap, "node-2", "H100-fake", 2)
	for _, g := range gpus {
		setUse(t, kit, "node-2", g, 0)
	}
	a := gpuStart("busy", "node-2", gpus...)
	if err := d.Apply(ctx, a); err != nil {
		t.Fatal(err)
	}
	d.StartSampling(ctx)
	al, took := waitUse(t, d, a.Workspace, 60*time.Second, percentIs(0, 0))
	t.Logf("first reading %+v after %s (start included)", *al.Use, took.Round(time.Millisecond))
	if !slices.Equal(al.GPUs, gpus) {
		t.Fatalf("busy holds %v, want %v", al.GPUs, gpus)
	}
	if age := time.Since(al.Use.At); age < 0 || age > useInterval+5*time.Second {
		t.Errorf("Use.At %s is %s old: want when the node measured it", al.Use.At, age)
	}
	// A change shows within one interval, plus the device plugin's and
	// the client's own periods (1 s each).
	bound := useInterval + 2*time.Second + 500*time.Millisecond
	before := d.UseStats()
	setUse(t, kit, "node-2", gpus[1], 85)
	al, busy := waitUse(t, d, a.Workspace, 3*bound, percentIs(0, 85))
	if busy > bound {
		t.Errorf("echo 85 showed after %s, want within %s", busy, bound)
	}
	if al.Use.Max() != 85 {
		t.Errorf("Max %v, want 85", al.Use.Max())
	}
	setUse(t, kit, "node-2", gpus[1], 0)
	_, idle := waitUse(t, d, a.Workspace, 3*bound, percentIs(0, 0))
	if idle > bound {
		t.Errorf("echo 0 showed after %s, want within %s", idle, bound)
	}
	after := d.UseStats()
	elapsed := busy + idle
	if after.Nodes != 1 || after.Failures != before.Failures {
		t.Errorf("UseStats %+v (before %+v): want 1 node read, no failure", after, before)
	}
	if n, most := after.Requests-before.Requests, int(elapsed/useInterval)+2; n > most {
		t.Errorf("%d stats requests in %s, want at most %d: one per node per interval", n, elapsed.Round(time.Millisecond), most)
	}
	realnomad.Report(t, "GPU utilization (interval %s): echo 85 read after %.1fs, echo 0 after %.1fs; %d requests for 1 node",
		useInterval, busy.Seconds(), idle.Seconds(), after.Requests)
}

// TestRealGPUUseMIG (issue 38, row c): on a node whose stats the sampler
// reads (a whole GPU of berth's runs there), an allocation of MIG
// instances carries no reading: the NVIDIA plugin reports none for them.
func TestRealGPUUseMIG(t *testing.T) {
	kit := realnomad.KitDir(t)
	c := realnomad.Client(t)
	group := addGroup(t, kit, c, "node-1", migGroup, 9728, 7)
	d := useDriver(t, "")
	snap, err := d.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	whole := gpuStart("whole", "node-1", freeOn(t, snap, "node-1", "H100-fake", 1)...)
	mig := gpuStart("slice", "node-1", freeOn(t, snap, "node-1", group, 2)...)
	mig.Spec.Spec.Resources.GPUModel = group
	for _, a := range []drivers.Action{whole, mig} {
		if err := d.Apply(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	d.StartSampling(ctx)
	waitUse(t, d, whole.Workspace, 60*time.Second, func(u *drivers.GPUUse) bool { return u != nil })
	// Another interval: the MIG allocation has had every chance.
	time.Sleep(useInterval + time.Second)
	sl, _ := waitUse(t, d, mig.Workspace, 30*time.Second, func(*drivers.GPUUse) bool { return true })
	if sl.Use != nil || !strings.HasPrefix(sl.GPUs[0], "MIG-") {
		t.Errorf("the MIG allocation (%v) has Use %+v, want nil", sl.GPUs, sl.Use)
	}
	if st := d.UseStats(); st.Nodes != 1 || st.Failures != 0 {
		t.Errorf("UseStats %+v: want node-1 read, no failure", st)
	}
}

// TestRealGPUUseACL (issue 38, row d): with ACLs on (the kit's up -A),
// a token of the shipped reconciler policy
// (examples/deploy/berth-reconciler.policy.hcl: node read) reads the
// utilization; the stats need node:read, which a policy of namespace
// capabilities alone lacks (403).
func TestRealGPUUseACL(t *testing.T) {
	kit := realnomad.KitDir(t)
	c := realnomad.Client(t)
	if _, _, err := c.ACLPolicies().List(nil); err != nil {
		if strings.Contains(err.Error(), "ACL support disabled") {
			t.Skip("ACLs are off on this agent: E2E_ACL=1 starts the kit with them (up -A)")
		}
		t.Fatal(err)
	}
	rules, err := os.ReadFile("../../examples/deploy/berth-reconciler.policy.hcl")
	if err != nil {
		t.Fatal(err)
	}
	token := func(name, rules string) string {
		t.Helper()
		if _, err := c.ACLPolicies().Upsert(&api.ACLPolicy{Name: name, Rules: rules}, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = c.ACLPolicies().Delete(name, nil) })
		tok, _, err := c.ACLTokens().Create(&api.ACLToken{Name: name, Type: "client", Policies: []string{name}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = c.ACLTokens().Delete(tok.AccessorID, nil) })
		return tok.SecretID
	}
	// Namespaces need a management token in Nomad CE: made beforehand,
	// as the policy's comment says (berth uses them as they are).
	if _, err := c.Namespaces().Register(&api.Namespace{Name: "berth-real"}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := realnomad.Clean(ctx, c); err != nil {
			t.Error(err)
		}
		if _, err := c.Namespaces().Delete("berth-real", nil); err != nil {
			t.Errorf("delete the namespace berth-real: %v", err)
		}
	})
	d := useDriver(t, token("berth-reconciler-gpuuse", string(rules)))
	snap, err := d.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gpus := freeOn(t, snap, "node-2", "H100-fake", 1)
	setUse(t, kit, "node-2", gpus[0], 42)
	a := gpuStart("acl", "node-2", gpus...)
	if err := d.Apply(ctx, a); err != nil {
		t.Fatal(err)
	}
	d.StartSampling(ctx)
	waitUse(t, d, a.Workspace, 60*time.Second, percentIs(42))
	if st := d.UseStats(); st.Failures != 0 {
		t.Errorf("UseStats %+v: the reconciler's token was refused", st)
	}

	// Without node:read: 403.
	cfg := api.DefaultConfig()
	cfg.SecretID = token("berth-no-node-read", `namespace "*" { policy = "read" }`)
	nc, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ids := realnomad.NodeIDs(t, c)
	if _, err := nc.Nodes().Stats(ids["node-2"], nil); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("node stats with namespace read only: %v, want 403", err)
	}
}
