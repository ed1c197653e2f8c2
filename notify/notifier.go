package notify

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	randv2 "math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/berth-dev/berth/internal/clock"
	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
	"github.com/prometheus/client_golang/prometheus"
)

// Config wires a Notifier. Every field has a default.
type Config struct {
	// Cluster names the cluster in the messages.
	Cluster string
	Logger  *slog.Logger
	// Clock times the backoffs and signs the deliveries (default
	// clock.Real).
	Clock Clock
	// Client sends the requests (default: http.DefaultTransport's);
	// whichever it is, berth follows no redirect.
	Client *http.Client
	// Timeout bounds one request, its answer's body included (default
	// 10s).
	Timeout time.Duration
	// Attempts is how many times a delivery is tried before it is given
	// up (default 5).
	Attempts int
	// BackoffMin and BackoffMax bound the wait between attempts; it
	// doubles from min to max, with jitter (defaults 1s and 1m). A 429's
	// Retry-After is waited instead (at most 15 minutes).
	BackoffMin, BackoffMax time.Duration
	// Queue is how many deliveries may be held at once, queued, being
	// sent or waiting to be retried (default 256); one more is dropped.
	// Cycles bounds the cycles handed over and not yet routed (default
	// 64); one more is dropped.
	Queue, Cycles int
	// Workers send at once (default 4).
	Workers int
	// Registerer gets the metrics (nil: none registered).
	Registerer prometheus.Registerer
	// Getenv and ReadFile read the secrets (defaults os.Getenv and
	// os.ReadFile).
	Getenv   func(string) string
	ReadFile func(string) ([]byte, error)
	// Rand draws the jitter (default: seeded at random).
	Rand *randv2.Rand
	// Commit, when not nil, posts each revision's commit status.
	Commit *CommitStatus
}

// Notifier routes what the loop tells it (News) to the specs'
// Notification routes and sends it in the background (Run). Safe for
// concurrent use.
type Notifier struct {
	cfg    Config
	log    *slog.Logger
	cycles chan view.News
	send   *sender

	mu           sync.Mutex
	cyclesLost   int
	cyclesDrops  prometheus.Counter
	overdueTold  map[schema.Ref]time.Time // the dispatcher's
	deliveryBase string
	deliveries   uint64
}

// New checks cfg and fills its defaults.
func New(cfg Config) (*Notifier, error) {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.Timeout, 10*time.Second)
	def(&cfg.BackoffMin, time.Second)
	def(&cfg.BackoffMax, time.Minute)
	if cfg.BackoffMax < cfg.BackoffMin {
		return nil, fmt.Errorf("notify: the longest backoff %s is shorter than the shortest %s", cfg.BackoffMax, cfg.BackoffMin)
	}
	for _, v := range []struct {
		p *int
		d int
	}{{&cfg.Attempts, 5}, {&cfg.Queue, 256}, {&cfg.Cycles, 64}, {&cfg.Workers, 4}} {
		if *v.p <= 0 {
			*v.p = v.d
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	// berth follows no redirect: a receiver's Location may carry a
	// credential, and a POST is not a GET.
	client := http.Client{}
	if cfg.Client != nil {
		client = *cfg.Client
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	cfg.Client = &client
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.ReadFile == nil {
		cfg.ReadFile = os.ReadFile
	}
	if cfg.Rand == nil {
		var seed [32]byte
		rand.Read(seed[:])
		cfg.Rand = randv2.New(randv2.NewChaCha8(seed))
	}
	if c := cfg.Commit; c != nil {
		if err := c.check(); err != nil {
			return nil, err
		}
	}
	n := &Notifier{cfg: cfg, log: cfg.Logger, cycles: make(chan view.News, cfg.Cycles), overdueTold: map[schema.Ref]time.Time{}}
	n.send = newSender(&n.cfg)
	n.cyclesDrops = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "berth_notification_cycles_dropped_total", Help: "Cycles whose events were dropped before routing: the notifier fell behind the loop.",
	})
	var b [4]byte
	rand.Read(b[:])
	n.deliveryBase = hex.EncodeToString(b[:])
	if r := cfg.Registerer; r != nil {
		for _, c := range append(n.send.collectors(), n.cyclesDrops) {
			if err := r.Register(c); err != nil {
				return nil, fmt.Errorf("notify: register metrics: %w", err)
			}
		}
	}
	return n, nil
}

// News hands a cycle's news over to the notifier (reconcile.Config.News).
// It never waits: when the notifier is that far behind (Config.Cycles),
// the cycle is dropped, counted and logged.
func (n *Notifier) News(v view.News) {
	select {
	case n.cycles <- v:
	default:
		n.cyclesDrops.Inc()
		n.mu.Lock()
		n.cyclesLost++
		lost := n.cyclesLost
		n.mu.Unlock()
		n.log.Warn(fmt.Sprintf("notifications: dropped a cycle's news (%s, %s dropped so far): the notifier is behind the loop", text.Plural(len(v.Events), "event"), text.Plural(lost, "cycle")))
	}
}

// Run routes and sends until ctx ends; then what is still queued is
// dropped (counted). Call it once.
func (n *Notifier) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { n.send.run(ctx) })
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case v := <-n.cycles:
			n.dispatch(v)
		}
	}
}

