package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/berth-dev/berth/leader"
	"github.com/berth-dev/berth/reconcile"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/source"
	"github.com/berth-dev/berth/view"
	"github.com/hashicorp/nomad/api"
)

// Issue 14 §3 on a real Nomad: replicas of berth (in-process loops, each
// with its own driver, elector and a proxy to Nomad that records its
// writes) drive one cluster while the leader is killed at random moments,
// the specs change and preemptions happen. Never two writers, a hand-over
// within one lease TTL, no record lost.
//
// BERTH_REAL_LEADER_KILLS sets how many leaders are killed before the
// last one (default 6: about 55 s; 20: about 2.5 min).

const leaderTTL = 5 * time.Second

const leaderSpecs = `apiVersion: berth.dev/v1
kind: PriorityTier
metadata: {name: low}
spec: {value: 20, preemptible: true}
---
apiVersion: berth.dev/v1
kind: PriorityTier
metadata: {name: high}
spec: {value: 80, preemptible: false, canPreempt: true}
---
apiVersion: berth.dev/v1
kind: Project
metadata: {name: berth-leader}
spec:
  tier: low
  quota: {gpus: 4}
  borrowLimit: {gpus: 4}
---
apiVersion: berth.dev/v1
kind: Project
metadata: {name: berth-leader-hi}
spec:
  tier: high
  quota: {gpus: 4}
`

func leaderWorkspace(name, project, state string, gpus int) string {
	return fmt.Sprintf(`---
apiVersion: berth.dev/v1
kind: Workspace
metadata: {name: %s, project: %s}
spec:
  state: %s
  task: {driver: raw_exec, command: /bin/sleep, args: ["3600"]}
  resources: {gpus: %d, memory: 16Mi}
  checkpoint: {signal: SIGTERM, gracePeriod: 1s}
`, name, project, state, gpus)
}

// leaderSpecFile is the workspaces: four low ones of 2 GPUs fill the 8
// GPUs, half of them borrowed; hi, of 4 GPUs in a project of a higher
// tier, preempts two of them while it runs. n makes each
// revision new.
func leaderSpecFile(hiRunning bool, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# revision %d\n", n)
	for i := range 4 {
		b.WriteString(leaderWorkspace("low-"+strconv.Itoa(i), "berth-leader", "Running", 2))
	}
	st := "Stopped"
	if hiRunning {
		st = "Running"
	}
	b.WriteString(leaderWorkspace("hi", "berth-leader-hi", st, 4))
	return b.String()
}

// nomadWrite is one write a replica sent to Nomad through its proxy.
type nomadWrite struct {
	at       time.Time
	replica  string
	method   string
	path     string
	status   int
	job, rev string // a job registration's job ID and berth revision
}

type writeLog struct {
	mu sync.Mutex
	ws []nomadWrite
}

func (l *writeLog) add(w nomadWrite) {
	l.mu.Lock()
	l.ws = append(l.ws, w)
	l.mu.Unlock()
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

// writeProxy returns a proxy to Nomad that records the writes (every
// method but GET) of replica id, other than to the lease.
func writeProxy(target *url.URL, tr http.RoundTripper, id, leasePath string, log *writeLog) *httptest.Server {
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = tr
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.URL.Path == "/v1/var/"+leasePath {
			rp.ServeHTTP(w, r)
			return
		}
		rec := nomadWrite{at: time.Now(), replica: id, method: r.Method, path: r.URL.Path}
		if r.URL.Path == "/v1/jobs" {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var req api.JobRegisterRequest
			if json.Unmarshal(body, &req) == nil && req.Job != nil && req.Job.ID != nil {
				rec.job, rec.rev = *req.Job.ID, req.Job.Meta[nomad.MetaRevision]
			}
		}
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		rp.ServeHTTP(sw, r)
		rec.status = sw.code
		log.add(rec)
	}))
}

type leaderReplica struct {
	id     string
	el     *leader.Elector
	loop   *reconcile.Loop
	d      *nomad.Driver
	proxy  *httptest.Server
	cancel context.CancelFunc
	done   sync.WaitGroup
	killed atomic.Bool
}

// kill stops the replica as a crash would: its requests are cut off
// mid-flight and it does not release the lease.
func (r *leaderReplica) kill() {
	r.killed.Store(true)
	r.cancel()
	r.proxy.CloseClientConnections()
	r.done.Wait()
	r.proxy.Close()
	r.d.Close()
}

