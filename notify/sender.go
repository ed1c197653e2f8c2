package notify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-dev/berth/internal/text"
	"github.com/prometheus/client_golang/prometheus"
)

// Clock is where the sender reads the time and waits for it: clock.Real,
// or a *clock.Manual a test moves.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// delivery is one message on its way to one receiver, through its
// attempts.
type delivery struct {
	// notifier names the route (or "commit-status") in logs and metrics.
	notifier string
	// what says what it carries in the logs: "3 events", "a summary of
	// 1,000 events", "the commit status of abc1234".
	what string
	// request builds one attempt's request at now, reading the secrets
	// then (a rotated file takes effect at the next attempt); it returns
	// the secrets it read, which no log line may show.
	request func(now time.Time) (*http.Request, []string, error)
	// accept, when not nil, says whether an answer that is not 2xx is
	// fine anyway (GitLab's answer to a status posted twice).
	accept func(status int, body []byte) bool
	// attempt is how many attempts were made.
	attempt int
}

// sender delivers over a bounded queue: at most limit deliveries held
// (queued, being sent, or waiting to be retried); one more is dropped.
// Workers send; a failed attempt waits its backoff off the workers, on
// the clock, and queues again.
type sender struct {
	cfg   *Config
	log   *slog.Logger
	queue chan *delivery

	mu   sync.Mutex
	held int
	rand *rand.Rand

	sent, failed, dropped *prometheus.CounterVec
	retries               *prometheus.CounterVec
	queued                prometheus.GaugeFunc
}

func newSender(cfg *Config) *sender {
	s := &sender{cfg: cfg, log: cfg.Logger, queue: make(chan *delivery, cfg.Queue), rand: cfg.Rand}
	s.sent = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_notifications_sent_total", Help: "Notifications delivered (a 2xx answer), by notifier (the Notification's name, or commit-status).",
	}, []string{"notifier"})
	s.failed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_notifications_failed_total", Help: "Notifications given up: refused by the receiver (4xx), or failing on every attempt, by notifier.",
	}, []string{"notifier"})
	s.dropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_notifications_dropped_total", Help: "Notifications dropped unsent because the queue was full (or berth stopped), by notifier.",
	}, []string{"notifier"})
	s.retries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_notification_retries_total", Help: "Attempts of notifications that failed and were retried, by notifier.",
	}, []string{"notifier"})
	s.queued = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "berth_notifications_queued", Help: "Notifications held: queued, being sent, or waiting to be retried.",
	}, func() float64 { return float64(s.heldNow()) })
	return s
}

func (s *sender) collectors() []prometheus.Collector {
	return []prometheus.Collector{s.sent, s.failed, s.dropped, s.retries, s.queued}
}

func (s *sender) heldNow() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// enqueue queues d; it never waits: with the queue at its bound, d is
// dropped, counted and logged, and enqueue returns false.
func (s *sender) enqueue(d *delivery) bool {
	s.mu.Lock()
	if s.held >= cap(s.queue) {
		s.mu.Unlock()
		s.dropped.WithLabelValues(d.notifier).Inc()
		s.log.Warn("notifier "+d.notifier+": dropped "+d.what+": the queue holds "+text.Plural(cap(s.queue), "notification")+" already (receivers slow or down)", "notifier", d.notifier)
		return false
	}
	s.held++
	s.mu.Unlock()
	s.queue <- d // room: held counts every delivery the queue may get back
	return true
}

// release ends d's hold on the queue.
func (s *sender) release() {
	s.mu.Lock()
	s.held--
	s.mu.Unlock()
}

// run sends with cfg.Workers workers until ctx ends; what is still held
// then is dropped (counted).
func (s *sender) run(ctx context.Context) {
	var wg sync.WaitGroup
	for range s.cfg.Workers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case d := <-s.queue:
					s.attempt(ctx, d)
				}
			}
		})
	}
	wg.Wait()
	for {
		select {
		case d := <-s.queue:
			s.dropped.WithLabelValues(d.notifier).Inc()
			s.release()
		default:
			return
		}
	}
}

// outcome is how one attempt ended.
type outcome struct {
	ok    bool
	retry bool
	// after is the receiver's Retry-After (0: none).
	after time.Duration
	// why says what went wrong, scrubbed of secrets.
	why string
}

