package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/berth-dev/berth/view"
)

// Defaults of the event feed.
const (
	// feedBuffer is how many messages a browser may fall behind before it
	// is dropped.
	feedBuffer = 64
	// feedEvents is how many events the feed keeps for new browsers.
	feedEvents = 1000
	// feedWriteTimeout bounds one write to a browser.
	feedWriteTimeout = 10 * time.Second
)

// feed fans the loop's cycles out to the browsers subscribed.
type feed struct {
	buffer       int
	maxEvents    int
	writeTimeout time.Duration

	mu      sync.Mutex
	seq     uint64 // of the last message
	evSeq   uint64 // of the last event
	events  []view.Event
	last    *view.Dashboard // what subscribers have; nil while there are none
	clients map[*Subscription]struct{}
	drops   int
}

// Subscription is one browser's place on the event feed: the messages
// queued for it (JSON, the whole state first, then one delta per cycle),
// and a context that ends when it is dropped or unsubscribed.
type Subscription struct {
	ch     chan []byte
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// Messages are the messages to send, in order.
func (s *Subscription) Messages() <-chan []byte { return s.ch }

// Context ends when the subscription does: the browser fell behind
// (FellBehind), it was unsubscribed, or the context given to Subscribe
// ended.
func (s *Subscription) Context() context.Context { return s.ctx }

// FellBehind reports whether the feed dropped it because its buffer was
// full: the browser should reconnect for a fresh state.
func (s *Subscription) FellBehind() bool { return errors.Is(context.Cause(s.ctx), errTooSlow) }

// errTooSlow is why a subscription is dropped.
var errTooSlow = errors.New("the browser fell behind the loop; reconnect for a fresh state")

func newFeed(buffer int) *feed {
	if buffer <= 0 {
		buffer = feedBuffer
	}
	return &feed{buffer: buffer, maxEvents: feedEvents, writeTimeout: feedWriteTimeout, clients: map[*Subscription]struct{}{}}
}

// FeedWriteTimeout bounds one write of the feed to a browser.
func (l *Loop) FeedWriteTimeout() time.Duration { return l.feed.writeTimeout }

// FeedStats are the event feed's subscribers now and how many it has
// dropped for falling behind.
type FeedStats struct{ Subscribers, Dropped int }

// FeedStats reports the event feed's subscribers and drops.
func (l *Loop) FeedStats() FeedStats {
	l.feed.mu.Lock()
	defer l.feed.mu.Unlock()
	return FeedStats{Subscribers: len(l.feed.clients), Dropped: l.feed.drops}
}

// publish records a cycle's transitions as events and sends the changes
// since the last message to every subscriber. It never blocks on one: a
// subscriber whose buffer is full is dropped. It returns the events,
// numbered.
func (l *Loop) publish(ts []view.WorkspaceTransition) []view.Event {
	evs := l.events(ts)
	f := l.feed
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range evs {
		f.evSeq++
		evs[i].Seq = f.evSeq
	}
	f.events = append(f.events, evs...)
	if over := len(f.events) - f.maxEvents; over > 0 {
		f.events = slices.Delete(f.events, 0, over)
	}
	if len(f.clients) == 0 {
		f.last = nil
		return evs
	}
	next := l.dashboard(nil)
	delta := view.Diff(f.last, &next)
	delta.Events = evs
	f.last = &next
	f.seq++
	msg, err := json.Marshal(view.Message{Type: "delta", Seq: f.seq, Delta: delta})
	if err != nil {
		l.log.Error("event feed: encode delta", "err", err.Error())
		return evs
	}
	for c := range f.clients {
		select {
		case c.ch <- msg:
		default:
			delete(f.clients, c)
			f.drops++
			c.cancel(errTooSlow)
			l.log.Warn("dashboard: dropped a browser that fell behind", "buffer", f.buffer)
		}
	}
	return evs
}

// Subscribe registers a browser on the event feed; its first queued
// message is the whole state, and the deltas that follow start from it.
// The loop never waits for it: past its buffer (Config.FeedBuffer) it is
// dropped. Unsubscribe it when done.
func (l *Loop) Subscribe(ctx context.Context) (*Subscription, error) {
	f := l.feed
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last == nil {
		d := l.dashboard(nil)
		f.last = &d
	}
	full := *f.last
	full.Events = slices.Clone(f.events)
	if full.Events == nil {
		full.Events = []view.Event{}
	}
	msg, err := json.Marshal(view.Message{Type: "state", Seq: f.seq, State: &full})
	if err != nil {
		return nil, err
	}
	c := &Subscription{ch: make(chan []byte, max(f.buffer, 1))}
	c.ctx, c.cancel = context.WithCancelCause(ctx)
	c.ch <- msg
	f.clients[c] = struct{}{}
	return c, nil
}

// Unsubscribe ends a subscription.
func (l *Loop) Unsubscribe(c *Subscription) {
	l.feed.mu.Lock()
	delete(l.feed.clients, c)
	l.feed.mu.Unlock()
	c.cancel(context.Canceled)
}
