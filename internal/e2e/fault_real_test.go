package e2e

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/internal/faultproxy"
	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/berth-dev/berth/reconcile"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/source"
	"github.com/berth-dev/berth/view"
	"github.com/hashicorp/nomad/api"
)

// Issue 14 sections 1 and 2 on a real Nomad (NOMAD_ADDR): berth's loop,
// as `berth reconcile` runs it (Run, with the driver's watch), talks to
// Nomad through a fault-injecting proxy. After each fault: no workspace
// duplicated (one job and at most one live allocation each), none lost
// (every workspace the specs want running runs).

// logBuffer is a log sink the loop writes to while the test reads.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type faultLoop struct {
	t     *testing.T
	c     *api.Client
	proxy *faultproxy.Proxy
	loop  *reconcile.Loop
	dir   string
	log   *logBuffer
	// changes tells Run the specs changed, as WatchDir would.
	changes chan struct{}
}

// Timings of the fault tests: short, so faults are cut and retried within
// a test; the backoff doubles from 1 s to 8 s.
const (
	faultRequestTimeout = 2 * time.Second
	faultBackoffMax     = 8 * time.Second
)

// newFaultLoop runs a loop over dir through a fault proxy until the test
// ends.
func newFaultLoop(t *testing.T) *faultLoop {
	c := realnomad.Client(t)
	p, err := faultproxy.New(os.Getenv("NOMAD_ADDR"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	cfg := nomad.ConfigFromEnv(p.URL())
	cfg.RequestTimeout, cfg.PlacementTimeout = faultRequestTimeout, 10*time.Second
	d := realnomad.NewDriver(t, cfg)
	f := &faultLoop{t: t, c: c, proxy: p, dir: t.TempDir(), log: &logBuffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	l, err := reconcile.New(reconcile.Config{
		Source: source.DirSource{Dir: f.dir}, Cluster: d, Store: d,
		Logger:   slog.New(slog.NewTextHandler(f.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Interval: 30 * time.Second, Settle: 500 * time.Millisecond, Debounce: 200 * time.Millisecond,
		BackoffMin: time.Second, BackoffMax: faultBackoffMax, CycleTimeout: 20 * time.Second,
		HealthMaxAge:   30 * time.Second,
		ClusterChanges: d.Watch(ctx),
	})
	if err != nil {
		t.Fatal(err)
	}
	f.loop = l
	f.write("tiers.yaml", realTiers)
	f.changes = make(chan struct{}, 1)
	done := make(chan error)
	go func() { done <- l.Run(ctx, f.changes) }()
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() {
			t.Logf("berth's log:\n%s", f.log.String())
		}
	})
	return f
}

func (f *faultLoop) write(name, text string) {
	f.t.Helper()
	if err := os.WriteFile(filepath.Join(f.dir, name), []byte(text), 0o644); err != nil {
		f.t.Fatal(err)
	}
	if f.changes != nil {
		select {
		case f.changes <- struct{}{}:
		default:
		}
	}
}

// waitRunning waits until the loop reports every workspace in names
// Running, and checks Nomad agrees: nothing duplicated, nothing lost.
func (f *faultLoop) waitRunning(within time.Duration, after string, names ...string) {
	f.t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok := true
		for _, n := range names {
			w, _ := f.loop.Workspace(schema.Ref{Project: "berth-real", Name: n})
			if w.Workspace.State != view.StateRunning {
				ok = false
			}
		}
		if ok && f.intact(names) == "" {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("after %s: %s not all running within %s; %s; status %+v", after, names, within, f.intact(names), f.loop.Status().Workspaces)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// quiet waits until the proxy has seen no METHOD request under prefix
// for d (at most 30 s).
func (f *faultLoop) quiet(method, prefix string, d time.Duration) {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for n := f.proxy.Count(method, prefix); ; {
		time.Sleep(d)
		m := f.proxy.Count(method, prefix)
		if m == n {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%s %s still busy after 30 s (%d requests)", method, prefix, m)
		}
		n = m
	}
}

// waitState waits until the loop reports name in state st.
func (f *faultLoop) waitState(within time.Duration, name string, st view.State) {
	f.t.Helper()
	deadline := time.Now().Add(within)
	for {
		w, _ := f.loop.Workspace(schema.Ref{Project: "berth-real", Name: name})
		if w.Workspace.State == st {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%s is %s, not %s, after %s", name, w.Workspace.State, st, within)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// intact returns "" when Nomad holds exactly the jobs of names, each
// with exactly one live allocation, else what is wrong.
func (f *faultLoop) intact(names []string) string {
	jobs, _, err := f.c.Jobs().List(&api.QueryOptions{Namespace: "berth-real"})
	if err != nil {
		return err.Error()
	}
	var got []string
	for _, j := range jobs {
		if j.Stop {
			continue
		}
		got = append(got, j.ID)
		stubs, _, err := f.c.Jobs().Allocations(j.ID, false, &api.QueryOptions{Namespace: "berth-real"})
		if err != nil {
			return err.Error()
		}
		live := 0
		for _, s := range stubs {
			if s.DesiredStatus == "run" && (s.ClientStatus == "running" || s.ClientStatus == "pending") {
				live++
			}
		}
		if live != 1 {
			return fmt.Sprintf("job %s has %d live allocations (duplicated or lost)", j.ID, live)
		}
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(names))
	if !slices.Equal(got, want) {
		return fmt.Sprintf("jobs %v, want %v (duplicated or lost)", got, want)
	}
	return ""
}

// TestRealHungRequestIsCut: Nomad's answer to the loop's next write of
// its history (a leader reads the history only after a break in its
// leadership, and the cluster comes from the event stream's cache once
// the loop follows it, so the history's saves are what every cycle that
// changes something still sends) never comes (a proxy holds it). The
// request is cut by the driver's request timeout, the log says what was
// cut, and the loop goes on: a spec change made while the request hung
// is applied.
func TestRealHungRequestIsCut(t *testing.T) {
	f := newFaultLoop(t)
	f.write("a.yaml", realWorkspace("a", 1, "sleep 3600"))
	f.waitRunning(30*time.Second, "start", "a")
	const history = "/v1/var/berth/state/history"
	f.proxy.Inject(faultproxy.Rule{Method: "PUT", Path: history, Fault: faultproxy.Hang, Times: 1})
	changed := time.Now()
	f.write("b.yaml", realWorkspace("b", 1, "sleep 3600")) // its cycle's save hangs
	f.waitRunning(60*time.Second, "a hung PUT "+history, "a", "b")
	t.Logf("a PUT %s hung; cut after %s; the spec change made meanwhile ran %s after it was made", history, faultRequestTimeout, time.Since(changed).Round(100*time.Millisecond))
	if !regexp.MustCompile(`no answer from Nomad to PUT ` + history + `\S* within 2s: cut \(request timeout\)`).MatchString(f.log.String()) {
		t.Errorf("the log does not say what was cut:\n%s", f.log.String())
	}
	if n := countFault(f.proxy, faultproxy.Hang); n != 1 {
		t.Errorf("%d requests hung, want 1", n)
	}
}

// countFault returns how many requests the proxy answered with fault.
func countFault(p *faultproxy.Proxy, fault faultproxy.Fault) int {
	n := 0
	for _, r := range p.Requests() {
		if r.Fault == fault {
			n++
		}
	}
	return n
}

// TestReal500EOFStartIsRetried: Nomad answers the start of a workspace
// with 500 "1 error occurred: rpc error: EOF" (an RPC cut inside Nomad).
// That is transient, not invalid: the start is retried and the workspace
// runs; it never shows Failed.
func TestReal500EOFStartIsRetried(t *testing.T) {
	f := newFaultLoop(t)
	f.proxy.Inject(faultproxy.Rule{Method: "PUT", Path: "/v1/jobs", Fault: faultproxy.Status, Status: 500,
		Body: "1 error occurred:\n\t* rpc error: EOF\n\n", Times: 1})
	written := time.Now()
	f.write("a.yaml", realWorkspace("a", 1, "sleep 3600"))
	f.waitRunning(30*time.Second, "a 500 rpc error: EOF on its register", "a")
	t.Logf("a start answered 500 rpc error: EOF: running %s after the spec was written", time.Since(written).Round(100*time.Millisecond))
	if n := countFault(f.proxy, faultproxy.Status); n != 1 {
		t.Fatalf("%d registers refused, want 1", n)
	}
	if n := f.proxy.Count("PUT", "/v1/jobs"); n != 2 {
		t.Errorf("%d registers, want the refused one and its retry", n)
	}
	w, _ := f.loop.Workspace(schema.Ref{Project: "berth-real", Name: "a"})
	for _, tr := range w.History {
		if tr.To == view.StateFailed {
			t.Errorf("a went Failed after a transient 500: %+v", tr)
		}
	}
	if !strings.Contains(f.log.String(), "failed (transient)") {
		t.Errorf("the log does not say the failure was transient:\n%s", f.log.String())
	}
}

// TestRealPersistentFailureBacksOff: Nomad answers every register with
// 409 for 20 s, while the cluster changes (another workspace starts and
// stops, the watch reports it). The start is retried as the log says:
// each retry no sooner than the time logged, the waits doubling to the
// backoff's maximum; the state Variable is not rewritten meanwhile. Once
// Nomad accepts again the workspace runs.
func TestRealPersistentFailureBacksOff(t *testing.T) {
	f := newFaultLoop(t)
	f.write("a.yaml", realWorkspace("a", 1, "sleep 3600"))
	f.waitRunning(30*time.Second, "start", "a")
	// The cycle that shows a Running saves the history after the status
	// says so: count the window's writes once that save is done.
	f.quiet("PUT", "/v1/var/", 2*time.Second)
	remove := f.proxy.Inject(faultproxy.Rule{Method: "PUT", Path: "/v1/jobs", Fault: faultproxy.Status, Status: 409,
		Body: "Conflict"})
	vars0, registers0 := f.proxy.Count("PUT", "/v1/var/"), f.proxy.Count("PUT", "/v1/jobs")
	f.write("b.yaml", realWorkspace("b", 1, "sleep 3600"))
	const window = 20 * time.Second
	time.Sleep(window)
	remove()
	registers := f.proxy.Count("PUT", "/v1/jobs") - registers0
	vars := f.proxy.Count("PUT", "/v1/var/") - vars0
	f.waitRunning(faultBackoffMax+30*time.Second, "20 s of 409s", "a", "b")
	// Doubling from 1 s: tries at 0, 1, 3, 7, 15 s into the window.
	t.Logf("in %s of 409s: %d registers, %d state writes", window, registers, vars)
	if registers > 5 {
		t.Errorf("%d registers in %s of 409s: the backoff (at 0, 1, 3, 7, 15 s) allows 5", registers, window)
	}
	if vars > 2 {
		t.Errorf("%d state writes in %s while nothing changed", vars, window)
	}
	// Each retry no sooner than the log said, at WARN.
	var at, due []time.Time
	for _, line := range strings.Split(f.log.String(), "\n") {
		if !strings.Contains(line, "start of berth-real/b failed") {
			continue
		}
		if !strings.Contains(line, "level=WARN") {
			t.Errorf("a failed start not logged as a warning: %s", line)
		}
		var ts, retry string
		for _, field := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(field, "time="); ok {
				ts = v
			}
			if v, ok := strings.CutPrefix(field, "retry="); ok {
				retry = v
			}
		}
		tm, err1 := time.Parse(time.RFC3339Nano, ts)
		r, err2 := time.Parse(time.TimeOnly, retry)
		if err1 != nil || err2 != nil {
			t.Fatalf("cannot read the failed start's line: %s", line)
		}
		at = append(at, tm)
		due = append(due, time.Date(tm.Year(), tm.Month(), tm.Day(), r.Hour(), r.Minute(), r.Second(), 0, tm.Location()))
	}
	if len(at) < 4 {
		t.Fatalf("%d failed starts logged, want the backoff's 4 or more", len(at))
	}
	for i := 1; i < len(at); i++ {
		if at[i].Before(due[i-1]) {
			t.Errorf("attempt %d at %s, before the retry time the log gave, %s", i+1, at[i].Format(time.TimeOnly+".000"), due[i-1].Format(time.TimeOnly))
		}
	}
}

// TestRealFaultsLeaveNothingDuplicatedOrLost: one fault after another
// while the specs change; after each, every workspace the specs want
// running runs, once: a register whose answer is lost after Nomad applied
// it, a stop whose connection is reset after Nomad applied it, resets of
// reads, 5xx on the observation, 409 on the state Variable, and a
// partition of 5 s during which a workspace is added.
func TestRealFaultsLeaveNothingDuplicatedOrLost(t *testing.T) {
	f := newFaultLoop(t)
	f.write("a.yaml", realWorkspace("a", 1, "sleep 3600"))
	f.write("b.yaml", realWorkspace("b", 1, "sleep 3600"))
	f.waitRunning(30*time.Second, "start", "a", "b")
	within := faultBackoffMax + 30*time.Second
	faults := 0
	inject := func(r faultproxy.Rule) {
		f.proxy.Inject(r)
		faults += r.Times
	}

	// 1. Nomad registers c; berth never hears.
	inject(faultproxy.Rule{Method: "PUT", Path: "/v1/jobs", Fault: faultproxy.LoseResponse, Times: 1})
	f.write("c.yaml", realWorkspace("c", 1, "sleep 3600"))
	f.waitRunning(within, "a lost register answer", "a", "b", "c")

	// 2. Nomad stops b; the connection is reset before berth hears. Reads
	// of jobs are reset twice too.
	inject(faultproxy.Rule{Method: "DELETE", Path: "/v1/job/b", Fault: faultproxy.LoseResponse, Times: 1})
	inject(faultproxy.Rule{Method: "GET", Path: "/v1/job/", Fault: faultproxy.Reset, Times: 2})
	f.write("b.yaml", strings.Replace(realWorkspace("b", 1, "sleep 3600"), "state: Running", "state: Stopped", 1))
	f.waitRunning(within, "a lost stop answer and reset reads", "a", "c")
	f.waitState(within, "b", view.StateStopped)
	if w, _ := f.loop.Workspace(schema.Ref{Project: "berth-real", Name: "b"}); slices.ContainsFunc(w.History, func(tr view.Transition) bool { return tr.To == view.StateFailed }) {
		t.Errorf("b went Failed when berth stopped it and the answer was lost: %+v", w.History)
	}

	// 3. The cluster's reads fail with 500 three times (whenever the loop
	// next reads the cluster whole: once it follows the event stream,
	// after the partition below at the latest); the state Variable's
	// writes are refused with 409 twice.
	inject(faultproxy.Rule{Method: "GET", Path: "/v1/nodes", Fault: faultproxy.Status, Status: 500, Body: "rpc error: No cluster leader", Times: 3})
	inject(faultproxy.Rule{Method: "PUT", Path: "/v1/var/", Fault: faultproxy.Status, Status: 409, Body: "{}", Times: 2})
	f.write("d.yaml", realWorkspace("d", 1, "sleep 3600"))
	f.waitRunning(within, "5xx observations and 409 state writes", "a", "c", "d")

	// 4. A partition: nothing answers for 5 s; e is added meanwhile.
	f.proxy.Partition(5 * time.Second)
	faults++
	f.write("e.yaml", realWorkspace("e", 1, "sleep 3600"))
	f.waitRunning(within, "a 5 s partition", "a", "c", "d", "e")
	hist, _, err := f.c.Variables().Peek("berth/state/history", nil)
	if err != nil || hist == nil {
		t.Errorf("the state Variable after the faults: %v, %v", hist, err)
	}
	t.Logf("%d faults injected (%d requests faulted, %d seen); 0 duplicated, 0 lost", faults, len(f.proxy.Requests())-countFault(f.proxy, 0), len(f.proxy.Requests()))
}

// TestRealLongPartition: nothing answers for 45 s (2 minutes with
// BERTH_LONG_PARTITION=1, the figure). Every request is cut at its
// deadline, cycles back off (to 8 s here), /healthz turns
// stale once no cycle has succeeded for HealthMaxAge (30 s here), and a
// workspace added meanwhile runs soon after the partition ends, with
// nothing duplicated or lost; /healthz is ok again.
func TestRealLongPartition(t *testing.T) {
	f := newFaultLoop(t)
	f.write("a.yaml", realWorkspace("a", 1, "sleep 3600"))
	f.waitRunning(30*time.Second, "start", "a")
	// Past HealthMaxAge (30 s) and several backoffs: long enough to go
	// stale and recover; make e2e keeps to it.
	partition := 45 * time.Second
	if os.Getenv("BERTH_LONG_PARTITION") != "" {
		partition = 2 * time.Minute
	}
	f.proxy.Partition(partition)
	start := time.Now()
	f.write("b.yaml", realWorkspace("b", 1, "sleep 3600"))
	for f.loop.Health().Status != view.HealthStale {
		if time.Since(start) > partition {
			t.Fatalf("/healthz still ok after %s of partition", partition)
		}
		time.Sleep(time.Second)
	}
	stale := time.Since(start)
	time.Sleep(time.Until(start.Add(partition)))
	f.waitRunning(faultBackoffMax+30*time.Second, "a "+partition.String()+" partition", "a", "b")
	if h := f.loop.Health(); h.Status != view.HealthOK {
		t.Errorf("/healthz after the partition: %+v", h)
	}
	cut := strings.Count(f.log.String(), "cut (request timeout)")
	t.Logf("a %s partition: /healthz stale after %s, %d requests cut, b running %s after the partition ended; 0 duplicated, 0 lost",
		partition, stale.Round(time.Second), cut, time.Since(start.Add(partition)).Round(100*time.Millisecond))
}
