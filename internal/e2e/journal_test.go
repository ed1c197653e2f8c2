package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/drivers/nomad/nomadfake"
	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/berth-dev/berth/reconcile"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/source"
	"github.com/berth-dev/berth/view"
	"github.com/hashicorp/nomad/api"
)

// manualClock is a clock a test moves by hand, shared by the fake Nomad
// and the driver.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestPruneDelaySurvivesRestartOnFakeNomad: the prune timer and the
// transitions go through the driver's Variables, so a berth restarted 40
// minutes into a 1 h prune delay (a new driver, a new loop) purges the
// job when it was due, and tells the same story.
func TestPruneDelaySurvivesRestartOnFakeNomad(t *testing.T) {
	clk := &manualClock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	fake := nomadfake.New(nomadfake.WithClock(clk.now))
	const gpu = "GPU-8a1f6c2e-0000-4000-8000-000000000000"
	fake.AddNode(nomadfake.Node{ID: "9d2c4e1a-0000-4000-8000-000000000001", Name: "gpu-node", MemoryMB: 262144,
		GPUs: []nomadfake.GPU{{ID: gpu, PCIBusID: "00000000:18:00.0", Healthy: true}}})
	url := fake.Start(t).URL
	dir := t.TempDir()
	write(t, dir, "tiers.yaml", realTiers)
	write(t, dir, "a.yaml", realWorkspace("a", 1, "sleep 3600"))
	open := func() *reconcile.Loop {
		d := realnomad.NewDriver(t, nomad.Config{Address: url, PlacementTimeout: 1e9, Now: clk.now})
		l, err := reconcile.New(reconcile.Config{Source: source.DirSource{Dir: dir}, Cluster: d, Store: d, PruneDelay: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	a := schema.Ref{Project: "berth-real", Name: "a"}
	client, err := api.NewClient(&api.Config{Address: url})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	jobExists := func() bool {
		_, _, err := client.Jobs().Info("a", &api.QueryOptions{Namespace: "berth-real"})
		return err == nil
	}
	minutes := func(l *reconcile.Loop, n int) {
		for range n {
			clk.add(time.Minute)
			fake.Settle()
			l.Once(ctx)
		}
	}

	l := open()
	minutes(l, 3)
	if w, _ := l.Workspace(a); w.Workspace.State != view.StateRunning {
		t.Fatalf("a is %s, want Running", w.Workspace.State)
	}
	if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	removed := clk.now().Add(time.Minute) // seen at the next cycle
	minutes(l, 40)
	before, _ := l.Workspace(a)

	l = open() // restarted
	l.Once(ctx)
	after, _ := l.Workspace(a)
	if after.Workspace.Reason != before.Workspace.Reason || !strings.Contains(before.Workspace.Reason, removed.Add(time.Hour).Format(time.RFC3339)) {
		t.Errorf("a's reason before the restart %q, after %q; want both to say it is purged at %s", before.Workspace.Reason, after.Workspace.Reason, removed.Add(time.Hour).Format(time.RFC3339))
	}
	if len(after.History) != len(before.History) {
		t.Errorf("the restarted berth knows %d transitions of a, the first %d", len(after.History), len(before.History))
	}
	minutes(l, 19)
	if !jobExists() {
		t.Fatal("a's job was purged before its delay ended")
	}
	minutes(l, 2)
	if jobExists() {
		t.Fatal("a's job was not purged when its delay ended, across the restart")
	}
}
