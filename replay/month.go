package replay

import "time"

// monthClock times a replay per simulated month: at each cycle, at tells
// it the simulated time, and decided the time a decision took.
type monthClock struct {
	months []MonthTiming
	decide []time.Duration // per month
	year   int
	month  time.Month
	began  time.Time // wall time when the current month began
}

// at starts a cycle at simulated time now: when now is in a month after
// the current one, the current one ends (its wall time is read) and
// now's begins.
func (c *monthClock) at(now time.Time) {
	y, mo, _ := now.UTC().Date()
	if y == c.year && mo == c.month && len(c.months) > 0 {
		return
	}
	wall := time.Now()
	c.close(wall)
	c.year, c.month, c.began = y, mo, wall
	c.months = append(c.months, MonthTiming{Month: now.UTC().Format("2006-01")})
	c.decide = append(c.decide, 0)
}

// decided counts a decision of the current month that took d and took
// workspaces.
func (c *monthClock) decided(d time.Duration, took int) {
	if len(c.months) == 0 {
		return
	}
	c.months[len(c.months)-1].Cycles++
	c.months[len(c.months)-1].Workspaces += int64(took)
	c.decide[len(c.decide)-1] += d
}

// close ends the current month at wall time wall.
func (c *monthClock) close(wall time.Time) {
	if len(c.months) == 0 {
		return
	}
	k := len(c.months) - 1
	if n := c.months[k].Cycles; n > 0 {
		c.months[k].DecideMillis = round4(c.decide[k].Seconds() * 1000 / float64(n))
		c.months[k].LoopMillis = round4(wall.Sub(c.began).Seconds() * 1000 / float64(n))
	}
}

// done ends the last month and returns them all, in order.
func (c *monthClock) done() []MonthTiming {
	c.close(time.Now())
	return c.months
}
