package reconcile

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"strings"
)

// RequireToken wraps h so that every request needs "Authorization: Bearer
// TOKEN", except the ones that carry no data: the dashboard's static files
// (/ and /ui/…, the same in every berth binary), /healthz (for liveness
// probes), and the path prefixes in public (a webhook that proves itself
// another way). A browser's WebSocket cannot set headers, so
// /api/v1/events also accepts the token as the subprotocol
// "bearer."+base64url(token). A request without the right token gets 401.
func RequireToken(h http.Handler, token string, public ...string) http.Handler {
	want := sha256.Sum256([]byte(token))
	ok := func(got string) bool {
		sum := sha256.Sum256([]byte(got))
		return subtle.ConstantTimeCompare(sum[:], want[:]) == 1
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if openPath(r.URL.Path, public) {
			h.ServeHTTP(w, r)
			return
		}
		if got, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); found && ok(strings.TrimSpace(got)) {
			h.ServeHTTP(w, r)
			return
		}
		if r.URL.Path == "/api/v1/events" {
			for _, p := range strings.Split(r.Header.Get("Sec-WebSocket-Protocol"), ",") {
				enc, found := strings.CutPrefix(strings.TrimSpace(p), "bearer.")
				if !found {
					continue
				}
				if b, err := base64.RawURLEncoding.DecodeString(enc); err == nil && ok(string(b)) {
					h.ServeHTTP(w, r)
					return
				}
			}
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="berth"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"version": APIVersion,
			"error": "this berth needs a bearer token (the contents of its --ui-token-file): Authorization: Bearer TOKEN"})
	})
}

func openPath(p string, public []string) bool {
	if p == "/" || p == "/healthz" || strings.HasPrefix(p, "/ui/") {
		return true
	}
	for _, pre := range public {
		if strings.HasPrefix(p, pre) {
			return true
		}
	}
	return false
}

// IsLoopback reports whether a listen address ("host:port") binds only
// the loopback interface: 127.0.0.0/8, ::1 or "localhost". An empty host
// (all interfaces) is not loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
