package reconcile

import (
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestRequireToken(t *testing.T) {
	const token = "s3cret-token-0123456789"
	h := RequireToken(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }), token, "/api/v1/webhook")
	bearer := func(s string) http.Header { return http.Header{"Authorization": {"Bearer " + s}} }
	proto := func(s string) http.Header {
		return http.Header{"Sec-Websocket-Protocol": {Subprotocol + ", bearer." + base64.RawURLEncoding.EncodeToString([]byte(s))}}
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
