package nomad_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"github.com/berth-dev/berth/drivers/drivertest"
	"github.com/berth-dev/berth/drivers/nomad"
)

// TestUnixSocketAddress: NOMAD_ADDR=unix://PATH, as a task with a workload
// identity reaches Nomad through its Task API socket
// (${NOMAD_SECRETS_DIR}/api.sock): the driver observes the cluster through
// the socket, with the token, although it brings an HTTP client of its own
// (the api package dials a socket only with its own).
func TestUnixSocketAddress(t *testing.T) {
	fake, _ := fakeCluster(t, drivertest.Nodes())
	sock := filepath.Join(t.TempDir(), "api.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		tokens []string
	)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		tokens = append(tokens, r.Header.Get("X-Nomad-Token"))
		mu.Unlock()
		fake.ServeHTTP(w, r)
	}))
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)

	d, err := nomad.New(nomad.Config{Address: "unix://" + sock, Token: "wi-jwt"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	snap, err := d.Observe(t.Context())
	if err != nil {
		t.Fatalf("observe through %s: %v", sock, err)
	}
	if len(snap.Nodes) == 0 {
		t.Fatal("observed no nodes through the socket")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(tokens) == 0 || tokens[0] != "wi-jwt" {
		t.Fatalf("tokens sent: %q, want wi-jwt", tokens)
	}
}
