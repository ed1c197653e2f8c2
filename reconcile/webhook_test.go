package reconcile

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers/sim"
)

func TestWebhookSignatures(t *testing.T) {
	secret := []byte("s3cret-webhook")
	body := `{"ref":"refs/heads/main"}`
	tests := map[string]struct {
		secret []byte
		header map[string]string
		want   int
	}{
		"github signature":       {secret: secret, header: map[string]string{"X-Hub-Signature-256": SignGitHub(secret, []byte(body))}, want: http.StatusAccepted},
		"github wrong secret":    {secret: secret, header: map[string]string{"X-Hub-Signature-256": SignGitHub([]byte("other"), []byte(body))}, want: http.StatusUnauthorized},
		"github other body":      {secret: secret, header: map[string]string{"X-Hub-Signature-256": SignGitHub(secret, []byte(body+" "))}, want: http.StatusUnauthorized},
		"github not hex":         {secret: secret, header: map[string]string{"X-Hub-Signature-256": "sha256=zz"}, want: http.StatusUnauthorized},
		"github sha1 only":       {secret: secret, header: map[string]string{"X-Hub-Signature": "sha1=00"}, want: http.StatusUnauthorized},
		"shared token":           {secret: secret, header: map[string]string{WebhookTokenHeader: string(secret)}, want: http.StatusAccepted},
		"gitlab token":           {secret: secret, header: map[string]string{"X-Gitlab-Token": string(secret)}, want: http.StatusAccepted},
		"wrong token":            {secret: secret, header: map[string]string{WebhookTokenHeader: "s3cret-webhooK"}, want: http.StatusUnauthorized},
		"token prefix":           {secret: secret, header: map[string]string{WebhookTokenHeader: "s3cret"}, want: http.StatusUnauthorized},
		"unsigned":               {secret: secret, want: http.StatusUnauthorized},
		"no secret configured":   {header: map[string]string{WebhookTokenHeader: ""}, want: http.StatusUnauthorized},
		"no secret, any sig":     {header: map[string]string{"X-Hub-Signature-256": SignGitHub(nil, []byte(body))}, want: http.StatusUnauthorized},
		"signature beats header": {secret: secret, header: map[string]string{"X-Hub-Signature-256": "sha256=00", WebhookTokenHeader: string(secret)}, want: http.StatusUnauthorized},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var fired atomic.Int32
			h := &Webhook{Secret: tt.secret, Trigger: func() { fired.Add(1) }}
			mux := http.NewServeMux()
			h.Routes(mux)
			req := httptest.NewRequest("POST", WebhookPath, strings.NewReader(body))
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, req)
			if rec.Code != tt.want {
				t.Errorf("status %d, want %d: %s", rec.Code, tt.want, rec.Body)
			}
			if want := int32(0); tt.want == http.StatusAccepted {
				want = 1
				if fired.Load() != want {
					t.Errorf("triggered %d times, want %d", fired.Load(), want)
				}
			} else if fired.Load() != 0 {
				t.Errorf("an unauthenticated request triggered a fetch")
			}
			if strings.Contains(rec.Body.String(), string(secret)) {
				t.Errorf("the answer shows the secret")
			}
		})
	}
	// GET is not a route.
	mux := http.NewServeMux()
	(&Webhook{Secret: secret}).Routes(mux)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", WebhookPath, nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", rec.Code)
	}
}

// A pushed commit is applied within a second of the webhook, on the
// simulator, with the loop's interval far away.
func TestWebhookAppliesWithinASecond(t *testing.T) {
	r := newTestRepo(t)
	r.commit("one", map[string]string{"tiers.yaml": gitTiers, "a.yaml": gitWorkspace("a")}, nil)
	spec, _ := sim.Parse([]byte(twoGPUs))
	c := sim.New(*spec, sim.NewScaledClock(1))
	changes := make(chan struct{}, 1)
	secret := []byte("hook-secret")
	src := &GitSource{URL: r.url(), FetchEvery: time.Hour}
	hook := &Webhook{Secret: secret, Trigger: func() {
		src.Poke()
		select {
		case changes <- struct{}{}:
		default:
		}
	}}
	// Settle is short, as in berth reconcile: cycles come often, but the
	// source fetches only when poked (or hourly).
	l, err := New(Config{Source: src, Cluster: c, Store: c, Routes: hook.Routes,
		Interval: time.Hour, Debounce: 10 * time.Millisecond, Settle: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(l.Handler())
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- l.Run(ctx, changes) }()
	defer func() { cancel(); <-done }()
	waitFor(t, 5*time.Second, func() bool { st := l.Status(); return st.Revision != nil })

	var worst time.Duration
	for i, name := range []string{"b", "c", "d"} {
		h := r.commit("push "+name, map[string]string{name + ".yaml": gitWorkspace(name)}, nil)
		body := `{"ref":"refs/heads/main","after":"` + h.String() + `"}`
		start := time.Now()
		req, _ := http.NewRequest("POST", srv.URL+WebhookPath, strings.NewReader(body))
		req.Header.Set("X-Hub-Signature-256", SignGitHub(secret, []byte(body)))
		req.Header.Set("X-GitHub-Event", "push")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusAccepted {
			t.Fatalf("webhook: %v %v", resp, err)
		}
		resp.Body.Close()
		waitFor(t, 5*time.Second, func() bool { st := l.Status(); return st.Revision != nil && st.Revision.ID == h.String()[:12] })
		took := time.Since(start)
		worst = max(worst, took)
		t.Logf("push %d: applied %s after the webhook", i+1, took.Round(time.Millisecond))
	}
	if worst > time.Second {
		t.Errorf("slowest push applied %s after its webhook; the target is 1s", worst)
	}
}

func waitFor(t *testing.T, limit time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s", limit)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
