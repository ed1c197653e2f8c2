package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/drivers/nomad/nomadfake"
	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/berth-dev/berth/reconcile"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/source"
	"github.com/berth-dev/berth/view"
)

// TestStartFailedByTheNodeIsRetriedOnFakeNomad: a start that fails for
// the node's reason (the device could not be reserved: the GPU vanished
// just after berth placed on it) is not the workspace's failure. berth
// starts it again at once, then after a backoff that doubles, saying so
// with the attempt; after drivers.NodeFaultAttempts in a row it is
// Failed with Nomad's message; it never loops faster than its backoff.
func TestStartFailedByTheNodeIsRetriedOnFakeNomad(t *testing.T) {
	clk := &manualClock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	fake := nomadfake.New(nomadfake.WithClock(clk.now))
	fake.AddNode(nomadfake.Node{ID: "9d2c4e1a-0000-4000-8000-000000000001", Name: "gpu-node", MemoryMB: 262144,
		GPUs: []nomadfake.GPU{{ID: "GPU-8a1f6c2e-0000-4000-8000-000000000000", PCIBusID: "00000000:18:00.0", Healthy: true}}})
	url := fake.Start(t).URL
	dir := t.TempDir()
	write(t, dir, "tiers.yaml", realTiers)
	write(t, dir, "a.yaml", realWorkspace("a", 1, "sleep 3600"))
	d := realnomad.NewDriver(t, nomad.Config{Address: url, PlacementTimeout: 1e9, Now: clk.now})
	l, err := reconcile.New(reconcile.Config{Source: source.DirSource{Dir: dir}, Cluster: d, Store: d})
	if err != nil {
		t.Fatal(err)
	}
	a := schema.Ref{Project: "berth-real", Name: "a"}
	const msg = "failed to reserve device nvidia/gpu/H100-fake: unknown device GPU-8a1f6c2e-0000-4000-8000-000000000000"
	status := func() view.WorkspaceStatus {
		w, _ := l.Workspace(a)
		return w.Workspace
	}
	starts := func(res reconcile.Result) (n int) {
		for _, act := range res.Applied {
			if act.Kind == drivers.ActionStart {
				n++
			}
		}
		return n
	}
	res, _ := l.Once(ctx)
	if starts(res) != 1 {
		t.Fatalf("first cycle applied %v, want a start", res.Applied)
	}
	// Each failed start: the next comes after 0, 10, 20, 40, 80 s, never
	// sooner.
	for attempt, wait := range []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second} {
		fake.FailStart("berth-real", "a", msg)
		clk.add(time.Second)
		if wait > 0 {
			res, _ := l.Once(ctx)
			st := status()
			if n := starts(res); n != 0 || st.State != view.StatePending || !strings.Contains(st.Reason, msg) ||
				!strings.Contains(st.Reason, fmt.Sprintf("attempt %d of 5", attempt+1)) {
				t.Fatalf("attempt %d: %d starts, %s %q; want none yet, Pending saying why and the attempt", attempt+1, n, st.State, st.Reason)
			}
			clk.add(wait - 2*time.Second)
			if res, _ := l.Once(ctx); starts(res) != 0 {
				t.Fatalf("attempt %d: started again %s before its %s backoff ended", attempt+1, time.Second, wait)
			}
			clk.add(time.Second)
		}
		res, _ := l.Once(ctx)
		if starts(res) != 1 {
			t.Fatalf("attempt %d: applied %v after its %s backoff; want it started again", attempt+1, res.Applied, wait)
		}
		if st := status(); st.State == view.StateFailed {
			t.Fatalf("attempt %d: Failed (%s); the node's fault is not the workspace's", attempt+1, st.Reason)
		}
	}
	// The sixth in a row: berth gives up, and says why.
	fake.FailStart("berth-real", "a", msg)
	clk.add(10 * time.Minute)
	l.Once(ctx)
	st := status()
	if st.State != view.StateFailed || !strings.Contains(st.Reason, "by the node's fault 6 times in a row") || !strings.Contains(st.Reason, msg) {
		t.Fatalf("after 6: %s %q; want Failed, naming the node's fault and Nomad's message", st.State, st.Reason)
	}
	if st.LastEnd == nil || st.LastEnd.Class != "node-fault" || st.LastEnd.Attempts != 6 {
		t.Errorf("last end %+v; want the node's fault, 6 in a row", st.LastEnd)
	}
	for range 3 {
		clk.add(10 * time.Minute)
		if res, _ := l.Once(ctx); starts(res) != 0 {
			t.Fatalf("a Failed workspace was started again: %v", res.Applied)
		}
	}
}
