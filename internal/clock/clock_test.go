package clock

import (
	"testing"
	"time"
)

func TestManualFiresTimersInOrder(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewManual(start)
	late, early, same := c.After(2*time.Second), c.After(time.Second), c.After(time.Second)
	if at, ok := c.Next(); !ok || !at.Equal(start.Add(time.Second)) {
		t.Fatalf("Next = %v, %v; want %v", at, ok, start.Add(time.Second))
	}
	fired := func(ch <-chan time.Time) (time.Time, bool) {
		select {
		case at := <-ch:
			return at, true
		default:
			return time.Time{}, false
		}
	}
	c.Advance(999 * time.Millisecond)
	if _, ok := fired(early); ok {
		t.Fatal("a timer fired before it was due")
	}
	c.Advance(time.Millisecond)
	for _, ch := range []<-chan time.Time{early, same} {
		if at, ok := fired(ch); !ok || !at.Equal(start.Add(time.Second)) {
			t.Errorf("a timer due at 1s: fired %v at %v", ok, at)
		}
	}
	if _, ok := fired(late); ok {
		t.Fatal("the 2s timer fired at 1s")
	}
	c.Advance(-time.Hour)
	if !c.Now().Equal(start.Add(time.Second)) {
		t.Errorf("a negative Advance moved the clock to %v", c.Now())
	}
	c.Advance(time.Hour)
	if at, ok := fired(late); !ok || !at.Equal(start.Add(2*time.Second)) {
		t.Errorf("the 2s timer after an hour: fired %v at %v", ok, at)
	}
	if _, ok := c.Next(); ok {
		t.Error("Next reports a timer after all fired")
	}
	if _, ok := fired(c.After(0)); !ok {
		t.Error("After(0) did not fire at once")
	}
}
