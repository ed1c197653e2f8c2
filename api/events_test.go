package api

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/reconcile"
	"github.com/berth-dev/berth/source"
	"github.com/berth-dev/berth/view"
	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"
)

const (
	mediumRef = "medium-priority-project/medium-training"
	highRef   = "high-priority-project/high-training"
)

// dash is the walk-through on the simulated cluster, driven one cycle at
// a time (Once) with a manual clock, served over HTTP.
type dash struct {
	t       *testing.T
	dir     string
	clock   *sim.ManualClock
	cfg     reconcile.Config
	loop    *reconcile.Loop
	srv     *httptest.Server
	highDoc string
}

func newDash(t *testing.T, clusterYAML string) *dash {
	t.Helper()
	const example = "../examples/walkthrough"
	d := &dash{t: t, dir: t.TempDir(), clock: sim.NewManualClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))}
	for _, f := range []string{"tiers.yaml", "projects.yaml", "volume.yaml"} {
		b, err := os.ReadFile(filepath.Join(example, f))
		if err != nil {
			t.Fatal(err)
		}
		d.write(f, string(b))
	}
	b, err := os.ReadFile(filepath.Join(example, "workspaces.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(b), "\n---\n")
	d.write("medium.yaml", docs[0]+"\n")
	d.highDoc = docs[1]
	if clusterYAML == "" {
		b, err := os.ReadFile(filepath.Join(example, "cluster.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		clusterYAML = string(b)
	}
	spec, err := sim.Parse([]byte(clusterYAML))
	if err != nil {
		t.Fatal(err)
	}
	c := sim.New(*spec, d.clock)
	d.cfg = reconcile.Config{Source: source.DirSource{Dir: d.dir}, Cluster: c, Store: c, ClusterName: spec.Name}
	d.loop, err = reconcile.New(d.cfg)
	if err != nil {
		t.Fatal(err)
	}
	d.srv = httptest.NewServer(Handler(d.loop, nil))
	t.Cleanup(d.srv.Close)
	return d
}

func (d *dash) write(name, content string) {
	d.t.Helper()
	if err := os.WriteFile(filepath.Join(d.dir, name), []byte(content), 0o644); err != nil {
		d.t.Fatal(err)
	}
}

// cycle advances the clock by step and runs one cycle.
func (d *dash) cycle(step time.Duration) {
	d.t.Helper()
	d.clock.Advance(step)
	if _, err := d.loop.Once(context.Background()); err != nil {
		d.t.Fatal(err)
	}
}

func (d *dash) dial(opts *websocket.DialOptions) *websocket.Conn {
	d.t.Helper()
	if opts == nil {
		opts = &websocket.DialOptions{}
	}
	opts.Subprotocols = []string{view.Subprotocol}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(d.srv.URL, "http")+"/api/v1/events", opts)
	if err != nil {
		d.t.Fatal(err)
	}
	c.SetReadLimit(64 << 20)
	d.t.Cleanup(func() { c.CloseNow() })
	return c
}

func read(t *testing.T, c *websocket.Conn) view.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, b, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var m view.Message
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return m
}

// apply is what the browser does with a delta (app.js applyDelta).
func apply(s *view.Dashboard, d *view.Delta) {
	s.At, s.Revision, s.Attempted, s.LastReconcile = d.At, d.Revision, d.Attempted, d.LastReconcile
	for _, n := range d.Nodes {
		i := slices.IndexFunc(s.Nodes, func(o view.NodeView) bool { return o.Name == n.Name })
		if i < 0 {
			s.Nodes = append(s.Nodes, n)
		} else {
			s.Nodes[i] = n
		}
	}
	s.Nodes = slices.DeleteFunc(s.Nodes, func(n view.NodeView) bool { return slices.Contains(d.RemovedNodes, n.Name) })
	for _, w := range d.Workspaces {
		i := slices.IndexFunc(s.Workspaces, func(o view.WorkspaceStatus) bool { return o.Ref() == w.Ref() })
		if i < 0 {
			s.Workspaces = append(s.Workspaces, w)
		} else {
			s.Workspaces[i] = w
		}
	}
	s.Workspaces = slices.DeleteFunc(s.Workspaces, func(w view.WorkspaceStatus) bool { return slices.Contains(d.RemovedWorkspaces, w.Ref().String()) })
	slices.SortFunc(s.Workspaces, func(a, b view.WorkspaceStatus) int { return strings.Compare(a.Ref().String(), b.Ref().String()) })
	if d.Projects != nil {
		s.Projects = *d.Projects
	}
	if d.Queue != nil {
		s.Queue, s.QueueTotal = *d.Queue, *d.QueueTotal
	}
	s.WorkspacesTotal = d.WorkspacesTotal
	s.Events = append(s.Events, d.Events...)
}

func TestEventsStateThenDeltasInOrder(t *testing.T) {
	d := newDash(t, "")
	d.cycle(0)
	d.cycle(5 * time.Second) // medium runs
	c := d.dial(nil)
	first := read(t, c)
	if first.Type != "state" || first.State == nil {
		t.Fatalf("first message %q, want the state", first.Type)
	}
	s := *first.State
	if len(s.Nodes) != 1 || s.Nodes[0].GPUs[0].Workspace != mediumRef || s.Nodes[0].GPUs[0].Phase != "running" {
		t.Errorf("initial nodes %+v: want gpu-node's GPU held by %s, running", s.Nodes, mediumRef)
	}
	if got := eventPath(s.Events, mediumRef); !slices.Equal(got, []string{"→Starting", "Starting→Running"}) {
		t.Errorf("initial events of medium: %v", got)
	}

	// The walk-through, one cycle at a time: every cycle is one delta, in
	// order, and applying them gives what a new browser gets.
	seq := first.Seq
	step := func(by time.Duration) {
		d.cycle(by)
		m := read(t, c)
		if m.Type != "delta" || m.Seq != seq+1 {
			t.Fatalf("message %q seq %d after seq %d; want the next delta", m.Type, m.Seq, seq)
		}
		seq = m.Seq
		apply(&s, m.Delta)
	}
	step(15 * time.Minute) // past its checkpoint at 10m
	d.write("high.yaml", d.highDoc)
	step(time.Second) // medium preempted, high waits for it
	if i := slices.IndexFunc(s.Queue, func(q view.QueueEntry) bool { return q.Workspace == highRef }); i < 0 || s.Queue[i].EstimatedStart == nil {
		t.Errorf("queue %+v: want %s with an estimated start (medium's grace ends)", s.Queue, highRef)
	} else if want := s.At.Add(30 * time.Second); !s.Queue[i].EstimatedStart.Equal(want) {
		t.Errorf("estimated start %s, want %s (the preemption plus medium's 30s grace)", s.Queue[i].EstimatedStart, want)
	}
	for range 10 {
		step(5 * time.Second)
	}
	d.write("high.yaml", strings.Replace(d.highDoc, "state: Running", "state: Stopped", 1))
	for range 10 {
		step(5 * time.Second)
	}
	want := []string{"→Starting", "Starting→Running", "Running→Preempting", "Preempting→Preempted", "Preempted→Starting", "Starting→Running"}
	if diff := cmp.Diff(want, eventPath(s.Events, mediumRef)); diff != "" {
		t.Errorf("medium's events from the deltas (-want +got):\n%s", diff)
	}
	for i, e := range s.Events {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d: want 1, 2, 3, … with none missing", i, e.Seq)
		}
	}
	pre := s.Events[slices.IndexFunc(s.Events, func(e view.Event) bool { return e.Workspace == mediumRef && e.Kind == "preempted" })]
	if pre.PreemptedBy == nil || pre.PreemptedBy.String() != highRef || pre.AtRisk.D() != 5*time.Minute+time.Second || pre.Grace.D() != 30*time.Second {
		t.Errorf("preemption event %+v: want by %s, 5m1s at risk (since the 10m checkpoint), 30s grace", pre, highRef)
	}

	fresh := read(t, d.dial(nil))
	if fresh.Seq != seq {
		t.Errorf("a new browser starts at seq %d, want %d", fresh.Seq, seq)
	}
	if diff := cmp.Diff(*fresh.State, s); diff != "" {
		t.Errorf("the state built from deltas differs from a fresh one (-fresh +deltas):\n%s", diff)
	}
}

