package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"strings"

	"github.com/berth-dev/berth/view"
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
		writeJSON(w, http.StatusUnauthorized, map[string]string{"version": view.APIVersion,
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

// RequireLocalHost wraps h so that it answers only requests whose Host
// header names the loopback interface (localhost, 127.0.0.0/8, [::1]) or
// the host of listen; any other name gets 403. It guards a berth that
// needs no token against DNS rebinding: a web page whose host name an
// attacker re-points at 127.0.0.1 reaches berth with the attacker's name
// in Host, and would otherwise read the status and the metrics. A request
// without Host (HTTP/1.0; a browser always sends one) and the path
// prefixes in public (a webhook that proves itself by its signature)
// pass.
func RequireLocalHost(h http.Handler, listen string, public ...string) http.Handler {
	listenHost, _, err := net.SplitHostPort(listen)
	if err != nil {
		listenHost = listen
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host == "" || localHost(r.Host, listenHost) {
			h.ServeHTTP(w, r)
			return
		}
		for _, pre := range public {
			if strings.HasPrefix(r.URL.Path, pre) {
				h.ServeHTTP(w, r)
				return
			}
		}
		writeJSON(w, http.StatusForbidden, map[string]string{"version": view.APIVersion,
			"error": "this berth answers only to localhost, 127.0.0.1 or [::1] (a guard against DNS rebinding, as it needs no token); to reach it by another name, give it --ui-token-file"})
	})
}

// localHost reports whether a Host header names the loopback interface
// or listenHost.
func localHost(hostport, listenHost string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.EqualFold(host, "localhost") || (listenHost != "" && strings.EqualFold(host, strings.Trim(listenHost, "[]"))) {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
