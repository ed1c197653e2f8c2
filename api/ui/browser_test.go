package ui_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/api"
	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/reconcile"
	"github.com/berth-dev/berth/source"
	"github.com/berth-dev/berth/source/watch"
	"github.com/chromedp/chromedp"
)

const example = "../../examples/walkthrough"

const (
	medium = "medium-priority-project/medium-training"
	high   = "high-priority-project/high-training"
)

// chromium finds a Chromium to drive, or skips the test saying how to get
// one (.ci/run installs Debian's chromium package when it is missing).
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium on PATH: the browser test needs it (apt-get install -y chromium; .ci/run installs it when missing)")
	return ""
}

// recorder is injected into the page: it writes down, in order, every
// state the medium workspace's tile shows, which workspace holds the GPU,
// and the connection pill's states.
const recorder = `(() => {
  window.__rec = {tile: [], gpu: [], conn: []};
  const push = (list, v) => { if (v !== null && v !== undefined && list[list.length-1] !== v) list.push(v); };
  const look = () => {
    const chip = document.querySelector('#projects .ws[data-workspace="` + medium + `"]');
    push(__rec.tile, chip ? chip.dataset.state : null);
    const gpu = document.querySelector('#nodes .gpu');
    push(__rec.gpu, gpu ? (gpu.dataset.workspace || "idle") : null);
    push(__rec.conn, document.getElementById('conn').dataset.state);
  };
  new MutationObserver(look).observe(document.body, {subtree: true, childList: true, attributes: true});
  look();
  return true;
})()`

