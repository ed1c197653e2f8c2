package reconcile

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"strings"
)

// WebhookPath is where the git webhook is served (POST).
const WebhookPath = "/api/v1/hooks/git"

// WebhookTokenHeader carries the shared secret for senders that do not
// sign (GitLab's X-Gitlab-Token works the same way and is accepted too).
const WebhookTokenHeader = "X-Berth-Webhook-Token"

// maxWebhookBody bounds what a webhook request may send (GitHub's limit
// is 25 MB; push payloads are far smaller).
const maxWebhookBody = 5 << 20

// Webhook triggers an immediate fetch when a push is announced. A request
// must prove it knows Secret: GitHub's X-Hub-Signature-256 (HMAC-SHA256 of
// the body), or the secret itself in X-Berth-Webhook-Token or
// X-Gitlab-Token; both compared in constant time. Anything else gets 401
// and changes nothing. With an empty Secret every request is refused.
type Webhook struct {
	Secret []byte
	// Trigger asks for a cycle now; it must not block.
	Trigger func()
	Logger  *slog.Logger
}

// Routes adds the webhook to mux (Config.Routes).
func (h *Webhook) Routes(mux *http.ServeMux) {
	mux.Handle("POST "+WebhookPath, h)
}

func (h *Webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	log := h.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWebhookBody))
	if err != nil {
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"version": APIVersion, "error": "request body too large or unreadable"})
		return
	}
	if !h.authentic(r.Header, body) {
		log.Warn("git webhook refused: missing or bad signature", "remote", r.RemoteAddr)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"version": APIVersion, "error": "missing or bad signature"})
		return
	}
	if h.Trigger != nil {
		h.Trigger()
	}
	log.Info("git webhook: fetching now", "event", r.Header.Get("X-GitHub-Event"))
	writeJSON(w, http.StatusAccepted, map[string]string{"version": APIVersion, "status": "fetch scheduled"})
}

// authentic checks the request's proof of the secret.
func (h *Webhook) authentic(hdr http.Header, body []byte) bool {
	if len(h.Secret) == 0 {
		return false
	}
	if sig := hdr.Get("X-Hub-Signature-256"); sig != "" {
		got, err := hex.DecodeString(strings.TrimPrefix(sig, "sha256="))
		if err != nil || !strings.HasPrefix(sig, "sha256=") {
			return false
		}
		mac := hmac.New(sha256.New, h.Secret)
		mac.Write(body)
		return hmac.Equal(got, mac.Sum(nil))
	}
	for _, name := range []string{WebhookTokenHeader, "X-Gitlab-Token"} {
		if tok := hdr.Get(name); tok != "" {
			// Hash both sides so the compare takes the same time whatever
			// the lengths.
			a, b := sha256.Sum256([]byte(tok)), sha256.Sum256(h.Secret)
			return subtle.ConstantTimeCompare(a[:], b[:]) == 1
		}
	}
	return false
}

// SignGitHub returns the X-Hub-Signature-256 value of body under secret.
func SignGitHub(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}
