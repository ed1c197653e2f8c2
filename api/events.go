package api

import (
	"context"
	"net/http"

	"github.com/berth-dev/berth/reconcile"
	"github.com/berth-dev/berth/view"
	"github.com/coder/websocket"
)

// events is GET /api/v1/events: a WebSocket that sends the loop's event
// feed, the state then the deltas (reconcile.Loop.Subscribe); it reads
// nothing from the browser.
func events(l *reconcile.Loop) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// Compressed: the first state of a 512-node cluster is 0.5-1.4 MB of
		// JSON (about 4.5x smaller deflated); the browser's writer goroutine
		// pays for it, not the loop.
		conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{view.Subprotocol},
			CompressionMode: websocket.CompressionNoContextTakeover})
		if err != nil {
			return // Accept wrote the response
		}
		defer conn.CloseNow()
		sub, err := l.Subscribe(conn.CloseRead(r.Context()))
		if err != nil {
			conn.Close(websocket.StatusInternalError, "encode state")
			return
		}
		defer l.Unsubscribe(sub)
		ctx := sub.Context()
		for {
			select {
			case <-ctx.Done():
				if sub.FellBehind() {
					conn.Close(websocket.StatusTryAgainLater, "fell behind; reconnect")
				}
				return
			case msg := <-sub.Messages():
				if ctx.Err() != nil {
					continue // dropped: say so above, send no more
				}
				wctx, cancel := context.WithTimeout(ctx, l.FeedWriteTimeout())
				err := conn.Write(wctx, websocket.MessageText, msg)
				cancel()
				if err != nil {
					return
				}
			}
		}
	}
}
