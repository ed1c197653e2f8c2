package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/berth-dev/berth/view"
)

// WebhookPath is where the git webhook is served (POST).
const WebhookPath = "/api/v1/hooks/git"

// WebhookTokenHeader carries the shared secret for senders that do not
// sign (GitLab's X-Gitlab-Token works the same way and is accepted too).
const WebhookTokenHeader = "X-Berth-Webhook-Token"

// MinWebhookSecret is the shortest webhook secret berth accepts, in bytes
// (a shorter one can be guessed offline from one signed request).
const MinWebhookSecret = 32

// Webhook limits: a push payload is a few KB (GitHub caps one at 25 MB,
// but only for pushes of thousands of commits, which berth does not need
// to read: it fetches the branch itself).
const (
	// MaxWebhookBody bounds a signed body; a larger one gets 413.
	MaxWebhookBody = 1 << 20
	// MaxWebhookConcurrent bounds the webhook requests handled at once;
	// more get 503 at once, without their body being read.
	MaxWebhookConcurrent = 16
	// WebhookBodyTimeout bounds the time to send the body (a slower one
	// gets 400 and its connection closed).
	WebhookBodyTimeout = 10 * time.Second
)

// CheckWebhookSecret says why secret is not good enough for a webhook,
// or returns nil.
func CheckWebhookSecret(secret []byte) error {
	if len(secret) < MinWebhookSecret {
		return fmt.Errorf("the webhook secret is %d bytes; at least %d are needed (try: head -c 32 /dev/urandom | base64)", len(secret), MinWebhookSecret)
	}
	return nil
}

// Webhook triggers an immediate fetch when a push is announced. A request
// must prove it knows Secret: GitHub's X-Hub-Signature-256 (HMAC-SHA256 of
// the body, checked while the body streams in, within MaxWebhookBody), or
// the secret itself in X-Berth-Webhook-Token or X-Gitlab-Token (the body
// is then not read); both compared in constant time. Anything else gets
// 401 and changes nothing. With an empty Secret every request is refused.
//
// The webhook authenticates by its signature alone, also when berth
// requires a bearer token for the rest of its API: a forge cannot send
// berth's token, and a signature proves more (it covers the body).
//
// Events other than pushes (GitHub's ping, issues, GitLab's tag pushes)
// are answered 200 and change nothing; a request that names no event is
// taken as a push. Every request is logged at debug only, so that
// unauthenticated senders cannot fill the logs.
type Webhook struct {
	Secret []byte
	// Trigger asks for a cycle now; it must not block.
	Trigger func()
	Logger  *slog.Logger
	// BodyTimeout bounds the time to send the body (default
	// WebhookBodyTimeout).
	BodyTimeout time.Duration

	slots chan struct{} // MaxWebhookConcurrent, made on first use
	once  sync.Once
}

// Routes adds the webhook to mux (the routes of Handler).
func (h *Webhook) Routes(mux *http.ServeMux) {
	mux.Handle("POST "+WebhookPath, h)
}

func (h *Webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	log := h.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h.once.Do(func() { h.slots = make(chan struct{}, MaxWebhookConcurrent) })
	select {
	case h.slots <- struct{}{}:
		defer func() { <-h.slots }()
	default:
		log.Debug("git webhook refused: too many at once", "remote", r.RemoteAddr)
		w.Header().Set("Retry-After", "1")
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusServiceUnavailable, "too many webhook requests at once; retry")
		return
	}
	if r.ContentLength > MaxWebhookBody {
		log.Debug("git webhook refused: body too large", "remote", r.RemoteAddr, "bytes", r.ContentLength)
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", MaxWebhookBody))
		return
	}
	timeout := h.BodyTimeout
	if timeout <= 0 {
		timeout = WebhookBodyTimeout
	}
	http.NewResponseController(w).SetReadDeadline(time.Now().Add(timeout))
	ok, err := h.authentic(r.Header, http.MaxBytesReader(w, r.Body, MaxWebhookBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		log.Debug("git webhook refused: body too large", "remote", r.RemoteAddr)
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", MaxWebhookBody))
		return
	case err != nil:
		log.Debug("git webhook refused: body unreadable", "remote", r.RemoteAddr, "err", err.Error())
		writeError(w, http.StatusBadRequest, "request body unreadable or too slow")
		return
	case !ok:
		log.Debug("git webhook refused: missing or bad signature", "remote", r.RemoteAddr)
		writeError(w, http.StatusUnauthorized, "missing or bad signature")
		return
	}
	if ev := webhookEvent(r.Header); !isPush(ev) {
		log.Debug("git webhook: not a push, ignored", "event", ev)
		writeJSON(w, http.StatusOK, map[string]string{"version": view.APIVersion, "status": "ignored: not a push event"})
		return
	}
	if h.Trigger != nil {
		h.Trigger()
	}
	log.Debug("git webhook: fetching now", "event", webhookEvent(r.Header))
	writeJSON(w, http.StatusAccepted, map[string]string{"version": view.APIVersion, "status": "fetch scheduled"})
}

// webhookEvent is the event a forge names in its headers ("" for none).
func webhookEvent(hdr http.Header) string {
	for _, name := range []string{"X-GitHub-Event", "X-Gitlab-Event", "X-Gitea-Event", "X-Gogs-Event"} {
		if ev := hdr.Get(name); ev != "" {
			return ev
		}
	}
	return ""
}

// isPush reports whether event announces a branch push: GitHub's, Gitea's
// and Gogs's "push", GitLab's "Push Hook"; no event named counts as one.
func isPush(event string) bool {
	return event == "" || strings.EqualFold(event, "push") || strings.EqualFold(event, "Push Hook")
}

// authentic checks the request's proof of the secret. A signature is
// checked over body as it is read; a token needs no body. err is a body
// that could not be read whole (too large, too slow, cut).
func (h *Webhook) authentic(hdr http.Header, body io.Reader) (bool, error) {
	if len(h.Secret) == 0 {
		return false, nil
	}
	if sig := hdr.Get("X-Hub-Signature-256"); sig != "" {
		got, err := hex.DecodeString(strings.TrimPrefix(sig, "sha256="))
		if err != nil || !strings.HasPrefix(sig, "sha256=") {
			return false, nil
		}
		mac := hmac.New(sha256.New, h.Secret)
		if _, err := io.Copy(mac, body); err != nil {
			return false, err
		}
		return hmac.Equal(got, mac.Sum(nil)), nil
	}
	for _, name := range []string{WebhookTokenHeader, "X-Gitlab-Token"} {
		if tok := hdr.Get(name); tok != "" {
			// Hash both sides so the compare takes the same time whatever
			// the lengths.
			a, b := sha256.Sum256([]byte(tok)), sha256.Sum256(h.Secret)
			return subtle.ConstantTimeCompare(a[:], b[:]) == 1, nil
		}
	}
	return false, nil
}

// SignGitHub returns the X-Hub-Signature-256 value of body under secret.
func SignGitHub(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}