// TestBrowserWalkthrough loads the dashboard in headless Chromium against
// the real loop on the simulated walk-through cluster, plays the
// walk-through, and checks that the medium workspace's tile and the events
// timeline show Running → Preempted → Running, also across a dropped
// connection. It saves a screenshot (see savePNG).
func TestBrowserWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end in a browser")
	}
	exe := chromium(t)
	dir := t.TempDir()
	for _, f := range []string{"tiers.yaml", "projects.yaml", "volume.yaml"} {
		copyFile(t, filepath.Join(example, f), filepath.Join(dir, f))
	}
	b, err := os.ReadFile(filepath.Join(example, "workspaces.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(b), "\n---\n")
	if len(docs) != 2 || !strings.Contains(docs[0], "medium-training") {
		t.Fatalf("examples/walkthrough/workspaces.yaml: want the medium then the high workspace")
	}
	medDoc, highDoc := docs[0]+"\n", docs[1]
	write(t, dir, "medium.yaml", medDoc)
	// The medium project's quota names CPU and memory too (its workspace
	// fits inside them, so the walk-through plays as it does without):
	// its card shows them against use.
	projects, err := os.ReadFile(filepath.Join(dir, "projects.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	withCPU := strings.Replace(string(projects), "  quota:\n    gpus: 1\n", "  quota:\n    gpus: 1\n    cpu: 8\n    memory: 32Gi\n  borrowLimit:\n    memory: 16Gi\n", 1)
	if withCPU == string(projects) {
		t.Fatalf("examples/walkthrough/projects.yaml: no quota of 1 GPU to add CPU and memory to")
	}
	write(t, dir, "projects.yaml", withCPU)

	spec, err := sim.ReadFile(filepath.Join(example, "cluster.yaml"))
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
	// drop ends every connection open so far from the server's side (as
	// a restart or a proxy would), so the page has to reconnect.
	var mu sync.Mutex
	conns, drop := context.WithCancel(t.Context())
	h := api.Handler(loop, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ctx := conns
		mu.Unlock()
		h.ServeHTTP(w, r.WithContext(ctx))
	}))
	defer srv.Close()
	dropAll := func() {
		mu.Lock()
		drop()
		conns, drop = context.WithCancel(t.Context())
		mu.Unlock()
	}
	defer func() { drop() }()
	ctx, cancel := context.WithCancel(t.Context())
	changes, err := watch.Dir(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- loop.Run(ctx, changes) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	bctx := browser(t, ctx, exe)
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			t.Fatalf("browser: %s: %v", what, err)
		}
	}
	do("load the dashboard", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="live"]`)))
	eval[bool](t, bctx, recorder)

	// until advances the simulated clock by step until the page shows
	// what the JavaScript expression cond says.
	until := func(what string, step time.Duration, cond string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			if eval[bool](t, bctx, cond) {
				return
			}
			if time.Now().After(deadline) {
				rec, _ := chromedp.Run(bctx, chromedp.Evaluate[any](`window.__rec`))
				t.Fatalf("gave up waiting for the page to show %s; recorded %v; status %+v", what, rec, loop.Status().Workspaces)
			}
			clock.Advance(step)
			time.Sleep(20 * time.Millisecond)
		}
	}
	tile := func(state string) string {
		return `(document.querySelector('#projects .ws[data-workspace="` + medium + `"]')||{dataset:{}}).dataset.state === "` + state + `"`
	}

	// 1. medium starts and runs.
	until("medium Running", 5*time.Second, tile("Running"))
	until("medium's GPU tile", time.Second, `!!document.querySelector('#nodes .gpu[data-workspace="`+medium+`"]')`)
	until("medium's CPU and memory against its quota", 0, `(document.querySelector('#projects [data-project="medium-priority-project"] .quota-cpu')||{}).textContent === "CPU 4 / 8 · may borrow unlimited" && `+
		`(document.querySelector('#projects [data-project="medium-priority-project"] .quota-memory')||{}).textContent === "memory 16 GiB / 32 GiB · may borrow 16 GiB" && `+
		`!document.querySelector('#projects [data-project="high-priority-project"] .quota-cpu')`)
	for range 25 {
		clock.Advance(time.Minute)
		time.Sleep(5 * time.Millisecond)
	}

	// 2. high arrives and preempts it; the connection drops meanwhile and
	// the page reconnects by itself.
	write(t, dir, "high.yaml", highDoc)
	until("medium preempted", 0, `["Preempting","Preempted"].includes((document.querySelector('#projects .ws[data-workspace="`+medium+`"]')||{dataset:{}}).dataset.state)`)
	until("high queued with an estimated start", 0, `!!document.querySelector('#queue tr[data-workspace="`+high+`"] td[data-estimate]')`)
	shot, err := chromedp.Run(bctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	savePNG(t, "dashboard.png", shot)
	dropAll()
	until("the page reconnected", 0, `__rec.conn.includes("reconnecting") && document.getElementById("conn").dataset.state === "live"`)
	until("high Running on the GPU", 2*time.Second, `!!document.querySelector('#nodes .gpu[data-workspace="`+high+`"]') && `+tile("Preempted"))
	until("medium queued", 0, `!!document.querySelector('#queue tr[data-workspace="`+medium+`"]')`)
	for range 20 {
		clock.Advance(time.Minute)
		time.Sleep(5 * time.Millisecond)
	}

	// 3. high is stopped; medium resumes by itself.
	write(t, dir, "high.yaml", strings.Replace(highDoc, "state: Running", "state: Stopped", 1))
	until("medium Running again", 2*time.Second, tile("Running")+` && __rec.tile.includes("Preempted")`)

	// The tile went Running → … → Preempted → … → Running, and so did the GPU.
	type recording struct{ Tile, GPU, Conn []string }
	rec := eval[recording](t, bctx, `({Tile: __rec.tile, GPU: __rec.gpu, Conn: __rec.conn})`)
	if !subsequence(rec.Tile, "Running", "Preempted", "Running") {
		t.Errorf("medium's tile showed %v; want Running → Preempted → Running in it", rec.Tile)
	}
	if !subsequence(rec.GPU, medium, high, medium) {
		t.Errorf("the GPU tile showed %v; want medium, then high, then medium", rec.GPU)
	}

	// The timeline (newest first) has medium's transitions, in order.
	to := eval[[]string](t, bctx, `[...document.querySelectorAll('#events li[data-workspace="`+medium+`"]')].reverse().map(li => li.dataset.to)`)
	kinds := eval[[]string](t, bctx, `[...document.querySelectorAll('#events li[data-workspace="`+medium+`"]')].reverse().map(li => li.dataset.kind)`)
	text := eval[[]string](t, bctx, `[...document.querySelectorAll('#events li[data-kind="preempted"]')].map(li => li.innerText)`)
	if !subsequence(to, "Running", "Preempted", "Running") {
		t.Errorf("the timeline shows medium going to %v; want Running → Preempted → Running in it", to)
	}
	if !subsequence(kinds, "started", "preempted", "resumed") {
		t.Errorf("the timeline's kinds for medium: %v; want started, preempted, resumed", kinds)
	}
	if len(text) != 1 || !strings.Contains(text[0], "preempted by "+high) || !strings.Contains(text[0], "work at risk") {
		t.Errorf("the preemption event reads %q; want who preempted it and the work at risk", text)
	}

	// The project filter hides the other project's events.
	do("filter the timeline", chromedp.SetValue(chromedp.CSS(`#event-filter`), "medium-priority-project"))
	eval[bool](t, bctx, `document.getElementById("event-filter").dispatchEvent(new Event("change"))`)
	others := eval[int](t, bctx, `document.querySelectorAll('#events li:not([data-workspace^="medium-priority-project/"])').length`)
	if others != 0 {
		t.Errorf("%d events of other projects shown with the filter on medium-priority-project", others)
	}

	// An invalid revision: the banner shows it refused, with file:line,
	// and the revision in force.
	write(t, dir, "broken.yaml", "apiVersion: berth.dev/v1\nkind: Project\nmetadata:\n  name: broken\nspec:\n  tier: hgih\n")
	until("the refused revision", time.Second, `!!document.getElementById("refused")`)
	if got := eval[string](t, bctx, `document.getElementById("revision").innerText`); !strings.Contains(got, "broken.yaml:6:") || !strings.Contains(got, "revision in force "+loop.Status().Revision.ID) {
		t.Errorf("revision banner %q: want the refused revision's error at broken.yaml:6 and the one in force", got)
	}

	// The workspace page: its history and the explanation.
	do("open the workspace page", chromedp.Click(chromedp.CSS(`#projects .ws[data-workspace="`+medium+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#ws-explain p`)))
	explain := eval[string](t, bctx, `document.getElementById("ws-explain").innerText`)
	rows := eval[int](t, bctx, `document.querySelectorAll('#ws-history tbody tr').length`)
	if !strings.Contains(explain, "preempted by "+high) || rows < 6 {
		t.Errorf("workspace page: %d history rows, explanation %q; want the 6 transitions and who preempted it", rows, explain)
	}
}

// browser starts headless Chromium (flags that let it run as root in a
// container and keep it off the network) with a fresh profile.
func browser(t *testing.T, ctx context.Context, exe string) context.Context {
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1000))
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	bctx, tcancel := context.WithTimeout(bctx, 90*time.Second)
	t.Cleanup(tcancel)
	return bctx
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("browser: evaluate %.80s: %v", expr, err)
	}
	return v
}

