package nomad_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/drivers/nomad/nomadfake"
	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hashicorp/nomad/api"
)

// requestsOf counts the requests in reqs other than the event stream.
func requestsOf(reqs []string) []string {
	var out []string
	for _, r := range reqs {
		if !strings.HasPrefix(r, "GET /v1/event/stream") {
			out = append(out, r)
		}
	}
	return out
}

// TestIdleObserveRequestsDoNotGrowWithNodes: once the driver follows
// the event stream, an Observe with nothing changed makes no request,
// with 10 nodes as with 1,000 (a full read makes 3 + one per node, and
// reads the berth job versions it lacks one by one or through the nodes'
// allocation lists, whichever takes fewer requests).
func TestIdleObserveRequestsDoNotGrowWithNodes(t *testing.T) {
	idle := map[int]int{}
	full := map[int]int{}
	for _, n := range []int{10, 1000} {
		fake := nomadfake.New()
		for i := range n {
			fake.AddNode(nomadfake.Node{ID: fmt.Sprintf("%08x-aaaa-4bbb-8ccc-%012x", i+1, i+1), Name: fmt.Sprintf("node-%04d", i), HostVolumes: []string{"datasets"},
				GPUs: []nomadfake.GPU{{ID: fmt.Sprintf("GPU-%d", i), PCIBusID: "00000000:18:00.0", Healthy: true}}})
		}
		srv := httptest.NewServer(fake)
		t.Cleanup(srv.Close)
		d := realnomad.NewDriver(t, nomad.Config{Address: srv.URL, PlacementTimeout: time.Second})
		if _, err := d.Observe(ctx); err != nil {
			t.Fatal(err)
		}
		full[n] = len(requestsOf(fake.Requests()))
		for i := range 3 {
			if err := d.Apply(ctx, startAction(fmt.Sprintf("train-%d", i), fmt.Sprintf("node-%04d", i), fmt.Sprintf("GPU-%d", i))); err != nil {
				t.Fatal(err)
			}
		}
		fake.Settle()
		realnomad.Follow(t, d)
		snap, err := d.Observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Nodes) != n || len(snap.Allocs) != 3 {
			t.Fatalf("%d nodes: the followed snapshot has %d nodes and %d allocations, want %d and 3", n, len(snap.Nodes), len(snap.Allocs), n)
		}
		before := len(requestsOf(fake.Requests()))
		for range 5 {
			if _, err := d.Observe(ctx); err != nil {
				t.Fatal(err)
			}
		}
		idle[n] = len(requestsOf(fake.Requests())) - before
		t.Logf("%d nodes: full read %d requests; 5 idle Observes %d requests", n, full[n], idle[n])
	}
	if idle[10] != idle[1000] || idle[1000] != 0 {
		t.Errorf("idle Observes made %d requests with 10 nodes and %d with 1,000; want 0 and 0", idle[10], idle[1000])
	}
	if full[1000] <= full[10] {
		t.Errorf("a full read made %d requests at 1,000 nodes, %d at 10: the count above did not measure a full read", full[1000], full[10])
	}
}

