package nomad_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
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
	t.Run("short", func(t *testing.T) { testUnixSocket(t, filepath.Join(t.TempDir(), "api.sock")) })
	// Beyond a socket address's 107 bytes, as a raw_exec task's secrets
	// directory under a deep data directory is: dialled through the
	// directory (Linux).
	t.Run("long", func(t *testing.T) {
		if runtime.GOOS != "linux" {
			t.Skip("long socket paths are dialled through /proc/self/fd")
		}
		dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), "985168a3-be70-40a7-6a85-e3cad606b6d7", "berth", "secrets")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		cwd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		// Listen through a relative path: the listener has the same limit.
		t.Chdir(dir)
		l, err := net.Listen("unix", "api.sock")
		if err != nil {
			t.Fatal(err)
		}
		t.Chdir(cwd)
		sock := filepath.Join(dir, "api.sock")
		if len(sock) < 110 {
			t.Fatalf("%s: %d bytes, not beyond the limit", sock, len(sock))
		}
		testUnixSocketOn(t, sock, l)
	})
}

func testUnixSocket(t *testing.T, sock string) {
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	testUnixSocketOn(t, sock, l)
}

func testUnixSocketOn(t *testing.T, sock string, l net.Listener) {
	fake, _ := fakeCluster(t, drivertest.Nodes())
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
