package ui_test

import (
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/api"
	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/reconcile"
	"github.com/berth-dev/berth/source"
	"github.com/chromedp/chromedp"
)

// largeSpecs is four projects with 500 workspaces of 1 to 8 GPUs between
// them, for a cluster of 512 nodes of 8 GPUs.
func largeSpecs(t *testing.T, dir string) {
	copyFile(t, filepath.Join(example, "tiers.yaml"), filepath.Join(dir, "tiers.yaml"))
	var b strings.Builder
	projects := []struct{ name, tier string }{{"research", "low"}, {"training", "medium"}, {"inference", "high"}, {"eval", "medium"}}
	for _, p := range projects {
		fmt.Fprintf(&b, "apiVersion: berth.dev/v1\nkind: Project\nmetadata: {name: %s}\nspec:\n  tier: %s\n  members: [alice]\n  quota: {gpus: 800}\n---\n", p.name, p.tier)
	}
	sizes := []int{8, 8, 4, 2, 1, 8, 4}
	for i := range 500 {
		p := projects[i%len(projects)]
		fmt.Fprintf(&b, "apiVersion: berth.dev/v1\nkind: Workspace\nmetadata: {name: job-%03d, project: %s}\nspec:\n  owner: alice\n  state: Running\n  task: {driver: docker, image: busybox}\n  resources: {gpus: %d, cpu: 1, memory: 1Gi}\n---\n",
			i, p.name, sizes[i%len(sizes)])
	}
	write(t, dir, "specs.yaml", strings.TrimSuffix(b.String(), "---\n"))
}

// TestBrowserLargeCluster: at 512 nodes the page draws an overview (one
// cell per node) and only the node rows in view, and a filter drills down
// to one node.
func TestBrowserLargeCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end in a browser")
	}
	exe := chromium(t)
	dir := t.TempDir()
	largeSpecs(t, dir)
	spec, err := sim.Parse([]byte("apiVersion: berth.dev/v1\nkind: Cluster\nmetadata: {name: big}\nspec:\n  nodes:\n  - {name: dgx, count: 512, preset: dgx-h100}\n"))
	if err != nil {
		t.Fatal(err)
	}
	clock := sim.NewManualClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	cluster := sim.New(*spec, clock)
	loop, err := reconcile.New(reconcile.Config{Source: source.DirSource{Dir: dir}, Cluster: cluster, Store: cluster, ClusterName: spec.Name})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := loop.Once(t.Context()); err != nil {
			t.Fatal(err)
		}
		clock.Advance(10 * time.Second)
	}
	if err := cluster.SetNodeReady("dgx-300", false); err != nil {
		t.Fatal(err)
	}
	if _, err := loop.Once(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.Handler(loop, nil))
	defer srv.Close()

	bctx := browser(t, t.Context(), exe)
	start := time.Now()
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="live"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#nodes .node`))); err != nil {
		t.Fatal(err)
	}
	t.Logf("512 nodes: the page was live and drawn %s after navigating", time.Since(start).Round(time.Millisecond))

	if got := eval[int](t, bctx, `document.querySelectorAll('#minimap i').length`); got != 512 {
		t.Errorf("overview has %d cells, want 512", got)
	}
	if got := eval[int](t, bctx, `document.querySelectorAll('#minimap i.bad').length`); got != 1 {
		t.Errorf("overview marks %d nodes down or unhealthy, want 1 (dgx-300)", got)
	}
	if rows := eval[int](t, bctx, `document.querySelectorAll('#nodes .node').length`); rows == 0 || rows > 60 {
		t.Errorf("%d node rows in the page; want only those in view (virtualised)", rows)
	}
	if got := eval[[]string](t, bctx, `[...document.querySelectorAll('#nodes .node')].slice(0, 3).map(n => n.dataset.node)`); strings.Join(got, " ") != "dgx-1 dgx-2 dgx-3" {
		t.Errorf("first rows %v; want nodes in natural order (dgx-1 dgx-2 dgx-3)", got)
	}
	if got := eval[int](t, bctx, `document.querySelectorAll('#projects .ws').length`); got > 4*18 {
		t.Errorf("%d workspace chips for 500 workspaces; want at most 18 per project", got)
	}
	if got := eval[string](t, bctx, `document.getElementById("cluster-sum").textContent`); !strings.HasPrefix(got, "512 nodes") {
		t.Errorf("cluster summary %q", got)
	}
	shot, err := chromedp.Run(bctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	savePNG(t, "dashboard-512.png", shot)

	// Scrolling to the end draws the last nodes.
	eval[bool](t, bctx, `(() => { const b = document.getElementById("nodes"); b.scrollTop = b.scrollHeight; b.dispatchEvent(new Event("scroll")); return true })()`)
	time.Sleep(100 * time.Millisecond)
	if !eval[bool](t, bctx, `!!document.querySelector('#nodes .node[data-node="dgx-512"]')`) {
		t.Errorf("after scrolling to the end, the last node (dgx-512) is not drawn")
	}
	// Drill down: a click on the overview cell of dgx-300 shows that node.
	eval[bool](t, bctx, `(() => { document.querySelector('#minimap i.bad').click(); return true })()`)
	time.Sleep(100 * time.Millisecond)
	if got := eval[[]string](t, bctx, `[...document.querySelectorAll('#nodes .node')].map(n => n.dataset.node + (n.classList.contains("down") ? " down" : ""))`); len(got) != 1 || got[0] != "dgx-300 down" {
		t.Errorf("after a click on dgx-300's cell the page shows %v; want dgx-300, down", got)
	}
}