// attempt makes one attempt at d and then retires it (sent, or given
// up) or schedules its next attempt.
func (s *sender) attempt(ctx context.Context, d *delivery) {
	d.attempt++
	host := ""
	o := func() outcome {
		req, secrets, err := d.request(s.cfg.Clock.Now())
		if err != nil {
			// Where the secret is read is wrong: no retry fixes that soon.
			return outcome{why: err.Error()}
		}
		host = req.URL.Host
		actx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		defer cancel()
		resp, err := s.cfg.Client.Do(req.WithContext(actx))
		if err != nil {
			why := scrub(transportError(err, actx, s.cfg.Timeout), secrets)
			return outcome{retry: true, why: why}
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return classify(resp, body, d.accept, s.cfg.Clock.Now(), secrets)
	}()
	attrs := []any{"notifier", d.notifier}
	if host != "" {
		attrs = append(attrs, "host", host)
	}
	switch {
	case o.ok:
		s.log.Debug("notifier "+d.notifier+": delivered "+d.what, attrs...)
		s.sent.WithLabelValues(d.notifier).Inc()
		s.release()
	case o.retry && d.attempt < s.cfg.Attempts && ctx.Err() == nil:
		wait := s.backoff(d.attempt)
		if o.after > 0 {
			wait = min(o.after, maxRetryAfter)
		}
		s.retries.WithLabelValues(d.notifier).Inc()
		s.log.Warn(fmt.Sprintf("notifier %s: %s not delivered (attempt %d of %d): %s; again in %s", d.notifier, d.what, d.attempt, s.cfg.Attempts, o.why, text.Seconds(wait)), attrs...)
		timer := s.cfg.Clock.After(wait)
		go func() {
			select {
			case <-timer:
				s.queue <- d // its place is held
			case <-ctx.Done():
				s.dropped.WithLabelValues(d.notifier).Inc()
				s.release()
			}
		}()
	default:
		tries := ""
		if o.retry {
			tries = fmt.Sprintf(" after %s", text.Plural(d.attempt, "attempt"))
		}
		s.log.Error(fmt.Sprintf("notifier %s: %s not delivered%s, given up: %s", d.notifier, d.what, tries, o.why), attrs...)
		// Counted once logged: whoever sees the count sees the line.
		s.failed.WithLabelValues(d.notifier).Inc()
		s.release()
	}
}

// maxRetryAfter bounds the wait a receiver's Retry-After asks for.
const maxRetryAfter = 15 * time.Minute

// classify reads an answer: 2xx (or one accept takes) is delivered; 429
// (with its Retry-After), 408 and 5xx are retried; any other is given
// up (the receiver refused it: a retry would be refused again).
func classify(resp *http.Response, body []byte, accept func(int, []byte) bool, now time.Time, secrets []string) outcome {
	code := resp.StatusCode
	if code >= 200 && code < 300 || (accept != nil && accept(code, body)) {
		return outcome{ok: true}
	}
	why := resp.Status
	if b := strings.TrimSpace(string(body)); b != "" {
		if len(b) > 200 {
			b = b[:200] + "…"
		}
		why += ": " + strings.Join(strings.Fields(b), " ")
	}
	why = scrub(why, secrets)
	switch {
	case code == http.StatusTooManyRequests:
		return outcome{retry: true, after: retryAfter(resp.Header.Get("Retry-After"), now), why: why}
	case code == http.StatusRequestTimeout || code >= 500:
		return outcome{retry: true, after: retryAfter(resp.Header.Get("Retry-After"), now), why: why}
	case code >= 300 && code < 400:
		return outcome{why: why + " (a redirect: berth follows none; give the URL it points to)"}
	}
	return outcome{why: why}
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date; 0
// when absent or past.
func retryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	if n, err := strconv.Atoi(strings.TrimSpace(h)); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// backoff is the wait before the attempt after the attempt-th: it
// doubles from BackoffMin up to BackoffMax, and is drawn at random in
// its upper half (jitter: receivers that failed together are not all
// retried at once).
func (s *sender) backoff(attempt int) time.Duration {
	d := s.cfg.BackoffMin
	for i := 1; i < attempt && d < s.cfg.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, s.cfg.BackoffMax)
	s.mu.Lock()
	j := time.Duration(s.rand.Int64N(int64(d/2) + 1))
	s.mu.Unlock()
	return d/2 + j
}

// transportError says why a request got no answer, without its URL (a
// *url.Error names it whole): cut by the per-request timeout, or the
// network's error.
func transportError(err error, ctx context.Context, timeout time.Duration) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "no answer within " + text.Seconds(timeout) + " (the per-request timeout)"
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}

// scrub replaces every secret in s, and its URL-escaped forms, with
// "***".
func scrub(s string, secrets []string) string {
	for _, sec := range secrets {
		if len(sec) < 4 {
			continue
		}
		for _, form := range []string{sec, url.PathEscape(sec), url.QueryEscape(sec)} {
			s = strings.ReplaceAll(s, form, "***")
		}
		if u, err := url.Parse(sec); err == nil && u.Host != "" {
			// The URL's parts that may carry a credential: its path, its
			// query and its user.
			for _, part := range []string{u.RawQuery, u.EscapedPath(), u.User.String()} {
				if len(part) > 1 {
					s = strings.ReplaceAll(s, part, "***")
				}
			}
		}
	}
	return s
}
