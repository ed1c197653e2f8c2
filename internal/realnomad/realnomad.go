package realnomad

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/hashicorp/nomad/api"
)

// Meta keys of berth's jobs and namespaces (drivers/nomad's; repeated
// here so test support does not import the driver under test).
const (
	metaWorkspace = "berth.workspace"
	metaCreatedBy = "berth.created-by"
)

// historyPath is where the Nomad driver keeps the history by default
// (its StateNamespace's Variables), repeated here like the meta keys.
const historyPath = "berth/state/history"

// Client returns a client for the agent at NOMAD_ADDR, or skips t when
// NOMAD_ADDR is not set. Every berth job, berth-created namespace and
// berth Variable is removed before the test and again when it ends, so
// tests do not see each other's work.
func Client(t testing.TB) *api.Client {
	t.Helper()
	if os.Getenv("NOMAD_ADDR") == "" {
		t.Skip("NOMAD_ADDR is not set: this test runs against a real Nomad (make e2e starts one from ../shared/nomad-dev)")
	}
	c, err := api.NewClient(api.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close) // runs last: after the cleaning below
	if err := Clean(context.Background(), c); err != nil {
		t.Fatalf("clean the agent before the test: %v", err)
	}
	t.Cleanup(func() {
		if err := Clean(context.Background(), c); err != nil {
			t.Errorf("clean the agent after the test: %v", err)
		}
	})
	return c
}

// Clean purges every job carrying berth's marker, waits until their
// allocations are terminal, deletes the namespaces berth created and the
// Variables under berth/ in every namespace.
func Clean(ctx context.Context, c *api.Client) error {
	q := (&api.QueryOptions{Namespace: "*", Filter: `Meta["` + metaWorkspace + `"] is not empty`}).WithContext(ctx)
	jobs, _, err := c.Jobs().ListOptions(&api.JobListOptions{Fields: &api.JobListFields{Meta: true}}, q)
	if err != nil {
		return fmt.Errorf("list berth's jobs: %w", err)
	}
	for _, j := range jobs {
		w := (&api.WriteOptions{Namespace: j.Namespace}).WithContext(ctx)
		if _, _, err := c.Jobs().Deregister(j.ID, true, w); err != nil && !strings.Contains(err.Error(), "404") {
			return fmt.Errorf("purge job %s/%s: %w", j.Namespace, j.ID, err)
		}
	}
	if err := WaitIdle(ctx, c, time.Minute); err != nil {
		return err
	}
	vars, _, err := c.Variables().PrefixList("berth/", (&api.QueryOptions{Namespace: "*"}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("list berth's variables: %w", err)
	}
	for _, v := range vars {
		if _, err := c.Variables().Delete(v.Path, (&api.WriteOptions{Namespace: v.Namespace}).WithContext(ctx)); err != nil {
			return fmt.Errorf("delete variable %s/%s: %w", v.Namespace, v.Path, err)
		}
	}
	nss, _, err := c.Namespaces().List((&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("list namespaces: %w", err)
	}
	for _, ns := range nss {
		if ns.Meta[metaCreatedBy] == "" {
			continue
		}
		// Purged jobs can take a moment to leave the namespace.
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, err := c.Namespaces().Delete(ns.Name, (&api.WriteOptions{}).WithContext(ctx))
			if err == nil || time.Now().After(deadline) {
				if err != nil {
					return fmt.Errorf("delete namespace %s: %w", ns.Name, err)
				}
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}

// WaitIdle waits until no allocation on the agent is pending or running
// for a berth job (every task berth started has exited), or fails after
// limit.
func WaitIdle(ctx context.Context, c *api.Client, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		allocs, _, err := c.Allocations().List((&api.QueryOptions{Namespace: "*"}).WithContext(ctx))
		if err != nil {
			return fmt.Errorf("list allocations: %w", err)
		}
		busy := 0
		for _, a := range allocs {
			if a.ClientStatus == "pending" || a.ClientStatus == "running" {
				busy++
			}
		}
		if busy == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d allocations still pending or running after %s", busy, limit)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// NodeIDs returns the agent's client nodes by name ("node-1", "node-2").
func NodeIDs(t testing.TB, c *api.Client) map[string]string {
	t.Helper()
	stubs, _, err := c.Nodes().List(nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, s := range stubs {
		out[s.Name] = s.ID
	}
	return out
}

// HistoryVars lists the Variables under berth/state/history (where the
// Nomad driver keeps the history) on the agent c, with their sizes as
// Nomad counts them and their ModifyIndex.
func HistoryVars(t testing.TB, c *api.Client) (sizes map[string]int, index map[string]uint64) {
	t.Helper()
	metas, _, err := c.Variables().PrefixList(historyPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	sizes, index = map[string]int{}, map[string]uint64{}
	for _, m := range metas {
		v, _, err := c.Variables().Read(m.Path, nil)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for k, s := range v.Items {
			n += len(k) + len(s)
		}
		sizes[m.Path], index[m.Path] = n, m.ModifyIndex
	}
	return sizes, index
}

// NewDriver opens a driver for cfg and closes its connections when t
// ends: a real agent refuses an address that holds too many.
func NewDriver(t testing.TB, cfg nomad.Config) *nomad.Driver {
	t.Helper()
	d, err := nomad.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// WaitFor observes d until ok holds or within passes.
func WaitFor(ctx context.Context, d *nomad.Driver, within time.Duration, ok func(drivers.Snapshot) bool) error {
	deadline := time.Now().Add(within)
	for {
		snap, err := d.Observe(ctx)
		if err != nil {
			return err
		}
		if ok(snap) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s; last snapshot: %+v", within, snap)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
