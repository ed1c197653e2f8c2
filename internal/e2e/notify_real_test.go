package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/berth-dev/berth/notify"
	"github.com/berth-dev/berth/reconcile"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/source"
	"github.com/hashicorp/nomad/api"
	"github.com/prometheus/client_golang/prometheus"
)

// Notifications on a real Nomad (issue 38, item 4): a webhook receiver
// gets the revision applied, a preemption, a move off a drained node and
// a refused revision, each signed and verified; a receiver that is down,
// and one that answers far slower than a cycle, delay no cycle.

const notifySpecs = `apiVersion: berth.dev/v1
kind: PriorityTier
metadata: {name: low}
spec: {value: 20}
---
apiVersion: berth.dev/v1
kind: PriorityTier
metadata: {name: high}
spec: {value: 80}
---
apiVersion: berth.dev/v1
kind: Project
metadata: {name: berth-real}
spec:
  tier: low
  quota: {gpus: 8}
---
apiVersion: berth.dev/v1
kind: Notification
metadata: {name: e2e-hook}
spec:
  format: webhook
  url: {env: BERTH_E2E_HOOK_URL}
  secret: {env: BERTH_E2E_HOOK_KEY}
  summarizeAbove: 20
`

const hookKey = "e2e-signing-key-0123456789abcdef"

// receiver is a webhook receiver that verifies every delivery's
// signature and keeps the events.
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	events []notify.Event
	bad    []string
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{t: t}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if err := notify.Verify([]byte(hookKey), body, req.Header.Get(notify.SignatureHeader), time.Now(), 5*time.Minute); err != nil {
			r.bad = append(r.bad, err.Error())
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var p notify.Payload
		if err := json.Unmarshal(body, &p); err != nil || p.Version != notify.PayloadVersion || p.Notifier != "e2e-hook" {
			r.bad = append(r.bad, fmt.Sprintf("payload %s: %v", body, err))
			http.Error(w, "bad payload", http.StatusBadRequest)
			return
		}
		r.events = append(r.events, p.Events...)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// got returns the first event named event (of workspace ws, when given).
func (r *receiver) got(event, ws string) (notify.Event, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e.Event == event && (ws == "" || e.Workspace == ws) {
			return e, true
		}
	}
	return notify.Event{}, false
}

