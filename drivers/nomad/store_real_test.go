package nomad_test

import (
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/berth-dev/berth/schema"
	"github.com/google/go-cmp/cmp"
)

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
	h := bigHistory(50000, 1)
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

	small := bigHistory(100, 2)
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
