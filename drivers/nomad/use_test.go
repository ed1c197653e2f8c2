package nomad_test

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/drivertest"
	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/drivers/nomad/nomadfake"
)

// syncBuffer is a log the sampler's goroutine and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// useCluster is the conformance nodes on a fake Nomad, with a driver
// whose sampler logs to the returned buffer, and a running 2-GPU
// workspace on gpu-a's first two GPUs.
func useCluster(t *testing.T, use nomad.UseConfig) (*nomadfake.Server, *nomad.Driver, *syncBuffer, drivers.Snapshot) {
	t.Helper()
	log := &syncBuffer{}
	fake, d := fakeClusterWith(t, drivertest.Nodes(), func(c *nomad.Config) {
		c.Use, c.Logger = use, slog.New(slog.NewTextHandler(log, nil))
	})
	snap, err := d.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a := startAction("train", "gpu-a", snap.Nodes[0].GPUs[0].ID, snap.Nodes[0].GPUs[1].ID)
	a.Spec.Spec.Volumes = nil
	if err := d.Apply(ctx, a); err != nil {
		t.Fatal(err)
	}
	fake.Settle()
	snap = observe(t, d)
	return fake, d, log, snap
}

func observe(t *testing.T, d *nomad.Driver) drivers.Snapshot {
	t.Helper()
	snap, err := d.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func allocOf(t *testing.T, snap drivers.Snapshot, name string) drivers.Alloc {
	t.Helper()
	for _, a := range snap.Allocs {
		if a.Workspace.Name == name {
			return a
		}
	}
	t.Fatalf("no allocation of %s in %v", name, snap.Allocs)
	return drivers.Alloc{}
}

func statsRequests(fake *nomadfake.Server) []string {
	var out []string
	for _, r := range fake.Requests() {
		if strings.Contains(r, "/v1/client/") && strings.Contains(r, "stats") {
			out = append(out, r)
		}
	}
	return out
}

// TestUseFromNodeStats: a running allocation's Use is its GPUs' last
// reading from its node's stats, in the order of its GPUs; one request
// per node that holds berth's running GPUs, none per allocation and
// none for a node without them; nil before the first reading.
func TestUseFromNodeStats(t *testing.T) {
	fake, d, _, snap := useCluster(t, nomad.UseConfig{})
	a := allocOf(t, snap, "train")
	if a.Phase != drivers.AllocRunning || a.Use != nil {
		t.Fatalf("before any reading: %s, Use %+v; want running, nil", a.Phase, a.Use)
	}
	node := snap.Nodes[0]
	fake.SetGPUUse(node.ID, a.GPUs[1], 85)
	fake.SetGPUUse(node.ID, snap.Nodes[1].GPUs[0].ID, 40) // another node's: never read
	d.SampleNow(ctx)
	a = allocOf(t, observe(t, d), "train")
	if a.Use == nil || !slices.Equal(a.Use.Percent, []float64{0, 85}) || a.Use.Max() != 85 {
		t.Fatalf("Use %+v, want [0 85] (its GPUs %v in order)", a.Use, a.GPUs)
	}
	if a.Use.At.IsZero() || a.Use.At.Before(a.StartedAt) {
		t.Errorf("Use.At %s: want when the node measured it, after the start %s", a.Use.At, a.StartedAt)
	}
	if got, want := statsRequests(fake), []string{"GET /v1/client/stats?node_id=" + node.ID}; !slices.Equal(got, want) {
		t.Errorf("stats requests %q, want %q: one per node holding berth's GPUs", got, want)
	}
	if st := d.UseStats(); st.Nodes != 1 || st.Requests != 1 || st.Failures != 0 {
		t.Errorf("UseStats %+v, want 1 node, 1 request", st)
	}
	// Observes without a new reading share the Use they gave.
	b := allocOf(t, observe(t, d), "train")
	if b.Use != a.Use {
		t.Errorf("an Observe without a new reading built another Use")
	}
	fake.SetGPUUse(node.ID, a.GPUs[1], 0)
	d.SampleNow(ctx)
	if u := allocOf(t, observe(t, d), "train").Use; u == nil || u.Max() != 0 {
		t.Errorf("after echo 0: Use %+v, want max 0", u)
	}
}

// TestUseOff: with sampling off nothing is read and Use stays nil.
func TestUseOff(t *testing.T) {
	fake, d, _, _ := useCluster(t, nomad.UseConfig{Off: true})
	d.StartSampling(ctx)
	d.SampleNow(ctx)
	if u := allocOf(t, observe(t, d), "train").Use; u != nil {
		t.Errorf("Use %+v with sampling off", u)
	}
	if r := statsRequests(fake); len(r) != 0 {
		t.Errorf("stats requests with sampling off: %q", r)
	}
}

// TestUseNodeFails: a node that does not answer leaves its allocations
// without a reading, is logged once however many samples fail, and
// once when it answers again.
func TestUseNodeFails(t *testing.T) {
	fake, d, log, _ := useCluster(t, nomad.UseConfig{})
	d.SampleNow(ctx)
	if u := allocOf(t, observe(t, d), "train").Use; u == nil {
		t.Fatal("no reading from a node that answers")
	}
	for range 3 {
		fake.Fail("GET", "/v1/client/stats", 500, "EOF")
		d.SampleNow(ctx)
		if u := allocOf(t, observe(t, d), "train").Use; u != nil {
			t.Fatalf("Use %+v from a node that did not answer, want nil", u)
		}
	}
	if n := strings.Count(log.String(), "cannot read the GPU utilization of node gpu-a"); n != 1 {
		t.Errorf("logged %d times over 3 failed samples, want once:\n%s", n, log)
	}
	if !strings.Contains(log.String(), "EOF") {
		t.Errorf("the log does not say why:\n%s", log)
	}
	d.SampleNow(ctx)
	if u := allocOf(t, observe(t, d), "train").Use; u == nil {
		t.Error("no reading once the node answers again")
	}
	if n := strings.Count(log.String(), "reads the GPU utilization of node gpu-a again"); n != 1 {
		t.Errorf("recovery logged %d times, want once:\n%s", n, log)
	}
	if st := d.UseStats(); st.Failures != 3 || st.Requests != 5 {
		t.Errorf("UseStats %+v, want 5 requests, 3 failed", st)
	}
}

// TestUseACLDenied: a token without node:read is a failure like any
// other, and the log says what the token lacks.
func TestUseACLDenied(t *testing.T) {
	fake, d, log, _ := useCluster(t, nomad.UseConfig{})
	fake.Fail("GET", "/v1/client/stats", 403, "Permission denied")
	d.SampleNow(ctx)
	if u := allocOf(t, observe(t, d), "train").Use; u != nil {
		t.Errorf("Use %+v after 403", u)
	}
	if !strings.Contains(log.String(), "Permission denied") || !strings.Contains(log.String(), "berth-reconciler.policy.hcl") {
		t.Errorf("the log does not say the token was refused:\n%s", log)
	}
}

// TestUseMIG: an allocation of MIG instances gets no Use, and its node
// is not read for it.
func TestUseMIG(t *testing.T) {
	fake := nomadfake.New()
	fake.AddNode(migNode(nil, false))
	d := newDriver(t, fake.Start(t).URL)
	snap := observe(t, d)
	var migs []string
	for _, g := range snap.Nodes[0].GPUs {
		if strings.HasPrefix(g.ID, "MIG-") && len(migs) < 2 {
			migs = append(migs, g.ID)
		}
	}
	a := startAction("mig", "mig-1", migs...)
	a.Spec.Spec.Volumes = nil
	if err := d.Apply(ctx, a); err != nil {
		t.Fatal(err)
	}
	fake.Settle()
	observe(t, d)
	d.SampleNow(ctx)
	if u := allocOf(t, observe(t, d), "mig").Use; u != nil {
		t.Errorf("a MIG allocation has Use %+v", u)
	}
	if r := statsRequests(fake); len(r) != 0 {
		t.Errorf("a node holding only MIG allocations was read: %q", r)
	}
}

// TestUseBeforeStart: a reading measured before the allocation started
// is its GPUs' previous holder's: it gets none.
func TestUseBeforeStart(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	fake := nomadfake.New(nomadfake.WithClock(clock))
	fake.AddNode(nomadfake.Node{ID: "11111111-0000-4000-8000-000000000001", Name: "gpu-a", GPUs: []nomadfake.GPU{{ID: "GPU-0", Healthy: true}}})
	d := newDriver(t, fake.Start(t).URL)
	observe(t, d)
	a := startAction("late", "gpu-a", "GPU-0")
	a.Spec.Spec.Volumes = nil
	if err := d.Apply(ctx, a); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	fake.Settle() // starts at 12:01
	observe(t, d)
	mu.Lock()
	now = now.Add(-30 * time.Second)
	mu.Unlock()
	d.SampleNow(ctx) // a reading of 12:00:30
	if u := allocOf(t, observe(t, d), "late").Use; u != nil {
		t.Errorf("Use %+v from a reading before the start", u)
	}
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	d.SampleNow(ctx) // 12:01:30
	if u := allocOf(t, observe(t, d), "late").Use; u == nil || !u.At.Equal(now) {
		t.Errorf("Use %+v, want the reading of %s", u, now)
	}
}

// TestUseSamplerSchedule: StartSampling reads each node once per
// Interval in its own goroutine, a change shows within one interval,
// and Close stops it.
func TestUseSamplerSchedule(t *testing.T) {
	const interval = 300 * time.Millisecond
	fake, d, _, snap := useCluster(t, nomad.UseConfig{Interval: interval, Rate: 100})
	// A second workspace on another node: two nodes to read.
	b := startAction("eval", "gpu-b", snap.Nodes[1].GPUs[0].ID)
	b.Spec.Spec.Volumes = nil
	if err := d.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	fake.Settle()
	observe(t, d)
	d.StartSampling(ctx)
	d.StartSampling(ctx) // once
	waitUse := func(want float64) time.Duration {
		t.Helper()
		start := time.Now()
		for time.Since(start) < 5*interval {
			if u := allocOf(t, observe(t, d), "train").Use; u != nil && u.Max() == want {
				return time.Since(start)
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("no reading of %v within %s", want, 5*interval)
		return 0
	}
	waitUse(0)
	fake.SetGPUUse(snap.Nodes[0].ID, snap.Nodes[0].GPUs[0].ID, 85)
	if took := waitUse(85); took > interval+100*time.Millisecond {
		t.Errorf("the change showed after %s, want within the interval %s", took, interval)
	}
	time.Sleep(3 * interval)
	d.Close()
	n := len(statsRequests(fake))
	time.Sleep(2 * interval)
	if m := len(statsRequests(fake)); m != n {
		t.Errorf("%d requests after Close", m-n)
	}
	// About 2 nodes × (1 + 3.5 s / interval): a request per node per
	// interval, not more.
	perNode := map[string]int{}
	for _, r := range statsRequests(fake) {
		perNode[r]++
	}
	for node, k := range perNode {
		if k < 4 || k > 9 {
			t.Errorf("%s read %d times in about %d intervals", node, k, 7)
		}
	}
	if len(perNode) != 2 {
		t.Errorf("read %d nodes, want 2: %v", len(perNode), perNode)
	}
}

func newDriver(t *testing.T, addr string) *nomad.Driver {
	t.Helper()
	d, err := nomad.New(nomad.Config{Address: addr, PlacementTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}
