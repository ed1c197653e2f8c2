package api

import (
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/berth-dev/berth/view"
)

func TestRequireToken(t *testing.T) {
	const token = "s3cret-token-0123456789"
	h := RequireToken(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }), token, "/api/v1/webhook")
	bearer := func(s string) http.Header { return http.Header{"Authorization": {"Bearer " + s}} }
	proto := func(s string) http.Header {
		return http.Header{"Sec-Websocket-Protocol": {view.Subprotocol + ", bearer." + base64.RawURLEncoding.EncodeToString([]byte(s))}}
	}
	tests := map[string]struct {
		path   string
		header http.Header
		want   int
	}{
		"status without token":            {"/api/v1/status", nil, http.StatusUnauthorized},
		"status with token":               {"/api/v1/status", bearer(token), http.StatusTeapot},
		"status with a wrong token":       {"/api/v1/status", bearer(token + "x"), http.StatusUnauthorized},
		"workspace without token":         {"/api/v1/workspaces/p/w", nil, http.StatusUnauthorized},
		"metrics without token":           {"/metrics", nil, http.StatusUnauthorized},
		"metrics with token":              {"/metrics", bearer(token), http.StatusTeapot},
		"events without token":            {"/api/v1/events", nil, http.StatusUnauthorized},
		"events with header":              {"/api/v1/events", bearer(token), http.StatusTeapot},
		"events with subprotocol":         {"/api/v1/events", proto(token), http.StatusTeapot},
		"events with wrong subprotocol":   {"/api/v1/events", proto("nope"), http.StatusUnauthorized},
		"subprotocol only for the events": {"/api/v1/status", proto(token), http.StatusUnauthorized},
		"unknown path":                    {"/api/v1/other", nil, http.StatusUnauthorized},
		"dashboard page is public":        {"/", nil, http.StatusTeapot},
		"dashboard assets are public":     {"/ui/app.js", nil, http.StatusTeapot},
		"healthz is public":               {"/healthz", nil, http.StatusTeapot},
		"a public prefix":                 {"/api/v1/webhook/github", nil, http.StatusTeapot},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest("GET", tt.path, nil)
			for k, v := range tt.header {
				r.Header[k] = v
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.want {
				t.Errorf("GET %s: %d, want %d", tt.path, w.Code, tt.want)
			}
		})
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:4680": true, "127.1.2.3:80": true, "[::1]:4680": true, "localhost:4680": true,
		":4680": false, "0.0.0.0:4680": false, "[::]:4680": false, "10.0.0.5:4680": false, "berth.internal:4680": false,
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// Without a token, only loopback names (and the listen host) in Host get
// an answer: a DNS-rebound name does not.
func TestRequireLocalHost(t *testing.T) {
	h := RequireLocalHost(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }), "127.0.0.7:4680", "/api/v1/hooks/")
	tests := map[string]struct {
		host, path string
		want       int
	}{
		"127.0.0.1":                {"127.0.0.1:4680", "/api/v1/status", http.StatusTeapot},
		"127.x without port":       {"127.3.2.1", "/metrics", http.StatusTeapot},
		"localhost":                {"localhost:4680", "/api/v1/status", http.StatusTeapot},
		"LOCALHOST.":               {"LOCALHOST.:4680", "/api/v1/status", http.StatusTeapot},
		"[::1]":                    {"[::1]:4680", "/api/v1/events", http.StatusTeapot},
		"the listen host":          {"127.0.0.7:4680", "/", http.StatusTeapot},
		"no Host (HTTP/1.0)":       {"", "/api/v1/status", http.StatusTeapot},
		"rebound name: status":     {"attacker.example", "/api/v1/status", http.StatusForbidden},
		"rebound name: metrics":    {"attacker.example:4680", "/metrics", http.StatusForbidden},
		"rebound name: dashboard":  {"attacker.example:4680", "/", http.StatusForbidden},
		"localhost.attacker":       {"localhost.attacker.example", "/api/v1/status", http.StatusForbidden},
		"another address":          {"10.0.0.5:4680", "/api/v1/status", http.StatusForbidden},
		"webhook proves itself":    {"berth.example.com", "/api/v1/hooks/git", http.StatusTeapot},
		"127.0.0.1 as a subdomain": {"127.0.0.1.attacker.example", "/healthz", http.StatusForbidden},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest("GET", tt.path, nil)
			r.Host = tt.host
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.want {
				t.Errorf("Host %q %s: %d, want %d", tt.host, tt.path, w.Code, tt.want)
			}
		})
	}
}
