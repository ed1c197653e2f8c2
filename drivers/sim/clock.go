package sim

import (
	"time"

	"github.com/berth-dev/berth/internal/clock"
)

// Clock is the simulated cluster's notion of now.
type Clock interface {
	Now() time.Time
}

// ManualClock moves only when told to: tests and trace replay. It is
// clock.Manual, whose timers the loop can wait on, so one clock drives
// both the simulator and a loop over it. Safe for concurrent use.
type ManualClock = clock.Manual

// NewManualClock returns a clock standing at t.
func NewManualClock(t time.Time) *ManualClock { return clock.NewManual(t) }

// ScaledClock runs Speed times as fast as real time from the moment it is
// made: with Speed 60 a real second is a simulated minute.
type ScaledClock struct {
	origin time.Time // simulated time at creation
	start  time.Time // real time at creation
	speed  float64
	real   func() time.Time
}

// NewScaledClock returns a clock that starts at the real now and runs
// speed times as fast; speed <= 0 means 1.
func NewScaledClock(speed float64) *ScaledClock {
	if speed <= 0 {
		speed = 1
	}
	now := time.Now()
	return &ScaledClock{origin: now.Round(0), start: now, speed: speed, real: time.Now}
}

// Speed returns the factor the clock runs at.
func (c *ScaledClock) Speed() float64 { return c.speed }

// Now returns the simulated time.
func (c *ScaledClock) Now() time.Time {
	elapsed := c.real().Sub(c.start)
	return c.origin.Add(time.Duration(float64(elapsed) * c.speed))
}