func TestRealLeaderElection(t *testing.T) {
	c := realnomad.Client(t)
	kills := 6
	if s := os.Getenv("BERTH_REAL_LEADER_KILLS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("BERTH_REAL_LEADER_KILLS=%q: want a count", s)
		}
		kills = n
	}
	target, err := url.Parse(os.Getenv("NOMAD_ADDR"))
	if err != nil {
		t.Fatal(err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.IdleConnTimeout = 5 * time.Second
	defer tr.CloseIdleConnections()
	const leasePath = "berth/state/leader"

	dir := t.TempDir()
	rev := 0
	setSpecs := func(hi bool) {
		rev++
		write(t, dir, "tiers.yaml", leaderSpecs)
		tmp := filepath.Join(dir, ".ws.tmp")
		if err := os.WriteFile(tmp, []byte(leaderSpecFile(hi, rev)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "workspaces.yaml")); err != nil {
			t.Fatal(err)
		}
	}
	setSpecs(false)

	// The replicas' logs show with a failure (or -v).
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	var (
		log      writeLog
		mu       sync.Mutex
		replicas []*leaderReplica
	)
	start := func() *leaderReplica {
		id := fmt.Sprintf("replica-%d", len(replicas)+1)
		r := &leaderReplica{id: id}
		r.proxy = writeProxy(target, tr, id, leasePath, &log)
		r.d = realnomad.NewDriver(t, nomad.Config{Address: r.proxy.URL, LeasePath: leasePath})
		r.el = leader.NewElector(r.d, id, leaderTTL, logger)
		r.loop, err = reconcile.New(reconcile.Config{Logger: logger, Source: source.DirSource{Dir: dir}, Cluster: r.d, Store: r.d, Leader: r.el,
			Interval: time.Second, Settle: 500 * time.Millisecond, BackoffMin: 200 * time.Millisecond, BackoffMax: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(context.Background())
		r.cancel = cancel
		r.done.Add(2)
		go func() { defer r.done.Done(); r.el.Run(rctx) }()
		go func() { defer r.done.Done(); r.loop.Run(rctx, r.el.Changes()) }()
		mu.Lock()
		replicas = append(replicas, r)
		mu.Unlock()
		return r
	}
	defer func() {
		mu.Lock()
		rs := slices.Clone(replicas)
		mu.Unlock()
		for _, r := range rs {
			if !r.killed.Load() {
				r.kill()
			}
		}
	}()

	// The monitor: at every look, how many replicas (the killed ones
	// too: a paused process could wake) lead, and since when each leads.
	leadingSince := map[string]time.Time{}
	most := 0
	stopMonitor := make(chan struct{})
	var monitorDone sync.WaitGroup
	monitorDone.Add(1)
	go func() {
		defer monitorDone.Done()
		for {
			select {
			case <-stopMonitor:
				return
			case <-time.After(20 * time.Millisecond):
			}
			mu.Lock()
			n := 0
			for _, r := range replicas {
				if r.el.Leading() {
					n++
					if _, ok := leadingSince[r.id]; !ok {
						leadingSince[r.id] = time.Now()
					}
				}
			}
			most = max(most, n)
			mu.Unlock()
		}
	}()
	leader := func() *leaderReplica {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range replicas {
			if !r.killed.Load() && r.el.Leading() {
				return r
			}
		}
		return nil
	}
	since := func(r *leaderReplica) time.Time {
		mu.Lock()
		defer mu.Unlock()
		return leadingSince[r.id]
	}
	waitFor := func(within time.Duration, what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(within)
		for !ok() {
			if time.Now().After(deadline) {
				var st any
				if l := leader(); l != nil {
					st = l.loop.Status().Workspaces
				}
				t.Fatalf("%s: not within %s; the leader's status %+v", what, within, st)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	states := func(r *leaderReplica) map[string]view.WorkspaceStatus {
		out := map[string]view.WorkspaceStatus{}
		for _, w := range r.loop.Status().Workspaces {
			out[w.Name] = w
		}
		return out
	}
	count := func(r *leaderReplica, st view.State) (n int) {
		for _, w := range states(r) {
			if w.State == st {
				n++
			}
		}
		return n
	}

	for range 3 {
		start()
	}
	waitFor(60*time.Second, "one leader and the four low workspaces running", func() bool {
		l := leader()
		return l != nil && count(l, view.StateRunning) == 4
	})

	// 1. Kill the leader at random moments while hi comes and goes.
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 14))
	stopChanges := make(chan struct{})
	var changesDone sync.WaitGroup
	changesDone.Add(1)
	hi := false
	go func() {
		defer changesDone.Done()
		for {
			select {
			case <-stopChanges:
				return
			case <-time.After(time.Duration(2000+rng.IntN(3000)) * time.Millisecond):
			}
			hi = !hi
			setSpecs(hi)
		}
	}()
	var handovers []time.Duration
	for k := range kills {
		time.Sleep(time.Duration(500+rand.IntN(3500)) * time.Millisecond)
		old := leader()
		if old == nil {
			waitFor(2*leaderTTL, "a leader", func() bool { return leader() != nil })
			old = leader()
		}
		killedAt := time.Now()
		old.kill()
		start()
		waitFor(3*leaderTTL, fmt.Sprintf("kill %d: a new leader", k+1), func() bool { l := leader(); return l != nil && !since(l).IsZero() })
		handovers = append(handovers, since(leader()).Sub(killedAt))
	}
	close(stopChanges)
	changesDone.Wait()

	// 2. hi runs: two low workspaces are preempted; the leader that
	// preempted them is killed once they are, and its successor still
	// shows them Preempted by hi (the record is in Nomad).
	setSpecs(true)
	waitFor(60*time.Second, "hi running, two low workspaces preempted", func() bool {
		l := leader()
		return l != nil && states(l)["hi"].State == view.StateRunning && count(l, view.StatePreempted) == 2
	})
	old := leader()
	killedAt := time.Now()
	old.kill()
	start()
	waitFor(3*leaderTTL, "a leader after the last kill", func() bool { l := leader(); return l != nil && !since(l).IsZero() })
	handovers = append(handovers, since(leader()).Sub(killedAt))
	next := leader()
	time.Sleep(3 * time.Second) // a few cycles of the new leader
	for name, w := range states(next) {
		if !strings.HasPrefix(name, "low-") || w.State == view.StateRunning {
			continue
		}
		if w.State != view.StatePreempted || w.PreemptedBy == nil || w.PreemptedBy.Name != "hi" {
			t.Errorf("after the hand-over %s is %s (by %v), want Preempted by hi", name, w.State, w.PreemptedBy)
		}
		d, _ := next.loop.Workspace(schema.Ref{Project: "berth-leader", Name: name})
		if !slices.ContainsFunc(d.History, func(tr view.Transition) bool { return tr.To == view.StatePreempting }) {
			t.Errorf("%s's history after the hand-over has no preemption: %+v", name, d.History)
		}
	}
	if n := count(next, view.StatePreempted); n != 2 {
		t.Errorf("after the hand-over %d workspaces are Preempted, want 2: %+v", n, next.loop.Status().Workspaces)
	}
	// No GPU held twice.
	snap, err := next.d.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]string{}
	for _, a := range snap.Allocs {
		for _, g := range a.GPUs {
			if other, dup := held[g]; dup {
				t.Errorf("GPU %s is held by %s and %s", g, other, a.Workspace)
			}
			held[g] = a.Workspace.String()
		}
	}
	close(stopMonitor)
	monitorDone.Wait()

	// 3. Never two writers: each replica's writes form one run, and no
	// two replicas led at once.
	if most > 1 {
		t.Errorf("%d replicas led at once", most)
	}
	log.mu.Lock()
	ws := slices.Clone(log.ws)
	log.mu.Unlock()
	slices.SortStableFunc(ws, func(a, b nomadWrite) int { return a.at.Compare(b.at) })
	done := map[string]bool{}
	prev := ""
	for _, w := range ws {
		if w.replica != prev {
			if done[w.replica] {
				t.Errorf("%s wrote again (%s %s at %s) after another replica had written", w.replica, w.method, w.path, w.at.Format("15:04:05.000"))
			}
			if prev != "" {
				done[prev] = true
			}
			prev = w.replica
		}
	}
	// Registrations per workspace and revision: each at most once.
	regs := map[string][]string{}
	registered := 0
	for _, w := range ws {
		if w.job != "" && w.status == http.StatusOK {
			key := w.job + "@" + w.rev
			regs[key] = append(regs[key], w.replica)
			registered++
		}
	}
	for key, by := range regs {
		if len(by) > 1 {
			t.Errorf("%s registered %d times (by %v)", key, len(by), by)
		}
	}

	// The figures.
	slices.Sort(handovers)
	if worst := handovers[len(handovers)-1]; worst > leaderTTL+500*time.Millisecond {
		t.Errorf("the slowest hand-over took %s; the lease's TTL is %s", worst, leaderTTL)
	}
	size := 0
	vars, _, err := c.Variables().PrefixList("berth/state/history", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range vars {
		v, _, err := c.Variables().Read(m.Path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, s := range v.Items {
			size += len(k) + len(s)
		}
	}
	t.Logf("%d leaders killed (TTL %s): hand-over min %s, median %s, max %s; %d revisions; %d writes to Nomad by %d replicas, %d job registrations (none twice); history %d bytes in %d Variables",
		len(handovers), leaderTTL, handovers[0].Round(time.Millisecond), handovers[len(handovers)/2].Round(time.Millisecond),
		handovers[len(handovers)-1].Round(time.Millisecond), rev, len(ws), len(replicas), registered, size, len(vars))
}
