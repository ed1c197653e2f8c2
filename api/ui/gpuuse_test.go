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
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/source"
	"github.com/chromedp/chromedp"
)

const useCluster = `apiVersion: berth.dev/v1
kind: Cluster
metadata: {name: two}
spec:
  nodes:
  - name: dgx
    gpus:
    - {model: H100, memory: 80Gi, count: 3}
`

const useSpecs = `apiVersion: berth.dev/v1
kind: PriorityTier
metadata: {name: low}
spec: {value: 20}
---
apiVersion: berth.dev/v1
kind: Project
metadata: {name: ml}
spec: {tier: low, quota: {gpus: 3}}
---
apiVersion: berth.dev/v1
kind: Workspace
metadata: {name: train, project: ml}
spec:
  state: Running
  task: {image: pytorch/pytorch}
  resources: {gpus: 2}
---
apiVersion: berth.dev/v1
kind: Workspace
metadata: {name: notebook, project: ml}
spec:
  state: Running
  task: {image: jupyter/base-notebook}
  resources: {gpus: 1}
`

// TestBrowserGPUUse: a running workspace's chip shows its busiest GPU's
// utilization (an idle one marked), and its page the figures with when
// they were read.
func TestBrowserGPUUse(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end in a browser")
	}
	exe := chromium(t)
	dir := t.TempDir()
	write(t, dir, "specs.yaml", useSpecs)
	spec, err := sim.Parse([]byte(useCluster))
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
	train, notebook := schema.Ref{Project: "ml", Name: "train"}, schema.Ref{Project: "ml", Name: "notebook"}
	until := func(what, cond string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !eval[bool](t, bctx, cond) {
			if time.Now().After(deadline) {
				t.Fatalf("gave up waiting for the page to show %s", what)
			}
			// Once they run, their GPUs report (again and again: a run
			// that is not running yet refuses).
			_ = cluster.SetUse(train, 85, 20)
			_ = cluster.SetUse(notebook, 0)
			clock.Advance(5 * time.Second)
			time.Sleep(20 * time.Millisecond)
		}
	}
	chip := func(ws string) string {
		return `((document.querySelector('#projects .ws[data-workspace="` + ws + `"] .gpu-use'))||{})`
	}
	until("train's utilization", chip("ml/train")+`.textContent === "85%"`)
	until("notebook's utilization", chip("ml/notebook")+`.textContent === "0%"`)
	if !eval[bool](t, bctx, chip("ml/notebook")+`.classList.contains("idle")`) || eval[bool](t, bctx, chip("ml/train")+`.classList.contains("idle")`) {
		t.Error("the idle workspace's chip is not marked idle, or the busy one's is")
	}
	eval[bool](t, bctx, `(document.querySelector('#projects .ws[data-workspace="ml/train"]').click(), true)`)
	if err := chromedp.Do(bctx, chromedp.WaitVisible(chromedp.CSS(`#ws-status .gpu-use-figure`))); err != nil {
		t.Fatalf("browser: open train's page: %v", err)
	}
	if got := eval[string](t, bctx, `document.querySelector('#ws-status .gpu-use-figure').textContent`); !strings.HasPrefix(got, "GPU utilization 85% at most, 53% on average over 2 GPUs, read at 09:") {
		t.Errorf("train's page shows %q", got)
	}
	if got := eval[string](t, bctx, `document.getElementById("ws-explain").innerText`); !strings.Contains(got, "GPU utilization: 85% at most over its 2 GPUs, 53% on average") {
		t.Errorf("train's explanation %q does not say its utilization", got)
	}
}