// dispatch turns one cycle's news into deliveries: the events routes
// ask for, by route (a summary above a route's summarizeAbove), and the
// revision's commit status.
func (n *Notifier) dispatch(v view.News) {
	events := n.Events(v)
	var routes []schema.Notification
	if v.Model != nil && v.Model.Inputs.Set != nil {
		routes = v.Model.Inputs.Set.Notifications
		if v.Applied != nil {
			// A route that cannot send shows now, not when an event is
			// lost to it.
			for _, p := range n.Check(v.Model.Inputs.Set) {
				n.log.Warn(p)
			}
		}
	}
	for _, b := range Route(routes, events) {
		if d, err := n.batchDelivery(b); err != nil {
			n.send.failed.WithLabelValues(b.Route.Meta.Name).Inc()
			n.log.Error("notifier "+b.Route.Meta.Name+": "+err.Error(), "notifier", b.Route.Meta.Name)
		} else {
			n.send.enqueue(d)
		}
	}
	if c := n.cfg.Commit; c != nil {
		if r := v.Applied; r != nil {
			n.send.enqueue(c.delivery(r.ID, true, nil, n.cfg))
		}
		if r := v.Refused; r != nil {
			n.send.enqueue(c.delivery(r.ID, false, r.Errors, n.cfg))
		}
	}
}

// Events are the events of one cycle's news a route may ask for: the
// workspaces' (from the timeline's events), the waits that passed their
// bound this cycle (once per wait), and the revisions'. Only the
// dispatcher calls it (it keeps what overdue waits it told).
func (n *Notifier) Events(v view.News) []Event {
	var out []Event
	for _, e := range v.Events {
		if ev, ok := workspaceEvent(e, v.Model); ok {
			out = append(out, ev)
		}
	}
	out = append(out, overdue(v.Model, n.overdueTold)...)
	return append(out, revisionEvents(v)...)
}

// batchDelivery is the delivery of one route's batch: its body rendered
// now, its URL and key read at each attempt.
func (n *Notifier) batchDelivery(b Batch) (*delivery, error) {
	name := b.Route.Meta.Name
	var body []byte
	var err error
	switch b.Route.Spec.Format {
	case schema.NotifySlack:
		body, err = SlackBody(b, n.cfg.Cluster)
	default:
		body, err = WebhookBody(b, n.cfg.Cluster)
	}
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	what := text.Plural(len(b.Events), "event")
	event := b.Events[0].Event
	if b.Summary != nil {
		what, event = "a summary of "+text.Plural(b.Summary.Total, "event"), "summary"
	} else if len(b.Events) > 1 {
		event = "batch"
	}
	n.mu.Lock()
	n.deliveries++
	id := fmt.Sprintf("%s-%d", n.deliveryBase, n.deliveries)
	n.mu.Unlock()
	spec := b.Route.Spec
	return &delivery{notifier: name, what: what, request: func(now time.Time) (*http.Request, []string, error) {
		u, err := n.secret(spec.URL)
		if err != nil {
			return nil, nil, fmt.Errorf("its URL: %w", err)
		}
		secrets := []string{u}
		target, err := url.Parse(u)
		if err != nil || (target.Scheme != "https" && target.Scheme != "http") || target.Host == "" {
			return nil, secrets, fmt.Errorf("its URL (%s) is not an http:// or https:// URL", spec.URL)
		}
		req, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(body))
		if err != nil {
			return nil, secrets, fmt.Errorf("its URL (%s) is not usable", spec.URL)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("User-Agent", "berth")
		if spec.Format == schema.NotifyWebhook {
			key, err := n.secret(spec.Secret)
			if err != nil {
				return nil, secrets, fmt.Errorf("its signing key: %w", err)
			}
			secrets = append(secrets, key)
			req.Header.Set(SignatureHeader, Sign([]byte(key), body, now))
			req.Header.Set(DeliveryHeader, id)
			req.Header.Set(EventHeader, event)
		}
		return req, secrets, nil
	}}, nil
}

// secret reads the secret r names from berth's process: its environment
// or a file (trailing white space trimmed). The error names where it
// looked, never what it found.
func (n *Notifier) secret(r schema.SecretRef) (string, error) {
	var s string
	switch {
	case r.Env != "":
		s = n.cfg.Getenv(r.Env)
		if s == "" {
			return "", fmt.Errorf("the environment variable %s is not set in berth's process; set it, or name a file (file: PATH)", r.Env)
		}
	case r.File != "":
		b, err := n.cfg.ReadFile(r.File)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return "", fmt.Errorf("read %s: %v", r.File, err)
		}
		s = strings.TrimSpace(string(b))
		if s == "" {
			return "", fmt.Errorf("%s is empty", r.File)
		}
	default:
		return "", errors.New("the spec names no secret")
	}
	return s, nil
}

// Check reads every secret the routes of set name, as a delivery would,
// and returns one sentence per route that could not send (none: all
// can). berth reconcile logs them when a revision comes in force, so a
// missing variable shows before an event is lost to it.
func (n *Notifier) Check(set *schema.Set) []string {
	var out []string
	for _, r := range set.Notifications {
		if _, err := n.secret(r.Spec.URL); err != nil {
			out = append(out, "notifier "+r.Meta.Name+": its URL: "+err.Error())
		}
		if r.Spec.Format == schema.NotifyWebhook {
			if _, err := n.secret(r.Spec.Secret); err != nil {
				out = append(out, "notifier "+r.Meta.Name+": its signing key: "+err.Error())
			}
		}
	}
	return out
}
