package notify

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/clock"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeTransport answers each request with the next of its answers (the
// last one again when they run out) and records when each came, on clk.
type fakeTransport struct {
	mu      sync.Mutex
	clk     *clock.Manual
	answers []func(*http.Request) (*http.Response, error)
	times   []time.Time
	reqs    []*http.Request
	bodies  [][]byte
}

func (f *fakeTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	i := min(len(f.times), len(f.answers)-1)
	f.times = append(f.times, f.clk.Now())
	f.reqs = append(f.reqs, r)
	f.bodies = append(f.bodies, body)
	answer := f.answers[i]
	f.mu.Unlock()
	return answer(r)
}

func (f *fakeTransport) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.times)
}

func status(code int, header map[string]string, body string) func(*http.Request) (*http.Response, error) {
	return func(r *http.Request) (*http.Response, error) {
		h := http.Header{}
		for k, v := range header {
			h.Set(k, v)
		}
		return &http.Response{StatusCode: code, Status: http.StatusText(code), Header: h, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
	}
}

// waitFor polls cond until it holds (5s at most): the sender's
// goroutines act on their own.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// testEnv is a Notifier over a fake transport and a manual clock, its
// logs in buf.
type testEnv struct {
	n   *Notifier
	tr  *fakeTransport
	clk *clock.Manual
	reg *prometheus.Registry
	buf *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const (
	hookURL = "https://user:pa55word@hooks.example.com/services/T0001/B0001/s3cretPATH?token=q7u3ry"
	hookKey = "hmac-key-0123456789"
)

func newEnv(t *testing.T, cfg Config, answers ...func(*http.Request) (*http.Response, error)) *testEnv {
	t.Helper()
	clk := clock.NewManual(at)
	tr := &fakeTransport{clk: clk, answers: answers}
	buf := &syncBuffer{}
	reg := prometheus.NewRegistry()
	cfg.Clock, cfg.Client, cfg.Registerer = clk, &http.Client{Transport: tr}, reg
	cfg.Logger = slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.Rand = rand.New(rand.NewPCG(1, 2))
	if cfg.Getenv == nil {
		cfg.Getenv = func(k string) string {
			return map[string]string{"HOOK_URL": hookURL, "HOOK_KEY": hookKey, "GH_TOKEN": "ghp_t0ken0123456789abcdef"}[k]
		}
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { n.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return &testEnv{n: n, tr: tr, clk: clk, reg: reg, buf: buf}
}

// news is a cycle that preempted ml/a, routed to one webhook.
func news(format string) view.News {
	spec := schema.NotificationSpec{Format: format, URL: schema.SecretRef{Env: "HOOK_URL"}, SummarizeAbove: 5}
	if format == schema.NotifyWebhook {
		spec.Secret = schema.SecretRef{Env: "HOOK_KEY"}
	}
	set := &schema.Set{Notifications: []schema.Notification{{Meta: schema.Meta{Name: "hook"}, Spec: spec}}}
	return view.News{Model: &view.Model{ObservedAt: at, Inputs: view.Inputs{Set: set}},
		Events: []view.Event{{Seq: 1, Workspace: "ml/a", Project: "ml", Kind: "preempted", Transition: view.Transition{At: at, To: view.StatePreempting}}}}
}

func counter(t *testing.T, c *prometheus.CounterVec, notifier string) int {
	t.Helper()
	return int(testutil.ToFloat64(c.WithLabelValues(notifier)))
}

// TestRetryBackoff: a delivery that meets 503, 503 and a 429 asking for
// 7s is tried again after a backoff that doubles, with jitter in its
// upper half, then after the Retry-After, and is delivered signed; each
// attempt is signed at its own time, with the same delivery id.
func TestRetryBackoff(t *testing.T) {
	env := newEnv(t, Config{BackoffMin: time.Second, BackoffMax: 8 * time.Second, Attempts: 5},
		status(503, nil, ""), status(503, nil, ""), status(429, map[string]string{"Retry-After": "7"}, "slow down"), status(200, nil, "ok"))
	env.n.News(news(schema.NotifyWebhook))
	var waits []time.Duration
	for attempt := 1; attempt <= 3; attempt++ {
		waitFor(t, "a retry's timer", func() bool { _, ok := env.clk.Next(); return ok && env.tr.count() == attempt })
		next, _ := env.clk.Next()
		waits = append(waits, next.Sub(env.clk.Now()))
		env.clk.Advance(next.Sub(env.clk.Now()))
	}
	waitFor(t, "the delivery", func() bool { return counter(t, env.n.send.sent, "hook") == 1 })
	// Backoff 1s then 2s, each drawn in [d/2, d]; then the 7s asked for.
	if w := waits[0]; w < 500*time.Millisecond || w > time.Second {
		t.Errorf("first wait %s, want within [0.5s, 1s]", w)
	}
	if w := waits[1]; w < time.Second || w > 2*time.Second {
		t.Errorf("second wait %s, want within [1s, 2s]", w)
	}
	if waits[2] != 7*time.Second {
		t.Errorf("wait after 429 %s, want its Retry-After 7s", waits[2])
	}
	if got := counter(t, env.n.send.retries, "hook"); got != 3 {
		t.Errorf("%d retries counted, want 3", got)
	}
	ids := map[string]bool{}
	for i, r := range env.tr.reqs {
		ids[r.Header.Get(DeliveryHeader)] = true
		if err := Verify([]byte(hookKey), env.tr.bodies[i], r.Header.Get(SignatureHeader), env.tr.times[i], time.Second); err != nil {
			t.Errorf("attempt %d: %v", i+1, err)
		}
	}
	if len(ids) != 1 {
		t.Errorf("delivery ids %v: want one id for every attempt", ids)
	}
}

// TestGiveUp: a receiver failing every attempt is given up after
// Attempts; one that refuses (4xx) or redirects at once; both counted
// failed.
func TestGiveUp(t *testing.T) {
	env := newEnv(t, Config{Attempts: 3}, status(500, nil, ""))
	env.n.News(news(schema.NotifySlack))
	for attempt := 1; attempt < 3; attempt++ {
		waitFor(t, "a retry's timer", func() bool { _, ok := env.clk.Next(); return ok && env.tr.count() == attempt })
		next, _ := env.clk.Next()
		env.clk.Advance(next.Sub(env.clk.Now()))
	}
	waitFor(t, "giving up", func() bool { return counter(t, env.n.send.failed, "hook") == 1 })
	if env.tr.count() != 3 {
		t.Errorf("%d attempts, want 3", env.tr.count())
	}
	if !strings.Contains(env.buf.String(), "given up: Internal Server Error") || !strings.Contains(env.buf.String(), "after 3 attempts") {
		t.Errorf("log:\n%s", env.buf.String())
	}
	for _, code := range []int{400, 404, 301} {
		env := newEnv(t, Config{}, status(code, nil, "no_service"))
		env.n.News(news(schema.NotifySlack))
		waitFor(t, "giving up", func() bool { return counter(t, env.n.send.failed, "hook") == 1 })
		if env.tr.count() != 1 {
			t.Errorf("%d: %d attempts, want 1", code, env.tr.count())
		}
	}
}

// TestQueueBound: with receivers that do not answer, the queue holds
// Queue deliveries and drops the rest, counted; News never waits.
func TestQueueBound(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	hang := func(r *http.Request) (*http.Response, error) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
		return nil, errors.New("gone")
	}
	env := newEnv(t, Config{Queue: 3, Workers: 1, Cycles: 1000, Timeout: time.Hour}, hang)
	start := time.Now()
	for range 10 {
		env.n.News(news(schema.NotifySlack))
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("10 News took %s: News waited", d)
	}
	waitFor(t, "the drops", func() bool { return counter(t, env.n.send.dropped, "hook") == 7 })
	if h := env.n.send.heldNow(); h != 3 {
		t.Errorf("%d held, want 3", h)
	}
	if !strings.Contains(env.buf.String(), "the queue holds 3 notifications already") {
		t.Errorf("log:\n%s", env.buf.String())
	}
	// A full hand-over drops whole cycles, counted.
	stuck := &Notifier{cycles: make(chan view.News, 1), log: slog.New(slog.DiscardHandler),
		cyclesDrops: prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})}
	stuck.News(view.News{})
	stuck.News(view.News{})
	if got := testutil.ToFloat64(stuck.cyclesDrops); got != 1 {
		t.Errorf("%v cycles dropped, want 1", got)
	}
}

// TestNoSecretInLogs: whatever goes wrong, berth's logs never show a
// receiver's URL (its path, query or user), its signing key or a token:
// they name the notifier and the host.
func TestNoSecretInLogs(t *testing.T) {
	echo := func(r *http.Request) (*http.Response, error) {
		return status(500, nil, "bad request to "+r.URL.String()+" key "+hookKey)(r)
	}
	netErr := func(r *http.Request) (*http.Response, error) {
		return nil, errors.New("dial tcp: lookup " + r.URL.String() + ": no such host")
	}
	redirect := status(302, map[string]string{"Location": hookURL + "&next=1"}, "moved to "+hookURL)
	cases := map[string]struct {
		cfg    Config
		format string
		answer func(*http.Request) (*http.Response, error)
	}{
		"5xx echoing the URL and key":  {format: schema.NotifyWebhook, answer: echo},
		"network error naming the URL": {format: schema.NotifySlack, answer: netErr},
		"redirect":                     {format: schema.NotifySlack, answer: redirect},
		"timeout": {format: schema.NotifyWebhook, cfg: Config{Timeout: time.Millisecond}, answer: func(r *http.Request) (*http.Response, error) {
			<-r.Context().Done()
			return nil, r.Context().Err()
		}},
		"not a URL": {format: schema.NotifySlack, cfg: Config{Getenv: func(string) string { return "ftp://x:s3cretPATH@h/p" }}, answer: status(200, nil, "")},
	}
	secrets := []string{"pa55word", "s3cretPATH", "q7u3ry", hookKey, "T0001"}
	for name, tt := range cases {
		t.Run(name, func(t *testing.T) {
			tt.cfg.Attempts = 2
			env := newEnv(t, tt.cfg, tt.answer)
			env.n.News(news(tt.format))
			waitFor(t, "giving up", func() bool {
				if next, ok := env.clk.Next(); ok {
					env.clk.Advance(next.Sub(env.clk.Now())) // the retry's backoff
				}
				return counter(t, env.n.send.failed, "hook") == 1
			})
			logs := env.buf.String()
			for _, s := range secrets {
				if strings.Contains(logs, s) {
					t.Errorf("the logs show %q:\n%s", s, logs)
				}
			}
			if !strings.Contains(logs, "notifier=hook") {
				t.Errorf("the logs do not name the notifier:\n%s", logs)
			}
			if env.tr.count() > 0 && !strings.Contains(logs, "host=hooks.example.com") {
				t.Errorf("the logs do not name the host:\n%s", logs)
			}
		})
	}
	// A missing variable is named, not guessed at.
	env := newEnv(t, Config{Getenv: func(string) string { return "" }}, status(200, nil, ""))
	env.n.News(news(schema.NotifySlack))
	waitFor(t, "giving up", func() bool { return counter(t, env.n.send.failed, "hook") == 1 })
	if !strings.Contains(env.buf.String(), "the environment variable HOOK_URL is not set") {
		t.Errorf("log:\n%s", env.buf.String())
	}
}
