package sim_test

import (
	"context"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/drivertest"
	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/schema"
)

// TestConformance runs the driver conformance suite against the simulator.
func TestConformance(t *testing.T) {
	drivertest.Run(t, func(t *testing.T, nodes []drivers.Node) drivertest.Harness {
		clock := sim.NewManualClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
		for i := range nodes {
			nodes[i].MemoryBytes = 1 << 40
		}
		c := sim.New(sim.Spec{Name: "conformance", StartDelay: sim.DefaultStartDelay, CheckpointTime: sim.DefaultCheckpointTime, Nodes: nodes}, clock)
		return drivertest.Harness{
			Cluster: c,
			Settle:  func(context.Context) error { clock.Advance(time.Hour); return nil },
			Exact:   true,
			Exit: func(_ context.Context, ref schema.Ref, code int) error {
				c.Exit(ref, code)
				return nil
			},
			Unplaceable: schema.WorkResources{MemoryBytes: 2 << 40},
			SetUse: func(_ context.Context, ref schema.Ref, percent []float64) error {
				return c.SetUse(ref, percent...)
			},
		}
	})
}
