package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
	"github.com/hashicorp/nomad/api"
)

// TestRealReachAndLogs (issue 17, item 2): a workspace serving HTTP on a
// dynamic port is reachable at the address berth shows (taken from the
// allocation Nomad placed), Nomad's service catalog holds its
// registration, and berth logs prints what its task wrote.
func TestRealReachAndLogs(t *testing.T) {
	c := realnomad.Client(t)
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Skipf("no python3 to serve HTTP: %v", err)
	}
	python := strings.TrimSpace(string(out))
	ws := fmt.Sprintf(`---
apiVersion: berth.dev/v1
kind: Workspace
metadata: {name: web, project: realloop}
spec:
  task:
    driver: raw_exec
    command: /bin/sh
    args: ["-c", "echo berth-logs-marker; exec %s -m http.server $NOMAD_PORT_http --bind 127.0.0.1"]
  resources: {gpus: 0, memory: 64Mi}
  ports:
  - {label: http, scheme: http}
  service:
    port: http
    check: {type: http, path: /, interval: 2s, timeout: 1s}
`, python)
	l := overAskingLoop(t, realloopBase+ws, false)
	ref := schema.Ref{Project: "realloop", Name: "web"}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var st view.WorkspaceStatus
	for {
		if _, err := l.Once(ctx); err != nil && ctx.Err() == nil {
			t.Logf("cycle: %v", err)
		}
		d, _ := l.Workspace(ref)
		st = d.Workspace
		if st.State == view.StateRunning && len(st.Endpoints) > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("web never ran with an address: %s %q %v", st.State, st.Reason, st.Endpoints)
		}
		time.Sleep(500 * time.Millisecond)
	}
	ep := st.Endpoints[0]
	if ep.Label != "http" || !strings.HasPrefix(ep.Address, "http://127.0.0.1:") {
		t.Fatalf("endpoint %+v; want http at http://127.0.0.1:PORT/", ep)
	}
	// The address is the allocation's, and the server answers there.
	var body string
	for {
		resp, err := http.Get(ep.Address)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
			body = resp.Status
		} else {
			body = err.Error()
		}
		if ctx.Err() != nil {
			t.Fatalf("GET %s: %s", ep.Address, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	allocs, _, err := c.Jobs().Allocations("web", false, &api.QueryOptions{Namespace: "realloop"})
	if err != nil || len(allocs) == 0 {
		t.Fatalf("allocations of web: %v", err)
	}
	regs, _, err := c.Services().Get("realloop-web", &api.QueryOptions{Namespace: "realloop"})
	if err != nil || len(regs) == 0 {
		t.Errorf("service realloop-web: %v (%d registrations)", err, len(regs))
	} else if got := fmt.Sprintf("http://%s:%d/", regs[0].Address, regs[0].Port); got != ep.Address {
		t.Errorf("service registered at %s; berth shows %s", got, ep.Address)
	}

	// berth logs, the binary, prints the task's stdout.
	berth := filepath.Join(t.TempDir(), "berth")
	if out, err := exec.Command("go", "build", "-o", berth, "github.com/berth-dev/berth/cmd/berth").CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/berth: %v\n%s", err, out)
	}
	lctx, lcancel := context.WithTimeout(ctx, 20*time.Second)
	defer lcancel()
	out, err = exec.CommandContext(lctx, berth, "logs", "realloop/web").CombinedOutput()
	if err != nil {
		t.Fatalf("berth logs: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "berth-logs-marker") {
		t.Errorf("berth logs printed %q; want the task's berth-logs-marker", out)
	}
	// -f keeps printing until it is stopped: the server's request log
	// (stderr) shows our GET.
	fctx, fcancel := context.WithTimeout(ctx, 5*time.Second)
	defer fcancel()
	go func() {
		time.Sleep(time.Second)
		if resp, err := http.Get(ep.Address + "followed"); err == nil {
			resp.Body.Close()
		}
	}()
	out, err = exec.CommandContext(fctx, berth, "logs", "realloop/web", "-f", "--stderr").Output()
	if err != nil && fctx.Err() == nil {
		t.Fatalf("berth logs -f: %v", err)
	}
	if !strings.Contains(string(out), "GET /followed") {
		t.Errorf("berth logs -f --stderr printed %q; want the request made while it followed", out)
	}
}
