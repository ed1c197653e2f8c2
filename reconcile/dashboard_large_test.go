package reconcile

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/source"
	"github.com/berth-dev/berth/view"
)

// The dashboard's first message stays small for a large tree: past
// view.DashboardAll workspaces it holds per project the ones the page shows and
// those holding GPUs, and the first view.DashboardQueue of the queue; the counts
// stay whole.
func TestDashboardLargeTreeBounded(t *testing.T) {
	const n = view.DashboardAll + 600
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("apiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: medium}\nspec: {value: 50}\n")
	for _, p := range []string{"a", "b"} {
		fmt.Fprintf(&b, "---\napiVersion: berth.dev/v1\nkind: Project\nmetadata: {name: %s}\nspec: {tier: medium, quota: {gpus: 1}}\n", p)
	}
	for i := range n {
		fmt.Fprintf(&b, "---\napiVersion: berth.dev/v1\nkind: Workspace\nmetadata: {name: w%04d, project: %s}\nspec:\n  state: Running\n  task: {driver: docker, image: x}\n  resources: {gpus: 1}\n", i, []string{"a", "b"}[i%2])
	}
	if err := os.WriteFile(filepath.Join(dir, "specs.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := sim.Parse([]byte(twoGPUs))
	if err != nil {
		t.Fatal(err)
	}
	c := sim.New(*spec, sim.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	l, err := New(Config{Source: source.DirSource{Dir: dir}, Cluster: c, Store: c})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Once(t.Context()); err != nil {
		t.Fatal(err)
	}
	sub, err := l.Subscribe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unsubscribe(sub)
	raw := <-sub.ch
	t.Logf("first message for %d workspaces: %d bytes", n, len(raw))
	var m view.Message
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	d := m.State
	holders := 0
	for _, w := range d.Workspaces {
		if len(w.GPUs) > 0 {
			holders++
		}
	}
	// Per project: the page's first chips are Pending (they need
	// attention first), and the one Starting holds a GPU.
	if d.WorkspacesTotal != n || holders != 2 || len(d.Workspaces) != 2*(view.DashboardChips+1) {
		t.Errorf("workspaces: %d sent (%d holding GPUs) of %d; want %d (the page's %d per project and its holder), of %d",
			len(d.Workspaces), holders, d.WorkspacesTotal, 2*(view.DashboardChips+1), view.DashboardChips, n)
	}
	if len(d.Queue) != view.DashboardQueue || d.QueueTotal != n-2 {
		t.Errorf("queue: %d sent of %d; want %d of %d", len(d.Queue), d.QueueTotal, view.DashboardQueue, n-2)
	}
	for _, p := range d.Projects {
		if len(p.Waiting) != view.DashboardWaiting || p.WaitingTotal != n/2-1 || p.States[view.StatePending] != n/2-1 || p.States[view.StateStarting] != 1 {
			t.Errorf("project %s: %d waiting named of %d, states %v; want %d of %d, %d Pending and 1 Starting",
				p.Name, len(p.Waiting), p.WaitingTotal, p.States, view.DashboardWaiting, n/2-1, n/2-1)
		}
	}
	if len(raw) > 512<<10 {
		t.Errorf("the first message is %d bytes; want it under 512 KiB", len(raw))
	}
}
