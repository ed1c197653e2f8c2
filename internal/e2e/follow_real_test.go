package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hashicorp/nomad/api"
)

// TestRealFollowedSnapshotEqualsFullRead (issue 25): on a real Nomad,
// after a storm of changes (starts, a stop, an update, a drain and, when
// make e2e names the cluster's directory in NOMAD_DEV_DIR, a lost
// node), the snapshot a driver following the event stream answers from
// its cache equals the one a fresh driver reads whole.
func TestRealFollowedSnapshotEqualsFullRead(t *testing.T) {
	c := realnomad.Client(t)
	d := realnomad.NewDriver(t, nomad.ConfigFromEnv(""))
	other := realnomad.NewDriver(t, nomad.ConfigFromEnv(""))
	snap, err := other.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	realnomad.Follow(t, d)
	nodes := snap.Nodes
	if len(nodes) < 2 {
		t.Skipf("needs 2 nodes, the cluster has %d", len(nodes))
	}
	compare := func(step string) {
		t.Helper()
		// The cluster moves on between the two reads: try again until
		// both saw the same one.
		var got, want drivers.Snapshot
		var diff string
		for try := 0; try < 20; try++ {
			before := d.FollowStats()
			if got, err = d.Observe(ctx); err != nil {
				t.Fatal(err)
			}
			cached := d.FollowStats().CachedReads > before.CachedReads
			fresh, err := nomad.New(nomad.ConfigFromEnv(""))
			if err != nil {
				t.Fatal(err)
			}
			want, err = fresh.Observe(ctx)
			fresh.Close() // twenty tries must not hold twenty drivers' connections
			if err != nil {
				t.Fatal(err)
			}
			diff = cmp.Diff(want, got, cmpopts.IgnoreFields(drivers.Snapshot{}, "ObservedAt"), cmpopts.EquateEmpty())
			if diff == "" && cached {
				t.Logf("%s: the followed snapshot equals a full read (%d nodes, %d allocations, %d exits)", step, len(got.Nodes), len(got.Allocs), len(got.Exits))
				return
			}
			time.Sleep(500 * time.Millisecond) // the cluster moves on between the two reads
		}
		t.Errorf("%s: the followed snapshot differs from a full read (-full +followed):\n%s (stats %+v)", step, diff, d.FollowStats())
	}
	start := func(name, node string) {
		t.Helper()
		if err := other.Apply(ctx, realSmallStart(name, node)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 6 {
		start(fmt.Sprintf("storm-%d", i), nodes[i%2].Name)
	}
	if err := realnomad.WaitFor(ctx, other, 60*time.Second, func(s drivers.Snapshot) bool {
		running := 0
		for _, a := range s.Allocs {
			if a.Phase == drivers.AllocRunning {
				running++
			}
		}
		return running == 6
	}); err != nil {
		t.Fatal(err)
	}
	compare("six started")

	if err := other.Apply(ctx, drivers.Action{Kind: drivers.ActionStop, Workspace: realSmallStart("storm-0", "").Workspace}); err != nil {
		t.Fatal(err)
	}
	up := realSmallStart("storm-1", nodes[1].Name)
	up.Kind = drivers.ActionUpdate
	up.Spec.Spec.Task.Args = []string{"-c", "sleep 3599"}
	if err := other.Apply(ctx, up); err != nil {
		t.Fatal(err)
	}
	start("storm-6", nodes[0].Name)
	ids := realnomad.NodeIDs(t, c)
	if _, err := c.Nodes().UpdateDrain(ids[nodes[1].Name], &api.DrainSpec{Deadline: time.Second}, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = c.Nodes().UpdateDrain(ids[nodes[1].Name], nil, true, nil)
	})
	time.Sleep(3 * time.Second) // the drain's deadline passes, its allocations stop
	compare("after a stop, an update, a start and a drain")

	dir := os.Getenv("NOMAD_DEV_DIR")
	if dir == "" {
		t.Log("NOMAD_DEV_DIR is not set: the lost node is left out")
		return
	}
	b, err := os.ReadFile(filepath.Join(dir, "pids"))
	if err != nil {
		t.Fatal(err)
	}
	pids := strings.Fields(string(b))
	if len(pids) < 2 {
		t.Fatalf("%s/pids names %d agents", dir, len(pids))
	}
	// node-2's client stops answering: the server marks it down.
	if err := exec.Command("kill", "-STOP", pids[1]).Run(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = exec.Command("kill", "-CONT", pids[1]).Run()
		_ = realnomad.WaitFor(ctx, other, 60*time.Second, func(s drivers.Snapshot) bool {
			for _, n := range s.Nodes {
				if !n.Ready {
					return false
				}
			}
			return true
		})
	})
	if err := realnomad.WaitFor(ctx, other, 90*time.Second, func(s drivers.Snapshot) bool {
		for _, n := range s.Nodes {
			if n.Name == nodes[1].Name {
				return !n.Ready
			}
		}
		return false
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // its allocations are marked lost
	compare("after node-2 was lost")
}