func eventPath(evs []view.Event, ref string) []string {
	var out []string
	for _, e := range evs {
		if e.Workspace == ref {
			out = append(out, string(e.From)+"→"+string(e.To))
		}
	}
	return out
}

func TestEventsReconnectGetsWhatItMissed(t *testing.T) {
	d := newDash(t, "")
	d.cycle(0)
	c := d.dial(nil)
	first := read(t, c)
	c.Close(websocket.StatusNormalClosure, "")

	// While it is away: medium runs, high preempts it.
	d.cycle(5 * time.Second)
	d.write("high.yaml", d.highDoc)
	for range 5 {
		d.cycle(10 * time.Second)
	}
	again := read(t, d.dial(nil))
	if again.Type != "state" {
		t.Fatalf("first message after reconnecting: %q, want the state", again.Type)
	}
	if got := eventPath(again.State.Events, mediumRef); !slices.Contains(got, "Running→Preempting") {
		t.Errorf("after reconnecting, medium's events %v lack the preemption that happened meanwhile", got)
	}
	if len(again.State.Events) <= len(first.State.Events) {
		t.Errorf("%d events after reconnecting, %d before", len(again.State.Events), len(first.State.Events))
	}
	i := slices.IndexFunc(again.State.Workspaces, func(w view.WorkspaceStatus) bool { return w.Ref().String() == mediumRef })
	if st := again.State.Workspaces[i].State; st != view.StatePreempted && st != view.StatePreempting {
		t.Errorf("medium %s after reconnecting, want preempted", st)
	}
}

