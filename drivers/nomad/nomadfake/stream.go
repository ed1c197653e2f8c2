package nomadfake

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hashicorp/nomad/api"
)

// stream answers /v1/event/stream: from ?index= every batch of events
// the buffer holds past it (0, or an index older than the buffer: from
// its oldest, as Nomad does), then one batch per change, a heartbeat
// "{}" every second, until the client goes away. Open streams are
// counted (Streams). Topics are not filtered: the fake sends Node, Job
// and Allocation events. Namespaces are, as Nomad 2.0.5 filters them:
// ?namespace= (default "default") carries that namespace's events, and
// "*" those of the namespaces that existed when the stream opened; events
// without a namespace (Node) always pass.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	from, _ := strconv.ParseUint(q.Get("index"), 10, 64)
	atomic.AddInt64(&s.streams, 1)
	defer atomic.AddInt64(&s.streams, -1)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	beat := time.NewTicker(time.Second)
	defer beat.Stop()
	s.mu.Lock()
	s.flushEvents()
	carries := map[string]bool{"": true}
	switch ns := q.Get("namespace"); ns {
	case "*":
		for name := range s.namespaces {
			carries[name] = true
		}
	case "":
		carries["default"] = true
	default:
		carries[ns] = true
	}
	var sent uint64
	if from > 0 {
		sent = from - 1
	}
	s.mu.Unlock()
	for {
		s.mu.Lock()
		s.flushEvents()
		var out [][]byte
		for _, b := range s.log {
			if b.index > sent {
				if body := b.encode(carries); body != nil {
					out = append(out, body)
				}
				sent = b.index
			}
		}
		ch := s.changed
		s.mu.Unlock()
		for _, b := range out {
			if _, err := w.Write(b); err != nil {
				return
			}
		}
		if len(out) > 0 && flusher != nil {
			flusher.Flush()
		}
		select {
		case <-ch:
		case <-beat.C:
			if _, err := w.Write([]byte("{}\n")); err != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		case <-r.Context().Done():
			return
		}
	}
}

// Streams returns how many event streams are open now.
func (s *Server) Streams() int { return int(atomic.LoadInt64(&s.streams)) }

// logBatch is one batch of the event log: its events, each encoded as
// the stream sends it, with its namespace.
type logBatch struct {
	index  uint64
	events []json.RawMessage
	ns     []string
}

// encode returns the batch as a stream whose namespaces are carries sends
// it, or nil when it carries none of its events.
func (b logBatch) encode(carries map[string]bool) []byte {
	evs := make([]json.RawMessage, 0, len(b.events))
	for i, ev := range b.events {
		if carries[b.ns[i]] {
			evs = append(evs, ev)
		}
	}
	if len(evs) == 0 {
		return nil
	}
	body, _ := json.Marshal(map[string]any{"Index": b.index, "Events": evs})
	return append(body, '\n')
}

// logSize is how many batches the fake's event buffer keeps (Nomad's
// event_buffer_size defaults to 100 events).
const logSize = 100

type fakeEvent struct {
	Topic     string
	Type      string
	Key       string
	Namespace string `json:",omitempty"`
	Index     uint64
	Payload   map[string]any
}

// flushEvents appends to the log one batch, at the current index, of an
// event for each node, job and allocation whose JSON changed since the
// last flush (and for each job purged since), as Nomad publishes the
// object after each change. Called with s.mu held, between writes.
func (s *Server) flushEvents() {
	if s.index <= s.flushed {
		return
	}
	s.flushed = s.index
	if s.logged == nil {
		s.logged = map[string]string{}
	}
	var evs []fakeEvent
	now := map[string]bool{}
	add := func(k, topic, typ, key, ns string, payload map[string]any) {
		now[k] = true
		b, _ := json.Marshal(payload)
		if s.logged[k] == string(b) {
			return
		}
		s.logged[k] = string(b)
		evs = append(evs, fakeEvent{Topic: topic, Type: typ, Key: key, Namespace: ns, Index: s.index, Payload: payload})
	}
	for _, id := range sortedKeys(s.nodes) {
		add("N/"+id, "Node", "NodeRegistration", id, "", map[string]any{"Node": s.nodes[id].n})
	}
	for _, k := range sortedJobKeys(s.jobs) {
		j := s.jobs[k].j
		typ := "JobRegistered"
		if *j.Stop {
			typ = "JobDeregistered"
		}
		add("J/"+k.ns+"/"+k.id, "Job", typ, k.id, k.ns, map[string]any{"Job": j})
	}
	for _, id := range sortedKeys(s.allocs) {
		a := *s.allocs[id]
		a.Job = nil // Nomad strips the job from an allocation's event
		add("A/"+id, "Allocation", "AllocationUpdated", id, a.Namespace, map[string]any{"Allocation": &a})
	}
	for _, k := range sortedKeys(s.logged) {
		if now[k] {
			continue
		}
		delete(s.logged, k)
		switch k[0] {
		case 'J':
			ns, id := splitKey(k[2:])
			evs = append(evs, fakeEvent{Topic: "Job", Type: "JobDeregistered", Key: id, Namespace: ns, Index: s.index,
				Payload: map[string]any{"Job": &api.Job{ID: &id, Namespace: &ns}, "Deleted": true}})
		case 'N':
			evs = append(evs, fakeEvent{Topic: "Node", Type: "NodeDeregistration", Key: k[2:], Index: s.index})
		}
	}
	if len(evs) == 0 {
		return
	}
	b := logBatch{index: s.index}
	for _, ev := range evs {
		body, _ := json.Marshal(ev)
		b.events, b.ns = append(b.events, body), append(b.ns, ev.Namespace)
	}
	if len(s.log) == logSize {
		s.log = append(s.log[:0], s.log[1:]...)
	}
	s.log = append(s.log, b)
}

func splitKey(k string) (string, string) {
	for i := range len(k) {
		if k[i] == '/' {
			return k[:i], k[i+1:]
		}
	}
	return "", k
}
