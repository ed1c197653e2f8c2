package api

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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

// Only pushes start a fetch; other events are answered and ignored.
func TestWebhookIgnoresOtherEvents(t *testing.T) {
	secret := []byte(strings.Repeat("k", MinWebhookSecret))
	body := []byte(`{"zen":"Keep it logically awesome."}`)
	tests := map[string]struct {
		header, event string
		want          int
	}{
		"github push":      {"X-GitHub-Event", "push", http.StatusAccepted},
		"github ping":      {"X-GitHub-Event", "ping", http.StatusOK},
		"github issues":    {"X-GitHub-Event", "issues", http.StatusOK},
		"gitlab push":      {"X-Gitlab-Event", "Push Hook", http.StatusAccepted},
		"gitlab tag push":  {"X-Gitlab-Event", "Tag Push Hook", http.StatusOK},
		"gitea push":       {"X-Gitea-Event", "push", http.StatusAccepted},
		"no event: a push": {"X-Other", "x", http.StatusAccepted},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var fired atomic.Int32
			h := &Webhook{Secret: secret, Trigger: func() { fired.Add(1) }}
			req := httptest.NewRequest("POST", WebhookPath, bytes.NewReader(body))
			req.Header.Set("X-Hub-Signature-256", SignGitHub(secret, body))
			req.Header.Set(tt.header, tt.event)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.want {
				t.Errorf("status %d, want %d: %s", rec.Code, tt.want, rec.Body)
			}
			if want := map[bool]int32{true: 1, false: 0}[tt.want == http.StatusAccepted]; fired.Load() != want {
				t.Errorf("triggered %d times, want %d", fired.Load(), want)
			}
		})
	}
}

// The signature is checked while the body streams in: a signed body just
// under the cap is accepted without being held in memory, and one over it
// is refused after MaxWebhookBody bytes, whether it says its length or not.
func TestWebhookStreamsWithinCap(t *testing.T) {
	secret := []byte(strings.Repeat("k", MinWebhookSecret))
	h := &Webhook{Secret: secret}
	big := bytes.Repeat([]byte("x"), MaxWebhookBody-100)
	sig := SignGitHub(secret, big)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	req := httptest.NewRequest("POST", WebhookPath, bytes.NewReader(big))
	req.Header.Set("X-Hub-Signature-256", sig)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	runtime.ReadMemStats(&after)
	if rec.Code != http.StatusAccepted {
		t.Fatalf("a signed body under the cap: %d %s", rec.Code, rec.Body)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > MaxWebhookBody/4 {
		t.Errorf("checking a %d-byte body allocated %d bytes; it should stream", len(big), alloc)
	}

	over := bytes.Repeat([]byte("x"), 5<<20)
	for name, r := range map[string]io.Reader{"with length": bytes.NewReader(over), "chunked": struct{ io.Reader }{bytes.NewReader(over)}} {
		req := httptest.NewRequest("POST", WebhookPath, r)
		if name == "chunked" {
			req.ContentLength = -1
		}
		req.Header.Set("X-Hub-Signature-256", SignGitHub(secret, over))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusRequestEntityTooLarge {
			t.Errorf("%s: a 5 MB body: %d, want 413", name, rec.Code)
		}
	}
}

// At most MaxWebhookConcurrent requests are handled at once; the next is
// refused at once with 503, its body unread.
func TestWebhookBoundsConcurrency(t *testing.T) {
	secret := []byte(strings.Repeat("k", MinWebhookSecret))
	h := &Webhook{Secret: secret}
	var done sync.WaitGroup
	var pipes []*io.PipeWriter
	for range MaxWebhookConcurrent {
		pr, pw := io.Pipe()
		pipes = append(pipes, pw)
		req := httptest.NewRequest("POST", WebhookPath, pr)
		req.Header.Set("X-Hub-Signature-256", SignGitHub(secret, nil))
		done.Go(func() { h.ServeHTTP(httptest.NewRecorder(), req) })
		pw.Write([]byte("x")) // returns once the handler reads: it holds a slot
	}
	req := httptest.NewRequest("POST", WebhookPath, strings.NewReader("{}"))
	req.Header.Set("X-Hub-Signature-256", SignGitHub(secret, []byte("{}")))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("request %d: %d, want 503", MaxWebhookConcurrent+1, rec.Code)
	}
	for _, pw := range pipes {
		pw.Close()
	}
	done.Wait()
	rec = httptest.NewRecorder()
	req = httptest.NewRequest("POST", WebhookPath, strings.NewReader("{}"))
	req.Header.Set("X-Hub-Signature-256", SignGitHub(secret, []byte("{}")))
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusAccepted {
		t.Errorf("after the others finished: %d, want 202", rec.Code)
	}
}

// A body that stalls is cut off after BodyTimeout.
func TestWebhookSlowBody(t *testing.T) {
	secret := []byte(strings.Repeat("k", MinWebhookSecret))
	mux := http.NewServeMux()
	(&Webhook{Secret: secret, BodyTimeout: 50 * time.Millisecond}).Routes(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\nX-Hub-Signature-256: %s\r\n\r\npartial", WebhookPath, SignGitHub(secret, nil))
	conn.SetReadDeadline(time.Now().Add(10 * time.Second)) // the test's own bound
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("stalled body: %d, want 400", resp.StatusCode)
	}
}

// With a bearer token required for the API, the webhook still answers
// only to its signature: the token alone does not trigger a fetch, and a
// forge's signed request needs no token.
func TestWebhookBehindToken(t *testing.T) {
	secret := []byte(strings.Repeat("k", MinWebhookSecret))
	const token = "ui-token-0123456789abcdef"
	mux := http.NewServeMux()
	var fired atomic.Int32
	(&Webhook{Secret: secret, Trigger: func() { fired.Add(1) }}).Routes(mux)
	h := RequireToken(mux, token, "/api/v1/hooks/")
	body := []byte(`{"ref":"refs/heads/main"}`)
	for name, tt := range map[string]struct {
		sig, bearer bool
		want        int
	}{
		"signed, no token":   {sig: true, want: http.StatusAccepted},
		"token, unsigned":    {bearer: true, want: http.StatusUnauthorized},
		"signed, with token": {sig: true, bearer: true, want: http.StatusAccepted},
	} {
		req := httptest.NewRequest("POST", WebhookPath, bytes.NewReader(body))
		if tt.sig {
			req.Header.Set("X-Hub-Signature-256", SignGitHub(secret, body))
		}
		if tt.bearer {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tt.want {
			t.Errorf("%s: %d, want %d", name, rec.Code, tt.want)
		}
	}
	if fired.Load() != 2 {
		t.Errorf("triggered %d times, want 2", fired.Load())
	}
}

func TestCheckWebhookSecret(t *testing.T) {
	if err := CheckWebhookSecret([]byte(strings.Repeat("k", MinWebhookSecret-1))); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("31 bytes: %v", err)
	}
	if err := CheckWebhookSecret([]byte(strings.Repeat("k", MinWebhookSecret))); err != nil {
		t.Errorf("32 bytes: %v", err)
	}
}
