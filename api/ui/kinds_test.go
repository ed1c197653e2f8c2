package ui_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/api"
	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/reconcile"
	"github.com/berth-dev/berth/source"
	"github.com/chromedp/chromedp"
)

// kindsCluster has two H100s, two L40Ss and an A10 no kind matches.
const kindsCluster = `apiVersion: berth.dev/v1
kind: Cluster
metadata: {name: mixed}
spec:
  nodes:
  - name: dgx
    gpus:
    - {model: NVIDIA H100 80GB HBM3, memory: 80Gi, count: 2}
  - name: inf
    gpus:
    - {model: NVIDIA L40S, memory: 48Gi, count: 2}
  - name: ws
    gpus:
    - {model: NVIDIA A10, memory: 24Gi}
`

// kindsSpecs: ml's quota names h100 (borrow limit 1) and l40s (none);
// train takes both H100s, one beyond its kind's quota.
const kindsSpecs = `apiVersion: berth.dev/v1
kind: PriorityTier
metadata: {name: low}
spec: {value: 20}
---
apiVersion: berth.dev/v1
kind: GPUKind
metadata: {name: h100}
spec: {match: "NVIDIA H100*"}
---
apiVersion: berth.dev/v1
kind: GPUKind
metadata: {name: l40s}
spec: {match: "NVIDIA L40S", weight: 0.5}
---
apiVersion: berth.dev/v1
kind: Project
metadata: {name: ml}
spec:
  tier: low
  quota: {gpus: 1, kinds: {h100: 1, l40s: 2}}
  borrowLimit: {kinds: {h100: 1}}
---
apiVersion: berth.dev/v1
kind: Workspace
metadata: {name: train, project: ml}
spec:
  state: Running
  task: {image: pytorch/pytorch}
  resources: {gpus: 2, gpuKind: h100}
---
apiVersion: berth.dev/v1
kind: Workspace
metadata: {name: notebook, project: ml}
spec:
  state: Running
  task: {image: jupyter/base-notebook}
  resources: {gpus: 1, gpuModel: NVIDIA A10}
`

// TestBrowserKinds: where a project's quota names GPU kinds, its card
// shows each kind's GPUs against its quota and borrow limit, its own
// figures say they count its other GPUs, and a workspace's chip and page
// show the kind it asks for.
func TestBrowserKinds(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end in a browser")
	}
	exe := chromium(t)
	dir := t.TempDir()
	write(t, dir, "specs.yaml", kindsSpecs)
	spec, err := sim.Parse([]byte(kindsCluster))
	if err != nil {
		t.Fatal(err)
	}
	clock := sim.NewManualClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	cluster := sim.New(*spec, clock)
	loop, err := reconcile.New(reconcile.Config{
		Source: source.DirSource{Dir: dir}, Cluster: cluster, Store: cluster, ClusterName: spec.Name,
		Interval: 200 * time.Millisecond, Debounce: 50 * time.Millisecond, Settle: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.Handler(loop, nil))
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- loop.Run(ctx, nil) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	bctx := browser(t, ctx, exe)
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="live"]`))); err != nil {
		t.Fatalf("browser: load the dashboard: %v", err)
	}
	until := func(what, cond string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !eval[bool](t, bctx, cond) {
			if time.Now().After(deadline) {
				t.Fatalf("gave up waiting for the page to show %s; status %+v", what, loop.Status().Projects)
			}
			clock.Advance(5 * time.Second)
			time.Sleep(20 * time.Millisecond)
		}
	}
	card := `document.querySelector('#projects [data-project="ml"]')`
	until("ml's h100 account", `((`+card+`||document).querySelector('.quota-kind[data-kind="h100"]')||{}).textContent === "h100 2 / 1 (1 borrowed) · may borrow 1"`)
	if got := eval[string](t, bctx, card+`.querySelector('.quota-kind[data-kind="l40s"]').textContent`); got != "l40s 0 / 2 · may borrow unlimited" {
		t.Errorf("ml's l40s account reads %q", got)
	}
	if got := eval[string](t, bctx, card+`.querySelector('.figures span').textContent`); got != "other GPUs: quota 1 · may borrow unlimited" {
		t.Errorf("ml's own GPU figures read %q; want them to say they count its other GPUs", got)
	}
	until("train's chip with its kind", `((`+card+`||document).querySelector('.ws[data-workspace="ml/train"] .gpu-kind')||{}).textContent === "h100"`)
	if n := eval[int](t, bctx, card+`.querySelectorAll('.ws[data-workspace="ml/notebook"] .gpu-kind').length`); n != 0 {
		t.Errorf("notebook asks for no kind; its chip shows %d", n)
	}
	// Clicked from the page's own script, in one step: the live feed
	// redraws the cards, and a node found by one call may be gone by the
	// next (chromedp.Click finds it, then clicks it).
	eval[bool](t, bctx, `(document.querySelector('#projects .ws[data-workspace="ml/train"]').click(), true)`)
	if err := chromedp.Do(bctx, chromedp.WaitVisible(chromedp.CSS(`#ws-status .gpu-kind`))); err != nil {
		t.Fatalf("browser: open train's page: %v", err)
	}
	if got := eval[string](t, bctx, `document.querySelector('#ws-status .gpu-kind').textContent`); got != "GPU kind h100" {
		t.Errorf("train's page shows %q", got)
	}
	if got := eval[string](t, bctx, `document.getElementById("ws-explain").innerText`); !strings.Contains(got, "It asks for GPUs of kind h100.") {
		t.Errorf("train's explanation %q does not say its kind", got)
	}
}