// TestRealNotify: the events reach a webhook signed, with the reason
// berth wrote and what happens next, and the receiver's health does not
// change the loop's cycle time.
func TestRealNotify(t *testing.T) {
	hook := newReceiver(t)
	t.Setenv("BERTH_E2E_HOOK_URL", hook.srv.URL+"/hook")
	t.Setenv("BERTH_E2E_HOOK_KEY", hookKey)
	reg := prometheus.NewRegistry()
	n, err := notify.New(notify.Config{Cluster: "e2e", Timeout: 2 * time.Second, Attempts: 3, BackoffMin: 200 * time.Millisecond, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	nctx, stop := context.WithCancel(context.Background())
	defer stop()
	go n.Run(nctx)

	c := realnomad.Client(t)
	d := realnomad.NewDriver(t, nomad.ConfigFromEnv(""))
	dir := t.TempDir()
	l, err := reconcile.New(reconcile.Config{Source: source.DirSource{Dir: dir}, Cluster: d, Store: d, News: n.News})
	if err != nil {
		t.Fatal(err)
	}
	r := &realLoop{t: t, c: c, d: d, loop: l, dir: dir}
	waitHook := func(what, event, ws string) notify.Event {
		t.Helper()
		var e notify.Event
		r.until(60*time.Second, what, func() bool {
			var ok bool
			e, ok = hook.got(event, ws)
			return ok
		})
		return e
	}

	// 1. The revision in force, and two low-tier workspaces filling the
	// cluster's eight GPUs.
	r.write("specs.yaml", notifySpecs)
	r.write("a.yaml", realWorkspace("a", 4, "sleep 3600"))
	r.write("b.yaml", realWorkspace("b", 4, "sleep 3600"))
	r.until(60*time.Second, "a and b run", r.running("a", "b"))
	applied := waitHook("revision applied told", schema.EventRevisionApplied, "")
	if applied.Revision == "" || applied.Next != "berth applies it to the cluster" {
		t.Errorf("revision applied: %+v", applied)
	}

	// 2. A high-tier workspace preempts one of them.
	r.write("c.yaml", strings.Replace(realWorkspace("c", 4, "sleep 3600"), "state: Running", "state: Running\n  tier: high", 1))
	pre := waitHook("preemption told", schema.EventPreempted, "")
	if pre.PreemptedBy != "berth-real/c" || pre.Project != "berth-real" || !strings.Contains(pre.Reason, "berth-real/c") ||
		!strings.Contains(pre.Next, "to checkpoint") || pre.Seq == 0 {
		t.Errorf("preemption: %+v", pre)
	}
	r.until(60*time.Second, "c runs", r.running("c"))

	// 3. Drain the node that runs c: it moves.
	from := r.state("c").Node
	id := realnomad.NodeIDs(t, c)[from]
	t.Cleanup(func() {
		if _, err := c.Nodes().UpdateDrain(id, nil, true, nil); err != nil {
			t.Errorf("end the drain of %s: %v", from, err)
		}
	})
	if _, err := c.Nodes().UpdateDrain(id, &api.DrainSpec{Deadline: 30 * time.Second}, false, nil); err != nil {
		t.Fatal(err)
	}
	moved := waitHook("move told", schema.EventMoved, "berth-real/c")
	if !strings.Contains(moved.Reason, "node "+from+" is draining") || moved.Node != from || !strings.Contains(moved.Next, "starts again elsewhere") {
		t.Errorf("move: %+v", moved)
	}

	// 4. A broken revision is refused, with its errors.
	r.write("broken.yaml", strings.Replace(realWorkspace("d", 1, "true"), "gpus: 1", "gpus: -1", 1))
	refused := waitHook("refusal told", schema.EventRevisionRefused, "")
	if len(refused.Errors) == 0 || !strings.Contains(refused.Errors[0], "broken.yaml:") {
		t.Errorf("refusal: %+v", refused)
	}
	r.write("broken.yaml", "# fixed\n")
	if _, err := c.Nodes().UpdateDrain(id, nil, true, nil); err != nil {
		t.Fatal(err)
	}
	hook.mu.Lock()
	if len(hook.bad) > 0 {
		t.Errorf("deliveries the receiver refused: %v", hook.bad)
	}
	hook.mu.Unlock()

	// 5. Cycle times with a receiver that answers, one that is down, and
	// one that sleeps a minute (far past the 2s request timeout and a
	// cycle): each cycle puts a new revision in force, so each tells.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + dead.Addr().String() + "/hook"
	dead.Close()
	slowDone := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case <-time.After(time.Minute):
		case <-slowDone:
		}
	}))
	defer slow.Close()
	defer close(slowDone)
	rev := 0
	cycles := func(url string) (median, worst time.Duration) {
		t.Setenv("BERTH_E2E_HOOK_URL", url) // read at each delivery
		var ds []time.Duration
		for range 7 {
			rev++
			r.write("touch.yaml", fmt.Sprintf("# revision %d\n", rev))
			start := time.Now()
			if _, err := l.Once(ctx); err != nil {
				t.Logf("cycle: %v", err)
			}
			ds = append(ds, time.Since(start))
			time.Sleep(300 * time.Millisecond)
		}
		slices.Sort(ds)
		return ds[len(ds)/2], ds[len(ds)-1]
	}
	r.until(60*time.Second, "c runs again", r.running("c"))
	baseMed, baseWorst := cycles(hook.srv.URL + "/hook")
	deadMed, deadWorst := cycles(deadURL)
	slowMed, slowWorst := cycles(slow.URL + "/hook")
	realnomad.Report(t, "notify: cycle median/worst with a receiver that answers %s/%s, down %s/%s, sleeping 60s %s/%s",
		baseMed.Round(time.Millisecond), baseWorst.Round(time.Millisecond), deadMed.Round(time.Millisecond), deadWorst.Round(time.Millisecond),
		slowMed.Round(time.Millisecond), slowWorst.Round(time.Millisecond))
	limit := 2*baseMed + 250*time.Millisecond
	for name, m := range map[string]time.Duration{"down": deadMed, "slow": slowMed} {
		if m > limit {
			t.Errorf("with a receiver %s the median cycle took %s, against %s with one that answers", name, m, baseMed)
		}
	}
	if slowWorst > 2*time.Second {
		t.Errorf("a cycle took %s while the receiver slept: the loop waited for it", slowWorst)
	}
	// The down and slow receivers' deliveries were tried again, and
	// counted, off the loop.
	if got := counterSum(t, reg, "berth_notification_retries_total"); got == 0 {
		t.Errorf("no retry counted for the receivers that were down or slow")
	}
	if got := counterSum(t, reg, "berth_notifications_sent_total"); got < 4 {
		t.Errorf("%v deliveries counted sent, want at least 4", got)
	}
}

// counterSum is the sum of a counter's series in reg.
func counterSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
