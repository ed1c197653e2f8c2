package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/nomad"
)

var ctx = context.Background()

// newDriver opens a driver for cfg and closes its connections when t
// ends: a real agent refuses an address that holds too many.
func newDriver(t testing.TB, cfg nomad.Config) *nomad.Driver {
	t.Helper()
	d, err := nomad.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// waitFor observes until ok holds or within passes.
func waitFor(ctx context.Context, d *nomad.Driver, within time.Duration, ok func(drivers.Snapshot) bool) error {
	deadline := time.Now().Add(within)
	for {
		snap, err := d.Observe(ctx)
		if err != nil {
			return err
		}
		if ok(snap) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s; last snapshot: %+v", within, snap)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
