package ui

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed static
var static embed.FS

// Assets are the dashboard's files: index.html, app.js, app.css.
var Assets fs.FS = mustSub(static, "static")

func mustSub(f fs.FS, dir string) fs.FS {
	s, err := fs.Sub(f, dir)
	if err != nil {
		panic(err)
	}
	return s
}

// csp lets the page load only its own files and talk only to its origin.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the dashboard: / is index.html, /ui/NAME the other
// assets; anything else is 404.
func Handler() http.Handler {
	files := http.FileServerFS(Assets)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		switch {
		case r.URL.Path == "/":
			http.ServeFileFS(w, r, Assets, "index.html")
		case strings.HasPrefix(r.URL.Path, "/ui/") && !strings.HasSuffix(r.URL.Path, "/") && r.URL.Path != "/ui/index.html":
			r2 := r.Clone(r.Context())
			r2.URL.Path = strings.TrimPrefix(r.URL.Path, "/ui")
			files.ServeHTTP(w, r2)
		default:
			http.NotFound(w, r)
		}
	})
}
