package nomadfake

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// stream answers /v1/event/stream: one newline-delimited JSON batch per
// change of the state index past ?index= (one event, topic "Job", for
// whatever changed), a heartbeat "{}" every second, until the client goes
// away. Open streams are counted (Streams).
func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	from, _ := strconv.ParseUint(r.URL.Query().Get("index"), 10, 64)
	atomic.AddInt64(&s.streams, 1)
	defer atomic.AddInt64(&s.streams, -1)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	beat := time.NewTicker(time.Second)
	defer beat.Stop()
	sent := from
	if sent > 0 {
		sent--
	}
	for {
		s.mu.Lock()
		idx, ch := s.index, s.changed
		s.mu.Unlock()
		if idx > sent && (from == 0 && sent == 0) {
			sent = idx // index 0: from now on
		} else if idx > sent {
			sent = idx
			if enc.Encode(map[string]any{"Index": idx, "Events": []map[string]any{{"Topic": "Job", "Type": "JobRegistered", "Index": idx}}}) != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
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
