package faultproxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func setup(t *testing.T) (*Proxy, *atomic.Int64) {
	t.Helper()
	var served atomic.Int64
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		io.WriteString(w, "hello "+r.URL.Path)
	}))
	t.Cleanup(backend.Close)
	p, err := New(backend.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, &served
}

func get(ctx context.Context, p *Proxy, path string) (int, string, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", p.URL()+path, nil)
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestFaults: each fault does what it says, to the requests it matches
// and as often as it is told; the rest is forwarded; the proxy counts
// everything.
func TestFaults(t *testing.T) {
	ctx := t.Context()
	p, served := setup(t)
	if code, body, err := get(ctx, p, "/v1/nodes"); err != nil || code != 200 || body != "hello /v1/nodes" {
		t.Fatalf("forward: %d %q %v", code, body, err)
	}

	p.Inject(Rule{Method: "GET", Path: "/v1/jobs", Fault: Status, Status: 500, Body: "1 error occurred: rpc error: EOF", Times: 2})
	for i := range 2 {
		if code, body, _ := get(ctx, p, "/v1/jobs"); code != 500 || body != "1 error occurred: rpc error: EOF" {
			t.Errorf("status fault %d: %d %q", i, code, body)
		}
	}
	if code, _, _ := get(ctx, p, "/v1/jobs"); code != 200 {
		t.Errorf("after Times: %d, want forwarded", code)
	}

	p.Inject(Rule{Path: "/v1/reset", Fault: Reset, Times: 1})
	if _, _, err := get(ctx, p, "/v1/reset"); err == nil || !strings.Contains(err.Error(), "reset") && !strings.Contains(err.Error(), "EOF") {
		t.Errorf("reset fault: %v, want a reset connection", err)
	}

	before := served.Load()
	p.Inject(Rule{Path: "/v1/lost", Fault: LoseResponse, Times: 1})
	if _, _, err := get(ctx, p, "/v1/lost"); err == nil {
		t.Errorf("lose-response: no error")
	}
	if served.Load() != before+1 {
		t.Errorf("lose-response: the backend served %d, want the request forwarded once", served.Load()-before)
	}

	remove := p.Inject(Rule{Path: "/v1/hang", Fault: Hang})
	hctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, _, err := get(hctx, p, "/v1/hang")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("hang: %v, want the client's deadline", err)
	}
	done := make(chan error)
	go func() { _, _, err := get(ctx, p, "/v1/hang"); done <- err }()
	for p.Count("GET", "/v1/hang") < 2 {
		time.Sleep(time.Millisecond)
	}
	p.Release()
	if err := <-done; err == nil {
		t.Errorf("a released hang answered")
	}
	remove()
	if code, _, _ := get(ctx, p, "/v1/hang"); code != 200 {
		t.Errorf("after remove: %d", code)
	}

	if n := p.Count("GET", "/v1/jobs"); n != 3 {
		t.Errorf("Count(GET /v1/jobs) = %d, want 3", n)
	}
	faults := map[Fault]int{}
	for _, r := range p.Requests() {
		faults[r.Fault]++
	}
	if faults[Status] != 2 || faults[Reset] != 1 || faults[LoseResponse] != 1 || faults[Hang] != 2 {
		t.Errorf("faults recorded %v", faults)
	}
}

// TestPartition: every request hangs while the partition lasts, and is
// forwarded after.
func TestPartition(t *testing.T) {
	ctx := t.Context()
	p, _ := setup(t)
	p.Partition(time.Hour)
	hctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, _, err := get(hctx, p, "/v1/nodes")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("during the partition: %v, want no answer", err)
	}
	p.Clear()
	if code, _, err := get(ctx, p, "/v1/nodes"); code != 200 {
		t.Errorf("after the partition: %d %v", code, err)
	}
}
