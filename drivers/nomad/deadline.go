package nomad

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// DefaultRequestTimeout is how long berth waits for Nomad to answer one
// request (Config.RequestTimeout) unless told otherwise. Nomad answers
// berth's requests in milliseconds; one that takes this long is stuck
// (a hung agent, a dropped connection nobody reset, a proxy holding it).
const DefaultRequestTimeout = 30 * time.Second

// streamIdle is how long the event stream may stay silent before it is
// cut and opened again: Nomad sends a heartbeat every 10 s.
const streamIdle = 35 * time.Second

// TimeoutError is the error of a request to Nomad cut by its deadline.
// It is a net.Error whose Timeout is true, and it unwraps to
// context.DeadlineExceeded.
type TimeoutError struct {
	Method, Path string
	// After is the deadline the request had: the request timeout, plus
	// the wait of a blocking query; for the event stream, how long it
	// may stay silent.
	After  time.Duration
	stream bool
}

func (e *TimeoutError) Error() string {
	if e.stream {
		return fmt.Sprintf("Nomad's event stream was silent for %s (it sends a heartbeat every 10s): cut", e.After)
	}
	return fmt.Sprintf("no answer from Nomad to %s %s within %s: cut (request timeout)", e.Method, e.Path, e.After)
}

func (e *TimeoutError) Unwrap() error   { return context.DeadlineExceeded }
func (e *TimeoutError) Timeout() bool   { return true }
func (e *TimeoutError) Temporary() bool { return true }

// deadlines is an http.RoundTripper that gives every request to Nomad a
// deadline, its answer's body included, so no request hangs: the api
// package sets none and berth's contexts may have none. A blocking query
// gets its wait on top (Nomad adds up to wait/16 of jitter); the event
// stream, which never ends, is cut only when it stays silent for
// streamIdle.
type deadlines struct {
	next    http.RoundTripper
	timeout time.Duration
}

func (d deadlines) RoundTrip(req *http.Request) (*http.Response, error) {
	terr := &TimeoutError{Method: req.Method, Path: req.URL.Path, After: d.timeout}
	ctx, cancel := context.WithCancelCause(req.Context())
	if req.URL.Path == "/v1/event/stream" {
		terr.After, terr.stream = streamIdle, true
	} else if wait, ok := blockingWait(req); ok {
		terr.After += wait + wait/16
	}
	timer := time.AfterFunc(terr.After, func() { cancel(terr) })
	resp, err := d.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		timer.Stop()
		cancel(nil)
		if context.Cause(ctx) == terr {
			return nil, terr
		}
		return nil, err
	}
	resp.Body = &deadlineBody{body: resp.Body, ctx: ctx, cancel: cancel, terr: terr, timer: timer}
	return resp, nil
}

// CloseIdleConnections passes on to the transport (Driver.Close).
func (d deadlines) CloseIdleConnections() {
	if c, ok := d.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// blockingWait returns the wait of a blocking query (?index=N, N > 0):
// ?wait=, or Nomad's default of 5 minutes.
func blockingWait(req *http.Request) (time.Duration, bool) {
	q := req.URL.Query()
	if idx, err := strconv.ParseUint(q.Get("index"), 10, 64); err != nil || idx == 0 {
		return 0, false
	}
	w := q.Get("wait")
	if w == "" {
		return 5 * time.Minute, true
	}
	d, err := time.ParseDuration(w)
	if err != nil {
		return 5 * time.Minute, true
	}
	return d, true
}

// deadlineBody ends the request's deadline when the body is closed, and
// says a read cut by it was cut by it.
type deadlineBody struct {
	body   io.ReadCloser
	ctx    context.Context
	cancel context.CancelCauseFunc
	terr   *TimeoutError
	timer  *time.Timer // the stream's is reset by each read
	once   sync.Once
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if b.terr.stream && n > 0 {
		b.timer.Reset(b.terr.After)
	}
	if err != nil && err != io.EOF && context.Cause(b.ctx) == b.terr {
		return n, b.terr
	}
	return n, err
}

func (b *deadlineBody) Close() error {
	err := b.body.Close()
	b.once.Do(func() {
		b.timer.Stop()
		b.cancel(nil)
	})
	return err
}
