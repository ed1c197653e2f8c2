package api

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

func startServer(t *testing.T, lim ServerLimits) string {
	t.Helper()
	return startServerWatched(t, lim, nil)
}

// startServerWatched is startServer with watch called after the server's
// own ConnState hook, on the server's goroutine for that connection.
func startServerWatched(t *testing.T, lim ServerLimits, watch func(net.Conn, http.ConnState)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write([]byte("ok\n"))
	})
	srv, ln := NewServer(h, ln, lim)
	if watch != nil {
		hook := srv.ConnState
		srv.ConnState = func(c net.Conn, s http.ConnState) {
			hook(c, s)
			watch(c, s)
		}
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// get sends one keep-alive request on conn and reads the answer.
func get(t *testing.T, conn net.Conn, br *bufio.Reader) error {
	t.Helper()
	conn.SetDeadline(time.Now().Add(10 * time.Second)) // the test's own bound
	if _, err := fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		return err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// closed reports whether the server closed conn (reading it to the end
// stops at EOF or a reset, rather than at the test's own deadline).
func closed(conn net.Conn, br *bufio.Reader) bool {
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.Copy(io.Discard, br)
	if err == nil {
		return true // EOF
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return err != nil
}

// An idle keep-alive connection is closed after IdleTimeout.
func TestServerClosesIdleConnections(t *testing.T) {
	addr := startServer(t, ServerLimits{ReadHeaderTimeout: time.Minute, ReadTimeout: time.Minute, IdleTimeout: 50 * time.Millisecond})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	if err := get(t, conn, br); err != nil {
		t.Fatal(err)
	}
	if !closed(conn, br) {
		t.Error("an idle keep-alive connection was still open 10 s after an IdleTimeout of 50 ms")
	}
}

// A body sent too slowly is cut off after ReadTimeout.
func TestServerReadTimeout(t *testing.T) {
	addr := startServer(t, ServerLimits{ReadHeaderTimeout: time.Minute, ReadTimeout: 50 * time.Millisecond, IdleTimeout: time.Minute})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\nstall")
	br := bufio.NewReader(conn)
	if !closed(conn, br) {
		t.Error("a stalled body held its connection 10 s past a ReadTimeout of 50 ms")
	}
}

// Beyond MaxConns, a connection is closed at once; above three quarters
// of it, keep-alives are not kept.
func TestServerConnectionCap(t *testing.T) {
	const max = 4
	// The server marks a connection idle after the client has its
	// answer: wait for that before opening the next, or the mark could
	// count the next connection and shed this one.
	idle := make(chan struct{}, 16)
	addr := startServerWatched(t, ServerLimits{ReadHeaderTimeout: time.Minute, ReadTimeout: time.Minute, IdleTimeout: time.Hour, MaxConns: max}, func(_ net.Conn, s http.ConnState) {
		if s == http.StateIdle {
			idle <- struct{}{}
		}
	})
	var conns []net.Conn
	var readers []*bufio.Reader
	for i := range max + 1 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns, readers = append(conns, c), append(readers, bufio.NewReader(c))
		if i < max*3/4 {
			// Under the shedding mark: kept alive after a request.
			if err := get(t, c, readers[i]); err != nil {
				t.Fatalf("connection %d: %v", i+1, err)
			}
			<-idle
		}
	}
	if !closed(conns[max], readers[max]) {
		t.Errorf("connection %d of at most %d was kept open", max+1, max)
	}
	// Connection 4 is over 3/4 of the cap: answered, then closed.
	if err := get(t, conns[max-1], readers[max-1]); err != nil {
		t.Fatalf("connection %d: %v", max, err)
	}
	if !closed(conns[max-1], readers[max-1]) {
		t.Errorf("an idle connection over 3/4 of the cap was kept alive")
	}
	// The first ones are still alive.
	if err := get(t, conns[0], readers[0]); err != nil {
		t.Errorf("a connection under the mark was dropped: %v", err)
	}
}
