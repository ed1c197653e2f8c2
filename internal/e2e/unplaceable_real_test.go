package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/berth-dev/berth/reconcile"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/source"
	"github.com/berth-dev/berth/view"
	"github.com/hashicorp/nomad/api"
)

const realloopBase = `apiVersion: berth.dev/v1
kind: PriorityTier
metadata: {name: medium}
spec: {value: 50}
---
apiVersion: berth.dev/v1
kind: Project
metadata: {name: realloop}
spec:
  tier: medium
  quota: {gpus: 0}
`

func sleepWorkspace(name, memory string) string {
	return fmt.Sprintf(`---
apiVersion: berth.dev/v1
kind: Workspace
metadata: {name: %s, project: realloop}
spec:
  owner: test
  state: Running
  task: {driver: raw_exec, command: /bin/sh, args: ["-c", "sleep 3600"]}
  resources: {gpus: 0, memory: %s}
`, name, memory)
}

// overAskingLoop returns a loop over the real agent with the specs written to a
// temporary directory, and its driver.
// With watch, the driver's Watch feeds the loop's ClusterChanges until
// the test ends.
func overAskingLoop(t *testing.T, specs string, watch bool) *reconcile.Loop {
	t.Helper()
	realnomad.Client(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "specs.yaml"), []byte(specs), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := nomad.New(nomad.ConfigFromEnv(""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	cfg := reconcile.Config{Source: source.DirSource{Dir: dir}, Cluster: overAsking{d}, Store: d,
		Settle: 500 * time.Millisecond, BackoffMin: time.Second, BackoffMax: 10 * time.Second}
	if watch {
		cfg.ClusterChanges = d.Watch(t.Context())
	}
	l, err := reconcile.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// overAsking is the Nomad driver, except that it asks Nomad for far more
// memory than the specs say for workspace "a-huge": berth's decision sees
// a workspace that fits, and Nomad cannot place what it is sent. That is
// how a start becomes unplaceable on a real cluster (Nomad's state moved,
// a job edited outside berth, a resource berth does not model).
type overAsking struct{ *nomad.Driver }

func (o overAsking) Apply(ctx context.Context, a drivers.Action) error {
	if a.Workspace.Name == "a-huge" && a.Spec != nil {
		ws := *a.Spec
		ws.Spec.Resources.MemoryBytes = 100000 << 30
		a.Spec = &ws
	}
	return o.Driver.Apply(ctx, a)
}

// TestRealUnplaceableDoesNotBlock (issue 12, item 3): a workspace no node
// can hold, planned before one that fits, does not stop the small one.
func TestRealUnplaceableDoesNotBlock(t *testing.T) {
	l := overAskingLoop(t, realloopBase+sleepWorkspace("a-huge", "32Mi")+sleepWorkspace("b-small", "32Mi"), false)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	small := schema.Ref{Project: "realloop", Name: "b-small"}
	huge := schema.Ref{Project: "realloop", Name: "a-huge"}
	for {
		if _, err := l.Once(ctx); err != nil && ctx.Err() == nil {
			t.Logf("cycle: %v", err)
		}
		d, _ := l.Workspace(small)
		if d.Workspace.State == view.StateRunning {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("b-small never ran: %s %q", d.Workspace.State, d.Workspace.Reason)
		}
		time.Sleep(500 * time.Millisecond)
	}
	d, _ := l.Workspace(huge)
	if d.Workspace.State != view.StatePending || d.Workspace.ReasonKind != "unplaceable" || !strings.Contains(d.Workspace.Reason, "memory exhausted") {
		t.Errorf("a-huge: %s (%s) %q; want Pending, unplaceable, with Nomad's reason (memory exhausted)", d.Workspace.State, d.Workspace.ReasonKind, d.Workspace.Reason)
	}
	t.Logf("a-huge: %s (%s): %s", d.Workspace.State, d.Workspace.ReasonKind, d.Workspace.Reason)
}

// TestRealNoConnectionPileUp (issue 12, item 3): reconciling with a
// permanently unplaceable workspace next to normal ones leaves Nomad with
// a steady handful of connections, none hanging in CLOSE-WAIT.
// BERTH_CONN_SECONDS sets how long (default 30, under make e2e: the
// pile-up it guards against grew by about 3 sockets a second, and the
// retries reach their 10 s backoff in 15 s; the issue asks for 300 once).
func TestRealNoConnectionPileUp(t *testing.T) {
	secs := 30
	if v, err := strconv.Atoi(os.Getenv("BERTH_CONN_SECONDS")); err == nil && v > 0 {
		secs = v
	}
	c := realnomad.Client(t)
	l := overAskingLoop(t, realloopBase+sleepWorkspace("a-huge", "32Mi")+sleepWorkspace("b-small", "32Mi")+sleepWorkspace("c-small", "32Mi"), true)
	u, err := url.Parse(os.Getenv("NOMAD_ADDR"))
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	ctx, cancel := context.WithTimeout(t.Context(), time.Duration(secs)*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx, nil) }()
	mostEst, mostWait := 0, 0
	for ctx.Err() == nil {
		est, wait := nomadSockets(t, port)
		mostEst, mostWait = max(mostEst, est), max(mostWait, wait)
		time.Sleep(time.Second)
	}
	<-done
	t.Logf("over %ds: at most %d established and %d CLOSE-WAIT connections on Nomad's port %d", secs, mostEst, mostWait, port)
	if mostWait > 5 {
		t.Errorf("%d connections in CLOSE-WAIT on Nomad's side: berth abandons requests", mostWait)
	}
	if mostEst > 40 {
		t.Errorf("%d connections established to Nomad: they pile up", mostEst)
	}
	st := l.Status()
	for _, w := range st.Workspaces {
		t.Logf("%s: %s %s", w.Ref(), w.State, w.Reason)
		if w.Name != "a-huge" && w.State != view.StateRunning {
			t.Errorf("%s: %s, want Running beside the unplaceable one", w.Ref(), w.State)
		}
	}
	// Each try registers the job and withdraws it: two versions. A loop
	// that retried at once made 29 in 8 s; backoff (1 s doubling to 10 s)
	// allows about secs/10 + 4 tries.
	j, _, err := c.Jobs().Info("a-huge", &api.QueryOptions{Namespace: "realloop"})
	if err != nil {
		t.Fatal(err)
	}
	if most := uint64(2 * (secs/10 + 6)); *j.Version > most {
		t.Errorf("the unplaceable job is at version %d after %ds: more than %d, berth retries it too often", *j.Version, secs, most)
	}
	t.Logf("the unplaceable job is at version %d after %ds", *j.Version, secs)
}

// nomadSockets counts the server side's TCP sockets on port (all of this
// machine's, from /proc/net/tcp and tcp6): established and CLOSE-WAIT.
func nomadSockets(t *testing.T, port int) (est, closeWait int) {
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 4 || fields[0] == "sl" {
				continue
			}
			_, lp, _ := strings.Cut(fields[1], ":")
			p, _ := strconv.ParseInt(lp, 16, 32)
			if int(p) != port {
				continue
			}
			switch fields[3] {
			case "01":
				est++
			case "08":
				closeWait++
			}
		}
		fh.Close()
	}
	return est, closeWait
}
