package e2e

import (
	"fmt"
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
	"github.com/google/go-cmp/cmp"
)

// TestRealHistoryThousandWaitingWorkspaces runs reconcile cycles through
// the loop and the Nomad driver for 1,000 workspaces that all wait (each
// asks for more GPUs than a node has): their queue places are saved in
// Nomad (one Variable held 870 before berth failed every save) and a
// restarted berth keeps them. No job is registered.
func TestRealHistoryThousandWaitingWorkspaces(t *testing.T) {
	c := realnomad.Client(t)
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("apiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: medium}\nspec: {value: 50}\n")
	for p := range 20 {
		fmt.Fprintf(&b, "---\napiVersion: berth.dev/v1\nkind: Project\nmetadata: {name: team-%02d}\nspec: {tier: medium, members: [alice], quota: {gpus: 64}}\n", p)
		for w := range 50 {
			fmt.Fprintf(&b, "---\napiVersion: berth.dev/v1\nkind: Workspace\nmetadata: {name: llm-finetune-experiment-%03d, project: team-%02d}\n"+
				"spec:\n  owner: alice\n  state: Running\n  task: {driver: raw_exec, command: /bin/sh, args: [-c, sleep 3600]}\n  resources: {gpus: 64}\n", w, p)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "specs.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	newLoop := func() (*reconcile.Loop, *nomad.Driver) {
		d := realnomad.NewDriver(t, nomad.ConfigFromEnv(""))
		l, err := reconcile.New(reconcile.Config{Source: source.DirSource{Dir: dir}, Cluster: d, Store: d, ClusterName: "nomad"})
		if err != nil {
			t.Fatal(err)
		}
		return l, d
	}
	loop, _ := newLoop()
	start := time.Now()
	res, err := loop.Once(ctx)
	if err != nil {
		t.Fatalf("first cycle: %v", err)
	}
	first := time.Since(start)
	if len(res.Applied) != 0 {
		t.Errorf("applied %v, want nothing (no workspace fits)", res.Applied)
	}
	_, d := newLoop()
	h, err := d.LoadHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.QueuedSince) != 1000 {
		t.Fatalf("saved %d queue places, want 1000", len(h.QueuedSince))
	}
	restarted, _ := newLoop()
	if _, err := restarted.Once(ctx); err != nil {
		t.Fatalf("cycle of a restarted berth: %v", err)
	}
	h2, err := d.LoadHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(h.QueuedSince, h2.QueuedSince); diff != "" {
		t.Errorf("a restarted berth moved the queue (-before +after)\n%.2000s", diff)
	}
	sizes, _ := realnomad.HistoryVars(t, c)
	t.Logf("1,000 waiting workspaces: first cycle %v; history in %d Variables %v", first, len(sizes), sizes)
}

// TestRealHistoryFiftyThousandWorkspaces saves the history of 50,000
// workspaces in a real Nomad's Variables (each within Nomad's own 64 KiB
// check), loads it back whole, changes one workspace (one shard and the
// head rewritten, the rest untouched) and shrinks it (the extra shards
// deleted). Sizes and times go to the test log.
func TestRealHistoryFiftyThousandWorkspaces(t *testing.T) {
	c := realnomad.Client(t)
	newReal := func() *nomad.Driver {
		d := realnomad.NewDriver(t, nomad.ConfigFromEnv(""))
		return d
	}
	h := realnomad.SampleHistory(50000, 1)
	w := newReal()
	start := time.Now()
	if err := w.SaveHistory(ctx, h); err != nil {
		t.Fatal(err)
	}
	saved := time.Since(start)
	sizes, before := realnomad.HistoryVars(t, c)
	total, largest := 0, 0
	for _, n := range sizes {
		total += n
		largest = max(largest, n)
	}
	start = time.Now()
	got, err := newReal().LoadHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	loaded := time.Since(start)
	if d := cmp.Diff(h, got); d != "" {
		t.Fatalf("round trip (-want +got)\n%.2000s", d)
	}
	t.Logf("50,000 workspaces on Nomad: %d Variables, %d bytes in all, the largest %d; first save %v, load %v",
		len(sizes), total, largest, saved, loaded)

	h.Preempted[schema.Ref{Project: "team-003", Name: "train-00170"}] = h.Preempted[schema.Ref{Project: "team-003", Name: "train-00150"}]
	start = time.Now()
	if err := w.SaveHistory(ctx, h); err != nil {
		t.Fatal(err)
	}
	changed := time.Since(start)
	_, after := realnomad.HistoryVars(t, c)
	var rewritten []string
	for p, i := range after {
		if before[p] != i {
			rewritten = append(rewritten, p)
		}
	}
	if len(rewritten) != 2 || len(after) != len(before) {
		t.Errorf("one changed workspace rewrote %v (%d Variables before, %d after); want the head and one shard", rewritten, len(before), len(after))
	}
	start = time.Now()
	if err := w.SaveHistory(ctx, h); err != nil {
		t.Fatal(err)
	}
	unchanged := time.Since(start)
	if _, again := realnomad.HistoryVars(t, c); !cmp.Equal(after, again) {
		t.Errorf("an unchanged history was written")
	}
	start = time.Now()
	if got, err = w.LoadHistory(ctx); err != nil {
		t.Fatal(err)
	}
	reloaded := time.Since(start)
	if d := cmp.Diff(h, got); d != "" {
		t.Fatalf("reload (-want +got)\n%.2000s", d)
	}
	t.Logf("one workspace changed: save %v; nothing changed: save %v; load by the driver that saved: %v", changed, unchanged, reloaded)

	small := realnomad.SampleHistory(100, 2)
	if err := w.SaveHistory(ctx, small); err != nil {
		t.Fatal(err)
	}
	if sizes, _ := realnomad.HistoryVars(t, c); len(sizes) != 2 {
		t.Errorf("100 workspaces after 50,000: %d Variables, want the head and one shard", len(sizes))
	}
	got, err = newReal().LoadHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(small, got); d != "" {
		t.Errorf("after shrinking (-want +got)\n%.2000s", d)
	}
}
