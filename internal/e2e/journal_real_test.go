package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/berth-dev/berth/reconcile"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/source"
	"github.com/berth-dev/berth/view"
	"github.com/hashicorp/nomad/api"
)

// TestRealPruneDelaySurvivesRestart (issue 14 §4): berth is restarted in
// the middle of a prune delay; the new process reads when the workspace
// left the specs from Nomad and purges its job when it was due, not a
// whole delay after the restart. Its transitions survive too.
func TestRealPruneDelaySurvivesRestart(t *testing.T) {
	c := realnomad.Client(t)
	const delay = 20 * time.Second
	dir := t.TempDir()
	write(t, dir, "tiers.yaml", realTiers)
	write(t, dir, "a.yaml", realWorkspace("a", 1, "sleep 3600"))
	write(t, dir, "b.yaml", realWorkspace("b", 1, "sleep 3600"))
	open := func() (*reconcile.Loop, *nomad.Driver) {
		d := realnomad.NewDriver(t, nomad.ConfigFromEnv(""))
		l, err := reconcile.New(reconcile.Config{Source: source.DirSource{Dir: dir}, Cluster: d, Store: d, PruneDelay: delay})
		if err != nil {
			t.Fatal(err)
		}
		return l, d
	}
	a := schema.Ref{Project: "berth-real", Name: "a"}
	cycle := func(l *reconcile.Loop, within time.Duration, what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			l.Once(ctx)
			if ok() {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s; status %+v", what, within, l.Status().Workspaces)
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	state := func(l *reconcile.Loop, ref schema.Ref) view.WorkspaceStatus {
		w, _ := l.Workspace(ref)
		return w.Workspace
	}
	jobGone := func() bool {
		_, _, err := c.Jobs().Info("a", &api.QueryOptions{Namespace: "berth-real"})
		return err != nil && strings.Contains(err.Error(), "404")
	}

	l1, d1 := open()
	cycle(l1, 30*time.Second, "a and b running", func() bool {
		return state(l1, a).State == view.StateRunning && state(l1, schema.Ref{Project: "berth-real", Name: "b"}).State == view.StateRunning
	})
	if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	removed := time.Now()
	cycle(l1, 15*time.Second, "a stopped", func() bool { return strings.Contains(state(l1, a).Reason, "purged at") })
	before := state(l1, a).Reason
	cycle(l1, delay, "half the delay", func() bool { return time.Since(removed) > delay/2 })
	d1.Close() // the first berth is gone

	l2, _ := open()
	l2.Once(ctx)
	if after := state(l2, a).Reason; after != before {
		t.Errorf("after the restart a's reason is %q, want it unchanged: %q", after, before)
	}
	if jobGone() {
		t.Fatal("a's job was purged before its delay")
	}
	cycle(l2, delay, "a's job purged", jobGone)
	late := time.Since(removed) - delay
	if late > 5*time.Second {
		t.Errorf("a's job was purged %s after its delay ended; the restart at half the delay started it over", late.Round(time.Second))
	}
	d, _ := l2.Workspace(a)
	var path []string
	for _, tr := range d.History {
		path = append(path, string(tr.To))
	}
	if got := strings.Join(path, " "); got != "Starting Running Stopped Stopped" && got != "Pending Starting Running Stopped Stopped" {
		t.Errorf("a's history across the restart: %s", got)
	}
	t.Logf("removed, restarted after %s, purged %s after the %s delay", (delay / 2).Round(time.Second), late.Round(time.Millisecond), delay)
}
