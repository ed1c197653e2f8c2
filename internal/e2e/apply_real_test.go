package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/berth-dev/berth/schema"
	"github.com/hashicorp/nomad/api"
)

// TestRealStartShortcuts (issue 12, item 7): the requests a start saves
// keep their guarantees on a real Nomad. A namespace deleted after the
// driver ensured it is created again by the next start of the same
// cycle; a job the last observation did not list but that exists
// (registered since by another berth, or someone else's) is read after
// Nomad refuses the EnforceIndex-0 register, never overwritten.
func TestRealStartShortcuts(t *testing.T) {
	c := realnomad.Client(t)
	d := realnomad.NewDriver(t, nomad.ConfigFromEnv(""))
	other := realnomad.NewDriver(t, nomad.ConfigFromEnv(""))
	snap, err := d.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node := snap.Nodes[0].Name
	if _, err := other.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	w := &api.WriteOptions{Namespace: "berth-real"}
	q := &api.QueryOptions{Namespace: "berth-real"}

	// 1. The namespace, deleted behind the driver's back.
	if err := d.Apply(ctx, realSmallStart("a", node)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Jobs().Deregister("a", true, w); err != nil {
		t.Fatal(err)
	}
	if err := realnomad.WaitIdle(ctx, c, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Namespaces().Delete("berth-real", nil); err != nil {
		t.Fatalf("delete the namespace: %v", err)
	}
	if err := d.Apply(ctx, realSmallStart("b", node)); err != nil {
		t.Fatalf("start after the namespace was deleted: %v", err)
	}
	ns, _, err := c.Namespaces().Info("berth-real", nil)
	if err != nil || ns.Meta[nomad.MetaCreatedBy] != "berth" {
		t.Fatalf("the namespace is not berth's again: %+v, %v", ns, err)
	}
	liveAlloc := func(id string) *api.AllocationListStub {
		t.Helper()
		stubs, _, err := c.Jobs().Allocations(id, false, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range stubs {
			if s.DesiredStatus == "run" {
				return s
			}
		}
		t.Fatalf("job %s has no live allocation: %+v", id, stubs)
		return nil
	}
	liveAlloc("b")

	// 2. berth's job, registered by another driver since other observed.
	if err := d.Apply(ctx, realSmallStart("c", node)); err != nil {
		t.Fatal(err)
	}
	before, _, err := c.Jobs().Info("c", q)
	if err != nil {
		t.Fatal(err)
	}
	alloc := liveAlloc("c")
	if err := other.Apply(ctx, realSmallStart("c", node)); err != nil {
		t.Fatalf("start of berth's job registered since the observation: %v", err)
	}
	after, _, err := c.Jobs().Info("c", q)
	if err != nil {
		t.Fatal(err)
	}
	if *after.JobModifyIndex != *before.JobModifyIndex || *after.Version != *before.Version {
		t.Errorf("an unchanged job was registered again: JobModifyIndex %d -> %d, version %d -> %d",
			*before.JobModifyIndex, *after.JobModifyIndex, *before.Version, *after.Version)
	}
	if got := liveAlloc("c"); got.ID != alloc.ID {
		t.Errorf("the allocation was replaced: %s -> %s", alloc.ID, got.ID)
	}

	// 3. Someone else's job under the workspace's job ID.
	t.Cleanup(func() { _, _, _ = c.Jobs().Deregister("f", true, w) })
	foreign := &api.Job{
		ID: ptr("f"), Name: ptr("f"), Namespace: ptr("berth-real"), Type: ptr("batch"), Datacenters: []string{"*"},
		TaskGroups: []*api.TaskGroup{{
			Name:  ptr("web"),
			Tasks: []*api.Task{{Name: "main", Driver: "raw_exec", Config: map[string]any{"command": "/bin/sh", "args": []string{"-c", "sleep 3600"}}}},
		}},
	}
	if _, _, err := c.Jobs().Register(foreign, w); err != nil {
		t.Fatal(err)
	}
	err = other.Apply(ctx, realSmallStart("f", node))
	if drivers.ClassOf(err) != drivers.ClassInvalid || !strings.Contains(err.Error(), "without berth's marker") {
		t.Fatalf("start over someone else's job = %v, want invalid naming the marker", err)
	}
	if j, _, err := c.Jobs().Info("f", q); err != nil || j.Meta[nomad.MetaWorkspace] != "" || *j.Version != 0 {
		t.Fatalf("someone else's job was changed: %+v, %v", j, err)
	}
}

// countingTransport counts requests by method and path, the path's IDs
// cut off after its second segment (/v1/job, /v1/evaluation, ...).
type countingTransport struct {
	mu   sync.Mutex
	n    map[string]int
	base http.RoundTripper
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	seg := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 4)
	key := r.Method + " /" + strings.Join(seg[:min(2, len(seg))], "/")
	if len(seg) == 4 {
		key += "/…/" + seg[3]
	}
	c.mu.Lock()
	c.n[key]++
	c.mu.Unlock()
	return c.base.RoundTrip(r)
}

// TestRealStartRequests (issue 12, item 7): on a real Nomad, a start of
// a new 0-GPU workspace costs two or three requests: the register (the
// observation listed no such job) and a blocking read of its evaluation
// (from the evaluation's create index, answered when Nomad is done; a
// second when Nomad wrote it again while pending), whose
// QueuedAllocations says every group is placed. The namespace is read
// once per cycle; no job or allocation is listed or read in full.
func TestRealStartRequests(t *testing.T) {
	realnomad.Client(t)
	ct := &countingTransport{n: map[string]int{}, base: http.DefaultTransport.(*http.Transport).Clone()}
	cfg := nomad.ConfigFromEnv("")
	cfg.HTTPClient = &http.Client{Transport: ct}
	d := realnomad.NewDriver(t, cfg)
	snap, err := d.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ct.mu.Lock()
	clear(ct.n)
	ct.mu.Unlock()
	const n = 10
	for i := range n {
		if err := d.Apply(ctx, realSmallStart(fmt.Sprintf("r%d", i), snap.Nodes[0].Name)); err != nil {
			t.Fatal(err)
		}
	}
	ct.mu.Lock()
	defer ct.mu.Unlock()
	t.Logf("requests for %d starts: %v", n, ct.n)
	total := 0
	for _, v := range ct.n {
		total += v
	}
	// The first start reads and creates the namespace: 2 more. Nomad
	// sometimes writes an evaluation twice while pending (at its create
	// index and the next): a second read.
	if total < 2*n+2 || total > 3*n+2 {
		t.Errorf("%d requests for %d starts, want %d to %d: %v", total, n, 2*n+2, 3*n+2, ct.n)
	}
	if e := ct.n["GET /v1/evaluation"]; e < n || e > 2*n {
		t.Errorf("GET /v1/evaluation: %d requests, want %d to %d", e, n, 2*n)
	}
	for key, want := range map[string]int{
		"PUT /v1/jobs": n, "GET /v1/job/…/allocations": 0,
		"GET /v1/namespace": 1, "PUT /v1/namespace": 1, "GET /v1/job": 0, "GET /v1/allocation": 0,
	} {
		if ct.n[key] != want {
			t.Errorf("%s: %d requests, want %d", key, ct.n[key], want)
		}
	}
}

// TestRealUnplaceableStartCarriesNomadsReason: a start Nomad cannot place
// is ClassUnplaceable with Nomad's reason (memory exhausted, for a 0-GPU
// job), and the job is withdrawn. How often it is tried again is the
// loop's per-workspace backoff (TestRealNoConnectionPileUp).
func TestRealUnplaceableStartCarriesNomadsReason(t *testing.T) {
	c := realnomad.Client(t)
	d := realnomad.NewDriver(t, nomad.ConfigFromEnv(""))
	snap, err := d.Observe(ctx)
	if err != nil || len(snap.Nodes) == 0 {
		t.Fatalf("observe: %v", err)
	}
	ws := &schema.Workspace{Meta: schema.Meta{Name: "huge", Project: "berth-real"}, Spec: schema.WorkspaceSpec{
		State: schema.DesiredRunning, Task: schema.Task{Driver: "raw_exec", Command: "/bin/sleep", Args: []string{"3600"}},
		Resources: schema.WorkResources{MemoryBytes: 1 << 50}}}
	a := drivers.Action{Kind: drivers.ActionStart, Workspace: ws.Ref(), Spec: ws, Revision: "r1",
		Project:    &schema.Project{Meta: schema.Meta{Name: "berth-real"}, Spec: schema.ProjectSpec{Tier: "medium"}},
		Tier:       &schema.PriorityTier{Meta: schema.Meta{Name: "medium"}, Spec: schema.TierSpec{Value: 50}},
		Placements: []drivers.Placement{{Node: snap.Nodes[0].Name}}}
	start := time.Now()
	err = d.Apply(ctx, a)
	if drivers.ClassOf(err) != drivers.ClassUnplaceable || !strings.Contains(err.Error(), "memory exhausted") || strings.Contains(err.Error(), "GPU") {
		t.Fatalf("Apply = %v (class %s), want unplaceable with Nomad's reason (memory exhausted)", err, drivers.ClassOf(err))
	}
	t.Logf("unplaceable in %s: %v", time.Since(start), err)
	j, _, err := c.Jobs().Info("huge", &api.QueryOptions{Namespace: "berth-real"})
	if err != nil || j.Stop == nil || !*j.Stop {
		t.Fatalf("the unplaceable job is not withdrawn: %+v %v", j, err)
	}
}