// TestFollowedObserveHashesOnlyNewJobs: the drift check hashes a job
// version once, not once per Observe: an idle followed Observe hashes
// none, and a job edited outside berth is hashed (its new version) and
// reported as drift.
func TestFollowedObserveHashesOnlyNewJobs(t *testing.T) {
	fake := nomadfake.New()
	for i := range 3 {
		fake.AddNode(nomadfake.Node{ID: fmt.Sprintf("%08x-aaaa-4bbb-8ccc-%012x", i+1, i+1), Name: fmt.Sprintf("node-%d", i), HostVolumes: []string{"datasets"},
			GPUs: []nomadfake.GPU{{ID: fmt.Sprintf("GPU-%d", i), PCIBusID: "00000000:18:00.0", Healthy: true}}})
	}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	d := realnomad.NewDriver(t, nomad.Config{Address: srv.URL, PlacementTimeout: time.Second})
	for i := range 3 {
		if err := d.Apply(ctx, startAction(fmt.Sprintf("train-%d", i), fmt.Sprintf("node-%d", i), fmt.Sprintf("GPU-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	fake.Settle()
	realnomad.Follow(t, d)
	if _, err := d.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		snap, err := d.Observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n := d.FollowStats().JobsHashed; n != 0 || len(snap.Allocs) != 3 {
			t.Fatalf("an idle Observe of 3 allocations hashed %d jobs, want 0", n)
		}
	}
	cfg := api.DefaultConfig()
	cfg.Address = srv.URL
	c, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	q := &api.QueryOptions{Namespace: "vision"}
	j, _, err := c.Jobs().Info("train-1", q)
	if err != nil {
		t.Fatal(err)
	}
	j.TaskGroups[0].Tasks[0].Env["EPOCHS"] = "4"
	if _, _, err := c.Jobs().Register(j, &api.WriteOptions{Namespace: "vision"}); err != nil {
		t.Fatal(err)
	}
	fake.Settle()
	deadline := time.Now().Add(10 * time.Second)
	for {
		snap, err := d.Observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		hashed := d.FollowStats().JobsHashed
		drift := ""
		for _, a := range snap.Allocs {
			if a.Workspace.Name == "train-1" && a.Phase != drivers.AllocStopping {
				drift = a.Drift
			}
		}
		if drift != "" {
			if hashed != 1 {
				t.Errorf("the Observe that saw the edited job hashed %d jobs, want 1 (its new version)", hashed)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job edited outside berth is not reported as drift (last Observe hashed %d jobs)", hashed)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFollowedSnapshotEqualsFullRead: after a storm of changes (starts,
// stops, an update, a purge, an eviction, an exit, a drained and a lost
// node, new node metadata), the snapshot the followed cache gives equals
// the one a fresh driver reads whole.
func TestFollowedSnapshotEqualsFullRead(t *testing.T) {
	h, d, nodes := newHooked(t)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	realnomad.Follow(t, d)
	other := realnomad.NewDriver(t, nomad.Config{Address: srv.URL, PlacementTimeout: time.Second})
	if _, err := other.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	for i, n := range nodes[:2] {
		if err := other.Apply(ctx, startAction(fmt.Sprintf("a-%d", i), n.Name, n.GPUs[0].ID)); err != nil {
			t.Fatal(err)
		}
		if err := other.Apply(ctx, startAction(fmt.Sprintf("b-%d", i), n.Name, n.GPUs[1].ID)); err != nil {
			t.Fatal(err)
		}
	}
	h.Settle()
	compare := func(step string) {
		t.Helper()
		before := d.FollowStats()
		got, err := d.Observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if after := d.FollowStats(); after.CachedReads != before.CachedReads+1 {
			t.Fatalf("%s: the Observe was not answered from the cache (%+v, then %+v)", step, before, after)
		}
		fresh := realnomad.NewDriver(t, nomad.Config{Address: srv.URL})
		want, err := fresh.Observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(drivers.Snapshot{}, "ObservedAt"), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: the followed snapshot differs from a full read (-full +followed):\n%s", step, diff)
		}
	}
	// The fake's events reach the stream; a new namespace (the first
	// start's) opens another stream, which the cache follows once read.
	waitStream := func() {
		time.Sleep(300 * time.Millisecond)
		realnomad.AwaitCache(t, d)
	}
	waitStream()
	compare("started")

	if err := other.Apply(ctx, drivers.Action{Kind: drivers.ActionStop, Workspace: startAction("a-0", "", "").Workspace}); err != nil {
		t.Fatal(err)
	}
	up := startAction("b-1", nodes[1].Name, nodes[1].GPUs[1].ID)
	up.Kind = drivers.ActionUpdate
	up.Spec.Spec.Task.Env = map[string]string{"EPOCHS": "4"}
	if err := other.Apply(ctx, up); err != nil {
		t.Fatal(err)
	}
	allocs := h.AllocsOf("vision", "b-0")
	h.Evict(allocs[0].ID, "dbe3c873-416e-52f2-c498-a3a5aaa70b04")
	h.Exit("vision", "a-1", 3)
	h.SetNodeStatus(fakeNodeID(0), "ready", false) // drained: ineligible
	h.SetNodeStatus(fakeNodeID(1), "down", true)   // lost
	h.Settle()
	waitStream()
	compare("after the storm")

	if err := other.Apply(ctx, drivers.Action{Kind: drivers.ActionPurge, Workspace: startAction("a-0", "", "").Workspace}); err != nil {
		t.Fatal(err)
	}
	h.Settle()
	waitStream()
	compare("after a purge")
}

func fakeNodeID(n int) string { return fmt.Sprintf("%08x-aaaa-4bbb-8ccc-%012x", n+1, n+1) }

// TestDroppedStreamReadsWhole: when the stream drops, a change made
// meanwhile is not lost: the next Observe reads the cluster whole, and the
// cache follows again once a new stream is open.
func TestDroppedStreamReadsWhole(t *testing.T) {
	h, _, nodes := newHooked(t)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	d := realnomad.NewDriver(t, nomad.Config{Address: srv.URL})
	realnomad.Follow(t, d)
	srv.CloseClientConnections() // the stream drops
	h.SetNodeStatus(fakeNodeID(0), "ready", false)
	deadline := time.Now().Add(5 * time.Second)
	before := d.FollowStats()
	for {
		snap, err := d.Observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if snap.Nodes[0].Name == nodes[0].Name && !snap.Nodes[0].Eligible {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node made ineligible while the stream was down never showed (%+v)", d.FollowStats())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if after := d.FollowStats(); after.FullReads == before.FullReads {
		t.Errorf("the change was seen without a full read after the stream dropped (%+v, then %+v)", before, after)
	}
	realnomad.AwaitCache(t, d) // and it follows again, from the same Watch
}

// TestForgottenVersionIsNotReadEachCycle: an allocation whose job version
// Nomad no longer keeps is read without its job, and an idle Observe does
// not ask for it again.
func TestForgottenVersionIsNotReadEachCycle(t *testing.T) {
	h, other, nodes := newHooked(t)
	if err := other.Apply(ctx, startAction("old", nodes[0].Name, nodes[0].GPUs[0].ID)); err != nil {
		t.Fatal(err)
	}
	h.Settle()
	up := startAction("old", nodes[0].Name, nodes[0].GPUs[0].ID)
	up.Kind = drivers.ActionUpdate
	up.Spec.Spec.Task.Env = map[string]string{"EPOCHS": "4"} // a new version, a new allocation
	if err := other.Apply(ctx, up); err != nil {
		t.Fatal(err)
	}
	h.Settle()
	h.ForgetVersions("vision", "old")
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	d := realnomad.NewDriver(t, nomad.Config{Address: srv.URL})
	realnomad.Follow(t, d)
	before := len(requestsOf(h.Requests()))
	for range 3 {
		if _, err := d.Observe(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(requestsOf(h.Requests())) - before; n != 0 {
		t.Errorf("3 idle Observes made %d requests: %v", n, requestsOf(h.Requests())[before:])
	}
	if len(h.AllocsOf("vision", "old")) < 2 {
		t.Fatalf("the update left %d allocations, want the old one beside the new", len(h.AllocsOf("vision", "old")))
	}
}

// TestNewNamespaceIsFollowed: a stream of all namespaces carries only
// those that existed when it opened (Nomad 2.0.5, which the fake
// follows). A workspace of a project whose namespace is created after the
// stream opened, by this berth or by another, is still seen running from
// the followed cache.
func TestNewNamespaceIsFollowed(t *testing.T) {
	h, _, nodes := newHooked(t)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	d := realnomad.NewDriver(t, nomad.Config{Address: srv.URL, PlacementTimeout: time.Second})
	realnomad.Follow(t, d)
	other := realnomad.NewDriver(t, nomad.Config{Address: srv.URL, PlacementTimeout: time.Second})
	inProject := func(a drivers.Action, name string) drivers.Action {
		p := *a.Project
		p.Meta.Name = name
		ws := *a.Spec
		ws.Meta.Project = name
		a.Project, a.Spec, a.Workspace = &p, &ws, ws.Ref()
		return a
	}
	for i, c := range []struct {
		who     string
		by      *nomad.Driver
		project string
	}{{"this berth", d, "nlp"}, {"another berth", other, "speech"}} {
		if _, err := c.by.Observe(ctx); err != nil {
			t.Fatal(err)
		}
		a := inProject(startAction("a", nodes[0].Name, nodes[0].GPUs[i].ID), c.project)
		if err := c.by.Apply(ctx, a); err != nil {
			t.Fatal(err)
		}
		h.Settle()
		deadline := time.Now().Add(5 * time.Second)
		for {
			before := d.FollowStats().CachedReads
			snap, err := d.Observe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			cached := d.FollowStats().CachedReads > before
			running := false
			for _, al := range snap.Allocs {
				running = running || al.Workspace == a.Workspace && al.Phase == drivers.AllocRunning
			}
			if cached && running {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("started by %s in a new namespace, %s is not seen running from the followed cache within 5s (running %v, cached %v, %+v)", c.who, a.Workspace, running, cached, d.FollowStats())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestFirstReadReadsVersionsByNode: a driver's first read of a cluster
// where berth runs many jobs on few nodes reads the job versions through
// the nodes' allocation lists (one request per node that holds berth's
// allocations), not one request per job; what it reads is what a driver
// that read each job gives.
func TestFirstReadReadsVersionsByNode(t *testing.T) {
	h, other, nodes := newHooked(t)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	const n = 12
	for i := range n {
		a := startAction(fmt.Sprintf("w-%02d", i), nodes[i%2].Name)
		a.Spec.Spec.Resources.CPUMHz, a.Spec.Spec.Resources.MemoryBytes = 100, 64<<20
		if err := other.Apply(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	h.Settle()
	want, err := other.Observe(ctx) // the versions it registered, cached
	if err != nil {
		t.Fatal(err)
	}
	before := len(h.Requests())
	d := realnomad.NewDriver(t, nomad.Config{Address: srv.URL})
	got, err := d.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	jobReads, nodeReads := 0, 0
	for _, r := range h.Requests()[before:] {
		switch {
		case strings.HasPrefix(r, "GET /v1/job/"):
			jobReads++
		case strings.HasPrefix(r, "GET /v1/node/") && strings.Contains(r, "/allocations"):
			nodeReads++
		}
	}
	if jobReads != 0 || nodeReads != 2 {
		t.Errorf("a first read of %d jobs on 2 nodes read %d jobs and the allocations of %d nodes, want 0 and 2", n, jobReads, nodeReads)
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(drivers.Snapshot{}, "ObservedAt"), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("read by node, the snapshot differs (-job by job +by node):\n%s", diff)
	}
	for _, a := range got.Allocs {
		if a.SpecHash == "" || a.Revision == "" {
			t.Fatalf("%s: its job version was not read (spec hash %q, revision %q)", a.Workspace, a.SpecHash, a.Revision)
		}
	}
}
