package api

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// ServerLimits bound what clients of the status server can hold.
type ServerLimits struct {
	// ReadHeaderTimeout bounds the time to send a request's headers,
	// ReadTimeout the whole request with its body (a WebSocket is free of
	// it once upgraded), IdleTimeout how long a keep-alive connection
	// waits for its next request.
	ReadHeaderTimeout, ReadTimeout, IdleTimeout time.Duration
	// MaxConns bounds the connections open at once (WebSockets included):
	// one more is closed as soon as it is accepted. Above three quarters
	// of it, a connection is closed as soon as it falls idle rather than
	// kept alive.
	MaxConns int
}

// DefaultServerLimits are the limits of `berth reconcile`'s server.
var DefaultServerLimits = ServerLimits{
	ReadHeaderTimeout: 10 * time.Second,
	ReadTimeout:       30 * time.Second,
	IdleTimeout:       30 * time.Second,
	MaxConns:          512,
}

// NewServer returns a server for h with the limits, and the listener to
// serve it on (ln, counted against MaxConns):
//
//	srv, ln := api.NewServer(h, ln, api.DefaultServerLimits)
//	srv.Serve(ln)
func NewServer(h http.Handler, ln net.Listener, lim ServerLimits) (*http.Server, net.Listener) {
	cl := &capListener{Listener: ln, max: int64(lim.MaxConns)}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		ReadTimeout:       lim.ReadTimeout,
		IdleTimeout:       lim.IdleTimeout,
		ConnState: func(c net.Conn, s http.ConnState) {
			if s == http.StateIdle && cl.max > 0 && cl.open.Load() > cl.max*3/4 {
				c.Close() // shed keep-alives under pressure
			}
		},
	}
	if lim.MaxConns <= 0 {
		return srv, ln
	}
	return srv, cl
}

// capListener closes the connections it accepts beyond max open at once.
type capListener struct {
	net.Listener
	max  int64
	open atomic.Int64
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			c.Close()
			continue
		}
		return &countedConn{Conn: c, l: l}, nil
	}
}

type countedConn struct {
	net.Conn
	l    *capListener
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}