func subsequence(got []string, want ...string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// savePNG writes a screenshot under the test's temp dir and, when
// BERTH_SCREENSHOT_DIR is set (make screenshot), there too.
func savePNG(t *testing.T, name string, png []byte) {
	t.Helper()
	dirs := []string{t.TempDir()}
	if d := os.Getenv("BERTH_SCREENSHOT_DIR"); d != "" {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBrowserToken: behind a bearer token (berth beyond loopback) the
// page asks for it, then talks to the API and the feed with it; a token
// in the URL's fragment works too and leaves the address bar.
func TestBrowserToken(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end in a browser")
	}
	exe := chromium(t)
	dir := t.TempDir()
	for _, f := range []string{"tiers.yaml", "projects.yaml", "volume.yaml"} {
		copyFile(t, filepath.Join(example, f), filepath.Join(dir, f))
	}
	b, err := os.ReadFile(filepath.Join(example, "workspaces.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, "medium.yaml", strings.Split(string(b), "\n---\n")[0]+"\n")
	spec, err := sim.ReadFile(filepath.Join(example, "cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	clock := sim.NewManualClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	cluster := sim.New(*spec, clock)
	loop, err := reconcile.New(reconcile.Config{Source: source.DirSource{Dir: dir}, Cluster: cluster, Store: cluster})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := loop.Once(t.Context()); err != nil {
			t.Fatal(err)
		}
		clock.Advance(10 * time.Second)
	}
	const token = "a token/with+odd=chars 0123456789"
	srv := httptest.NewServer(api.RequireToken(api.Handler(loop, nil), token))
	defer srv.Close()

	bctx := browser(t, t.Context(), exe)
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.ID("login"))); err != nil {
		t.Fatalf("the page did not ask for a token: %v", err)
	}
	if err := chromedp.Do(bctx, chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Click(chromedp.CSS(`#login button`)),
		chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="live"]`)), chromedp.WaitVisible(chromedp.CSS(`#nodes .gpu[data-workspace="`+medium+`"]`))); err != nil {
		t.Fatalf("with the token typed in: %v", err)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/#/ws/"+medium), chromedp.WaitVisible(chromedp.CSS(`#ws-explain p`))); err != nil {
		t.Fatalf("workspace page with the token: %v", err)
	}

	// A fresh tab, the token in the fragment.
	tab, cancel := chromedp.NewContext(bctx)
	defer cancel()
	if err := chromedp.Do(tab, chromedp.Navigate(srv.URL+"/#token="+url.PathEscape(token)), chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="live"]`))); err != nil {
		t.Fatalf("token in the fragment: %v", err)
	}
	if href := eval[string](t, tab, `location.href`); strings.Contains(href, "token") {
		t.Errorf("the address bar still shows the token: %s", href)
	}
}
