package realnomad

import (
	"context"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers/nomad"
)

// Follow starts d's Watch (stopped when t ends) and observes until an
// Observe is answered from the cache the event stream keeps, or fails t
// after 10 seconds. The driver's tests over the fake Nomad and
// internal/e2e's over a real one use it alike.
func Follow(t testing.TB, d *nomad.Driver) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	d.Watch(ctx)
	AwaitCache(t, d)
}

// AwaitCache observes d until an Observe is answered from its followed
// cache (FollowStats' CachedReads grows), or fails t after 10 seconds.
func AwaitCache(t testing.TB, d *nomad.Driver) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		before := d.FollowStats().CachedReads
		if _, err := d.Observe(context.Background()); err != nil {
			t.Fatal(err)
		}
		if d.FollowStats().CachedReads > before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Observe never answered from the followed cache: %+v", d.FollowStats())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
