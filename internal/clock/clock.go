package clock

import (
	"slices"
	"sync"
	"time"
)

// Real is the machine's clock. Its zero value is ready to use.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// After returns time.After(d).
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Manual moves only when told to: tests and trace replay. Its timers
// (After) fire as Advance moves it past them. Safe for concurrent use.
type Manual struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter // sorted by at, ties in the order made
}

// waiter is a channel of After's, sent to once the clock reaches at.
type waiter struct {
	at time.Time
	c  chan time.Time
}

// NewManual returns a clock standing at t.
func NewManual(t time.Time) *Manual { return &Manual{now: t} }

// Now returns the clock's time.
func (c *Manual) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (a negative d is ignored: time
// never goes back) and fires, in the order they are due, the timers it
// passes; each channel receives the time its timer was due.
func (c *Manual) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	n := 0
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			break
		}
		w.c <- w.at // buffered, sent to once: never blocks
		n++
	}
	c.waiters = slices.Delete(c.waiters, 0, n)
}

// After returns a channel that receives the clock's time once it has
// moved on by d (at once when d <= 0), like time.After.
func (c *Manual) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if d <= 0 {
		ch <- c.now
		return ch
	}
	w := waiter{at: c.now.Add(d), c: ch}
	i, _ := slices.BinarySearchFunc(c.waiters, w.at, func(w waiter, at time.Time) int {
		if w.at.After(at) {
			return 1
		}
		return -1 // equal times go after those made before
	})
	c.waiters = slices.Insert(c.waiters, i, w)
	return ch
}

// Next returns when the earliest timer not yet fired is due; false when
// none waits. A test steps a clock from one timer to the next with it,
// as time would pass.
func (c *Manual) Next() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.waiters) == 0 {
		return time.Time{}, false
	}
	return c.waiters[0].at, true
}
