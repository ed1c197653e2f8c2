package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"
)

// The event feed (GET /api/v1/events) sends each browser the dashboard's
// whole state once, then one delta per reconcile cycle, in order (Seq
// counts up by one). The loop never waits for a browser: each one has a
// bounded buffer, and one whose buffer is full when a delta is ready is
// dropped (its connection closed); it reconnects and starts again from a
// fresh state.

// Subprotocol is the WebSocket subprotocol of the event feed. A browser
// cannot set an Authorization header on a WebSocket, so it may offer its
// bearer token as a second subprotocol, "bearer." + base64url(token)
// (without padding); the server never selects or echoes that one.
const Subprotocol = "berth.v1"

// Message is one message of the event feed: Type "state" carries State
// (the first message on every connection), "delta" carries Delta, the
// changes since the message before it.
type Message struct {
	Type  string     `json:"type"`
	Seq   uint64     `json:"seq"`
	State *Dashboard `json:"state,omitempty"`
	Delta *Delta     `json:"delta,omitempty"`
}

// Delta is what changed in one cycle. Nodes and Workspaces are the ones
// that changed or appeared (sorted like Dashboard's), Removed… the names
// of those gone; Projects and Queue, when not nil, replace the lists
// whole; Events are the new ones, oldest first. At, Revision, Attempted
// and LastReconcile are always the current values.
type Delta struct {
	At                time.Time         `json:"at"`
	Revision          *RevisionStatus   `json:"revision"`
	Attempted         *RevisionStatus   `json:"attempted,omitempty"`
	LastReconcile     *CycleStatus      `json:"lastReconcile,omitempty"`
	Nodes             []NodeView        `json:"nodes,omitempty"`
	RemovedNodes      []string          `json:"removedNodes,omitempty"`
	Workspaces        []WorkspaceStatus `json:"workspaces,omitempty"`
	RemovedWorkspaces []string          `json:"removedWorkspaces,omitempty"`
	// WorkspacesTotal is always the current count (Dashboard's).
	WorkspacesTotal int            `json:"workspacesTotal"`
	Projects        *[]ProjectView `json:"projects,omitempty"`
	Queue           *[]QueueEntry  `json:"queue,omitempty"`
	// QueueTotal comes with Queue.
	QueueTotal *int    `json:"queueTotal,omitempty"`
	Events     []Event `json:"events,omitempty"`
}

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
	events  []Event
	last    *Dashboard // what subscribers have; nil while there are none
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
// subscriber whose buffer is full is dropped.
func (l *Loop) publish(ts []WorkspaceTransition) {
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
		return
	}
	next := l.dashboard(nil)
	delta := diff(f.last, &next)
	delta.Events = evs
	f.last = &next
	f.seq++
	msg, err := json.Marshal(Message{Type: "delta", Seq: f.seq, Delta: delta})
	if err != nil {
		l.log.Error("event feed: encode delta", "err", err.Error())
		return
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
		full.Events = []Event{}
	}
	msg, err := json.Marshal(Message{Type: "state", Seq: f.seq, State: &full})
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

// diff returns what changed from prev to next (all of next when prev is
// nil), without events.
func diff(prev, next *Dashboard) *Delta {
	d := &Delta{At: next.At, Revision: next.Revision, Attempted: next.Attempted, LastReconcile: next.LastReconcile, WorkspacesTotal: next.WorkspacesTotal}
	if prev == nil {
		prev = &Dashboard{}
	}
	oldNodes := map[string]*NodeView{}
	for i := range prev.Nodes {
		oldNodes[prev.Nodes[i].Name] = &prev.Nodes[i]
	}
	for i := range next.Nodes {
		n := &next.Nodes[i]
		if o, ok := oldNodes[n.Name]; !ok || !o.equal(n) {
			d.Nodes = append(d.Nodes, *n)
		}
		delete(oldNodes, n.Name)
	}
	for name := range oldNodes {
		d.RemovedNodes = append(d.RemovedNodes, name)
	}
	slices.Sort(d.RemovedNodes)

	oldWS := map[string]*WorkspaceStatus{}
	for i := range prev.Workspaces {
		oldWS[prev.Workspaces[i].Ref().String()] = &prev.Workspaces[i]
	}
	for _, w := range next.Workspaces {
		key := w.Ref().String()
		if o, ok := oldWS[key]; !ok || !sameWorkspace(o, &w) {
			d.Workspaces = append(d.Workspaces, w)
		}
		delete(oldWS, key)
	}
	for key := range oldWS {
		d.RemovedWorkspaces = append(d.RemovedWorkspaces, key)
	}
	slices.Sort(d.RemovedWorkspaces)

	if !sameJSON(prev.Projects, next.Projects) {
		d.Projects = &next.Projects
	}
	if !sameJSON(prev.Queue, next.Queue) || prev.QueueTotal != next.QueueTotal {
		d.Queue, d.QueueTotal = &next.Queue, &next.QueueTotal
	}
	return d
}

// sameWorkspace reports whether two workspace statuses are the same.
func sameWorkspace(a, b *WorkspaceStatus) bool {
	return a.Project == b.Project && a.Name == b.Name && a.State == b.State && a.ReasonKind == b.ReasonKind &&
		a.Reason == b.Reason && a.Node == b.Node && a.Since.Equal(b.Since) && a.Progress == b.Progress &&
		a.WorkLost == b.WorkLost && a.Revision == b.Revision && a.Decision == b.Decision && slices.Equal(a.GPUs, b.GPUs) &&
		(a.PreemptedBy == nil) == (b.PreemptedBy == nil) && (a.PreemptedBy == nil || *a.PreemptedBy == *b.PreemptedBy) &&
		slices.Equal(a.Endpoints, b.Endpoints) &&
		(a.RunTime == nil) == (b.RunTime == nil) && (a.RunTime == nil || *a.RunTime == *b.RunTime) &&
		(a.LikelyStart == nil) == (b.LikelyStart == nil) && (a.LikelyStart == nil || sameLikely(a.LikelyStart, b.LikelyStart)) &&
		(a.LastEnd == nil) == (b.LastEnd == nil) && (a.LastEnd == nil || sameEnd(a.LastEnd, b.LastEnd))
}

// sameEnd compares two ends (their times by Equal).
func sameEnd(a, b *EndStatus) bool {
	x, y := *a, *b
	x.At, y.At = time.Time{}, time.Time{}
	return x == y && a.At.Equal(b.At)
}

// sameLikely compares two likely starts (their times by Equal).
func sameLikely(a, b *LikelyStart) bool {
	return a.Known == b.Known && a.OverdueAt.Equal(b.OverdueAt) && a.Earliest.Equal(b.Earliest) && a.Likely.Equal(b.Likely) && a.Latest.Equal(b.Latest) &&
		a.PastRuns == b.PastRuns && a.Stated == b.Stated && a.UnknownRunning == b.UnknownRunning && a.UnknownAhead == b.UnknownAhead
}

// sameJSON compares two values by their JSON (they are small: a
// workspace, the project list, the queue).
func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
