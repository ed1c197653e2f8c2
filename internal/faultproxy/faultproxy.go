// Package faultproxy is an HTTP proxy that injects faults between a
// client and a server: berth and a real Nomad agent in the TestReal…
// tests. It forwards every request (the event stream too, unbuffered)
// unless a rule matches it; a rule hangs it, answers it with a status
// and body, resets the connection, or forwards it and loses the answer
// (the server applied the write, the client never hears). Partition
// hangs everything for a while. It counts what it saw, by method and
// path, so a test can tell how often a client retried.
//
// It is test support: no berth binary imports it.
package faultproxy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Fault is what a rule does to a request it matches.
type Fault int

const (
	// Hang never answers: the request is held until the client gives up
	// (or Release, or Close).
	Hang Fault = iota + 1
	// Status answers Rule.Status with Rule.Body (text/plain) without
	// forwarding.
	Status
	// Reset closes the connection with a TCP reset without forwarding.
	Reset
	// LoseResponse forwards the request, reads the server's whole answer,
	// then resets the connection: the server did it, the client does not
	// know.
	LoseResponse
)

func (f Fault) String() string {
	switch f {
	case Hang:
		return "hang"
	case Status:
		return "status"
	case Reset:
		return "reset"
	case LoseResponse:
		return "lose-response"
	}
	return "forward"
}

// Rule selects requests and says what to do to them.
type Rule struct {
	// Method ("" any) and Path (a prefix of the URL path; "" any) select
	// requests; Match, when set, must hold too.
	Method string
	Path   string
	Match  func(*http.Request) bool
	Fault  Fault
	// Status and Body are the answer of a Status fault.
	Status int
	Body   string
	// Times is how many requests the rule hits before it expires; 0:
	// until removed.
	Times int
}

// Request is one request the proxy saw and what it did to it.
type Request struct {
	Method, Path, Query string
	// Fault is the fault injected; 0 when forwarded.
	Fault Fault
}

// Proxy is a fault-injecting HTTP proxy. It is safe for concurrent use.
type Proxy struct {
	target  *url.URL
	ln      net.Listener
	srv     *http.Server
	forward *httputil.ReverseProxy
	tr      *http.Transport

	mu        sync.Mutex
	rules     []*rule
	seen      []Request
	partition time.Time // hang everything until then
	release   chan struct{}
	closed    chan struct{}
}

type rule struct {
	Rule
	left int // hits left; <0: forever
}

// New starts a proxy for target (a URL such as http://127.0.0.1:4646) on
// a free loopback port.
func New(target string) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: target %q: %w", target, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	p := &Proxy{target: u, ln: ln, tr: tr, release: make(chan struct{}), closed: make(chan struct{})}
	p.forward = &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(u); r.Out.Host = r.In.Host },
		Transport:     tr,
		FlushInterval: -1, // the event stream as it comes
		ErrorLog:      nil,
	}
	p.srv = &http.Server{Handler: p}
	go p.srv.Serve(ln)
	return p, nil
}

// URL is the proxy's address, to give the client instead of the target's.
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// Close stops the proxy and ends the requests it holds.
func (p *Proxy) Close() error {
	p.mu.Lock()
	select {
	case <-p.closed:
	default:
		close(p.closed)
	}
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := p.srv.Shutdown(ctx)
	if err != nil {
		err = p.srv.Close()
	}
	p.tr.CloseIdleConnections()
	return err
}

// Inject adds a rule; rules are tried in the order added. remove takes it
// out again.
func (p *Proxy) Inject(r Rule) (remove func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	rr := &rule{Rule: r, left: r.Times}
	if r.Times == 0 {
		rr.left = -1
	}
	p.rules = append(p.rules, rr)
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		for i, x := range p.rules {
			if x == rr {
				p.rules = append(p.rules[:i], p.rules[i+1:]...)
				return
			}
		}
	}
}

// Clear removes every rule and ends a partition.
func (p *Proxy) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = nil
	p.partition = time.Time{}
}

// Release lets go of the requests held by Hang faults and partitions so
// far: they are reset, as a cut connection would be.
func (p *Proxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.release)
	p.release = make(chan struct{})
}

// Partition hangs every request for d from now, as a network partition
// does (a request in flight then is reset); requests after it are
// forwarded again.
func (p *Proxy) Partition(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.partition = time.Now().Add(d)
}

// Requests returns what the proxy saw, in order.
func (p *Proxy) Requests() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Request(nil), p.seen...)
}

// Count returns how many requests with method ("" any) and a path
// starting with prefix the proxy saw, faulted or not.
func (p *Proxy) Count(method, prefix string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, r := range p.seen {
		if (method == "" || r.Method == method) && strings.HasPrefix(r.Path, prefix) {
			n++
		}
	}
	return n
}

// pick returns the fault for r (nil: forward) and records r.
func (p *Proxy) pick(r *http.Request) (*Rule, time.Time, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery}
	var hit *Rule
	until := time.Time{}
	if time.Now().Before(p.partition) {
		hit, until = &Rule{Fault: Hang}, p.partition
	} else {
		for i, x := range p.rules {
			if (x.Method != "" && x.Method != r.Method) || !strings.HasPrefix(r.URL.Path, x.Path) || (x.Match != nil && !x.Match(r)) {
				continue
			}
			rr := x.Rule
			hit = &rr
			if x.left > 0 {
				x.left--
				if x.left == 0 {
					p.rules = append(p.rules[:i], p.rules[i+1:]...)
				}
			}
			break
		}
	}
	if hit != nil {
		seen.Fault = hit.Fault
	}
	p.seen = append(p.seen, seen)
	return hit, until, p.release
}

// ServeHTTP applies the first matching rule, or forwards.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hit, until, release := p.pick(r)
	if hit == nil {
		p.forward.ServeHTTP(w, r)
		return
	}
	switch hit.Fault {
	case Hang:
		var timeout <-chan time.Time
		if !until.IsZero() {
			t := time.NewTimer(time.Until(until))
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-r.Context().Done():
			return
		case <-p.closed:
		case <-release:
		case <-timeout:
		}
		reset(w)
	case Status:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(hit.Status)
		io.WriteString(w, hit.Body)
	case Reset:
		reset(w)
	case LoseResponse:
		out := r.Clone(r.Context())
		out.RequestURI = ""
		out.URL.Scheme, out.URL.Host, out.Host = p.target.Scheme, p.target.Host, r.Host
		resp, err := p.tr.RoundTrip(out)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		reset(w)
	default:
		p.forward.ServeHTTP(w, r)
	}
}

// reset closes the client's connection with a TCP reset (SO_LINGER 0),
// without an answer.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}