// smallBuffers makes a connection's kernel buffers as small as the kernel
// allows, so a browser that does not read blocks the server's writes
// after a few kilobytes.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(1)
	}
	return c, err
}

func TestEventsSlowBrowserDroppedLoopNotSlowed(t *testing.T) {
	d := newDash(t, "apiVersion: berth.dev/v1\nkind: Cluster\nmetadata: {name: big}\nspec:\n  nodes:\n  - {name: dgx, count: 64, preset: dgx-h100}\n")
	d.cfg.FeedBuffer = 4
	var err error
	if d.loop, err = reconcile.New(d.cfg); err != nil {
		t.Fatal(err)
	}
	d.srv.Close()
	d.srv = httptest.NewUnstartedServer(Handler(d.loop, nil))
	d.srv.Listener = smallBuffers{d.srv.Listener}
	d.srv.Start()
	d.cycle(0)

	// A browser that reads along, and one that never reads.
	fast := d.dial(nil)
	read(t, fast)
	slow := d.dial(&websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetReadBuffer(1)
			}
			return c, err
		}}}})
	eventually(t, "both subscribed", func() bool { return d.loop.FeedStats().Subscribers == 2 })

	var slowest time.Duration
	for i := range 60 {
		// Churn: stop and start medium so every node's view changes.
		if i%2 == 0 {
			d.write("high.yaml", d.highDoc)
		} else {
			os.Remove(filepath.Join(d.dir, "high.yaml"))
		}
		start := time.Now()
		d.cycle(5 * time.Second)
		slowest = max(slowest, time.Since(start))
		if m := read(t, fast); m.Type != "delta" {
			t.Fatalf("fast browser got %q", m.Type)
		}
	}
	if d.loop.FeedStats().Dropped != 1 || d.loop.FeedStats().Subscribers != 1 {
		t.Fatalf("%d dropped, %d still subscribed; want the slow browser dropped and the fast one kept", d.loop.FeedStats().Dropped, d.loop.FeedStats().Subscribers)
	}
	if slowest > 2*time.Second {
		t.Errorf("the slowest cycle took %s with a browser not reading", slowest)
	}
	// The slow browser finds its connection closed once it reads again
	// (what was in flight trickles through its tiny window first).
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, start := 0, time.Now()
	for err == nil {
		_, _, err = slow.Read(ctx)
		n++
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the slow browser's connection is still open after it read %d messages", n)
	}
	t.Logf("the slow browser read %d messages in %s, then: %v", n, time.Since(start), err)
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestEventsPublishWithoutBrowsersKeepsEvents(t *testing.T) {
	d := newDash(t, "")
	d.cycle(0)
	d.cycle(5 * time.Second)
	if n := d.loop.FeedStats().Subscribers; n != 0 {
		t.Fatalf("%d clients", n)
	}
	m := read(t, d.dial(nil))
	if got := eventPath(m.State.Events, mediumRef); !slices.Equal(got, []string{"→Starting", "Starting→Running"}) {
		t.Errorf("events kept without browsers: %v", got)
	}
}