// TestBrowserManyWorkspaces: past 2,000 workspaces the feed sends only what
// the page shows, and the page still counts every one: "and N more" per
// project, and the waiting ones beyond the queue's first 500.
func TestBrowserManyWorkspaces(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end in a browser")
	}
	exe := chromium(t)
	dir := t.TempDir()
	copyFile(t, filepath.Join(example, "tiers.yaml"), filepath.Join(dir, "tiers.yaml"))
	var b strings.Builder
	b.WriteString("apiVersion: berth.dev/v1\nkind: Project\nmetadata: {name: research}\nspec:\n  tier: low\n  members: [alice]\n  quota: {gpus: 4}\n")
	for i := range 2500 {
		fmt.Fprintf(&b, "---\napiVersion: berth.dev/v1\nkind: Workspace\nmetadata: {name: job-%04d, project: research}\nspec:\n  owner: alice\n  state: Running\n  task: {driver: docker, image: busybox}\n  resources: {gpus: 1, cpu: 1, memory: 1Gi}\n", i)
	}
	write(t, dir, "specs.yaml", b.String())
	spec, err := sim.Parse([]byte("apiVersion: berth.dev/v1\nkind: Cluster\nmetadata: {name: one}\nspec:\n  nodes:\n  - {name: dgx, preset: dgx-h100}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cluster := sim.New(*spec, sim.NewManualClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)))
	loop, err := reconcile.New(reconcile.Config{Source: source.DirSource{Dir: dir}, Cluster: cluster, Store: cluster, ClusterName: spec.Name})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := loop.Once(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.Handler(loop, nil))
	defer srv.Close()

	bctx := browser(t, t.Context(), exe)
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="live"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#projects .ws`))); err != nil {
		t.Fatal(err)
	}
	if got := eval[int](t, bctx, `document.querySelectorAll('#projects .ws').length`); got != 18 {
		t.Errorf("%d workspace chips; want 18", got)
	}
	// 8 GPUs: 8 start, 2,492 wait; 18 of them are chips.
	if got := eval[string](t, bctx, `document.querySelector('#projects .chips .muted').textContent`); got != "and 2474 more Pending, 8 more Starting" {
		t.Errorf("project chips end with %q", got)
	}
	if got := eval[string](t, bctx, `document.querySelector('#projects .waiting').textContent`); !strings.HasSuffix(got, " and 2488 more") {
		t.Errorf("project's waiting line %q; want it to end with \" and 2488 more\"", got)
	}
	if got := eval[int](t, bctx, `document.querySelectorAll('#queue tbody tr').length`); got != 500 {
		t.Errorf("%d queue rows; want the first 500", got)
	}
	if got := eval[string](t, bctx, `document.getElementById("queue-more").textContent`); got != "… and 1992 more waiting (berth status --all lists every workspace)" {
		t.Errorf("below the queue: %q", got)
	}
}
