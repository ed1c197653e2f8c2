package ui

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHandler(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	tests := map[string]struct {
		code int
		typ  string
		has  string
	}{
		"/":             {200, "text/html", `<script src="/ui/app.js"`},
		"/ui/app.js":    {200, "text/javascript", "/api/v1/events"},
		"/ui/app.css":   {200, "text/css", ".gpu"},
		"/ui/":          {404, "", ""},
		"/ui/nope.js":   {404, "", ""},
		"/index.html":   {404, "", ""},
		"/api/v1/other": {404, "", ""},
	}
	for path, tt := range tests {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.code {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, tt.code)
			continue
		}
		if tt.code != 200 {
			continue
		}
		if got := resp.Header.Get("Content-Type"); !strings.HasPrefix(got, tt.typ) {
			t.Errorf("GET %s: Content-Type %q, want %s", path, got, tt.typ)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
			t.Errorf("GET %s: CSP %q", path, csp)
		}
		if !strings.Contains(string(body), tt.has) {
			t.Errorf("GET %s lacks %q", path, tt.has)
		}
	}
}

// TestAssetsSelfContained: the page loads nothing from elsewhere.
func TestAssetsSelfContained(t *testing.T) {
	for _, name := range []string{"index.html", "app.js", "app.css"} {
		b, err := Assets.(interface{ ReadFile(string) ([]byte, error) }).ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"http://", "https://", "//cdn", "@import"} {
			if strings.Contains(string(b), bad) {
				t.Errorf("%s mentions %q: the dashboard must load nothing from outside berth", name, bad)
			}
		}
	}
}
