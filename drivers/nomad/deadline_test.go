package nomad_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/drivertest"
	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/internal/realnomad"
)

// hanging serves the fake Nomad, except that requests hang selects are
// held until the client gives up: with stall, after the headers and part
// of the body; else before any answer.
func hanging(t *testing.T, hang func(*http.Request) bool, stall bool) *httptest.Server {
	t.Helper()
	fake, _ := fakeCluster(t, drivertest.Nodes())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hang(r) {
			fake.ServeHTTP(w, r)
			return
		}
		if stall {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			w.Write([]byte(`[{"ID": "`))
			w.(http.Flusher).Flush()
		}
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestHungRequestIsCut: a request Nomad never answers, or whose answer
// stops halfway, is cut by the request timeout with an error that names
// the request and the timeout, classified transient.
func TestHungRequestIsCut(t *testing.T) {
	for name, stall := range map[string]bool{"no answer": false, "answer stalls": true} {
		t.Run(name, func(t *testing.T) {
			srv := hanging(t, func(r *http.Request) bool { return r.URL.Path == "/v1/nodes" }, stall)
			d := realnomad.NewDriver(t, nomad.Config{Address: srv.URL, RequestTimeout: 50 * time.Millisecond})
			_, err := d.Observe(ctx)
			var te *nomad.TimeoutError
			if !errors.As(err, &te) || te.Path != "/v1/nodes" {
				t.Fatalf("Observe = %v, want a *TimeoutError for /v1/nodes", err)
			}
			if drivers.ClassOf(err) != drivers.ClassTransient {
				t.Errorf("class %s, want transient", drivers.ClassOf(err))
			}
			if msg := err.Error(); !strings.Contains(msg, "no answer from Nomad to GET /v1/nodes within 50ms") {
				t.Errorf("error %q does not say what timed out", msg)
			}
		})
	}
}

// TestRequestTimeoutDefault: a driver without RequestTimeout gets
// DefaultRequestTimeout, and the requests of a driver given its own
// HTTP client get deadlines too.
func TestRequestTimeoutDefault(t *testing.T) {
	if nomad.DefaultRequestTimeout <= 0 || nomad.DefaultRequestTimeout > time.Minute {
		t.Fatalf("DefaultRequestTimeout %s", nomad.DefaultRequestTimeout)
	}
	srv := hanging(t, func(r *http.Request) bool { return r.URL.Path == "/v1/nodes" }, false)
	d := realnomad.NewDriver(t, nomad.Config{Address: srv.URL, HTTPClient: &http.Client{}, RequestTimeout: 20 * time.Millisecond})
	if _, err := d.Observe(ctx); !errors.As(err, new(*nomad.TimeoutError)) {
		t.Fatalf("Observe through a given client = %v, want a *TimeoutError", err)
	}
}
