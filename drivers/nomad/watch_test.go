package nomad_test

import (
	"context"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/drivers/nomad/nomadfake"
	"github.com/berth-dev/berth/internal/realnomad"
)

// TestWatchHoldsOneStream: however often the cluster changes and the
// loop observes, Watch keeps one event stream open and abandons no
// request; when ctx ends the stream closes.
func TestWatchHoldsOneStream(t *testing.T) {
	fake := nomadfake.New()
	fake.AddNode(nomadfake.Node{ID: "n1", Name: "a"})
	d := realnomad.NewDriver(t, nomad.Config{Address: fake.Start(t).URL})
	if _, err := d.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	ch := d.Watch(wctx)
	for i := range 20 {
		fake.SetNodeStatus("n1", []string{"down", "ready"}[i%2], i%2 == 1)
		select {
		case <-ch:
		case <-time.After(2 * time.Second):
			t.Fatalf("change %d not seen within 2s", i)
		}
		if _, err := d.Observe(ctx); err != nil {
			t.Fatal(err)
		}
		if n := fake.Streams(); n != 1 {
			t.Fatalf("%d event streams open after change %d, want 1", n, i)
		}
	}
	cancel()
	for range ch {
	}
	deadline := time.Now().Add(2 * time.Second)
	for fake.Streams() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := fake.Streams(); n != 0 {
		t.Errorf("%d event streams open after the watch ended, want 0", n)
	}
}
