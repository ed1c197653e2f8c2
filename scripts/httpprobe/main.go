// Command httpprobe loads a running `berth reconcile` (webhook enabled)
// the ways issue 14 found it weak, and prints what the process held:
//
//	badposts: 600 concurrent badly signed 5 MB webhook posts (chunked, so
//	          the body must be read to be refused) -- peak RSS, answers
//	stall:    100 connections that send 512 KB of a webhook body and
//	          stall -- peak RSS, connections still open after 15 s
//	idle:     2,000 keep-alive connections that make one request and
//	          idle -- sockets berth holds right after, and after 35 s
//
// It sends only to the loopback address it is given, a bounded number of
// requests, and stops by itself (scripts/probe-http.sh starts berth).
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	base := flag.String("url", "", "berth's URL (http://127.0.0.1:PORT)")
	pid := flag.Int("pid", 0, "berth's process ID (for its RSS and sockets)")
	flag.Parse()
	u, err := url.Parse(*base)
	if err != nil || *pid == 0 || !strings.HasPrefix(u.Host, "127.") {
		fmt.Fprintln(os.Stderr, "usage: httpprobe -url http://127.0.0.1:PORT -pid PID (loopback only)")
		os.Exit(2)
	}
	p := probe{addr: u.Host, pid: *pid}
	fmt.Printf("baseline: RSS %s, sockets %d\n", mib(p.rss()), p.sockets())
	p.badPosts(600, 5<<20)
	p.stall(100, 512<<10)
	p.idle(2000)
}

type probe struct {
	addr string
	pid  int
}

// rss is the process's resident set in bytes.
func (p probe) rss() int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid))
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// sockets counts the process's open sockets.
func (p probe) sockets() int {
	dir := fmt.Sprintf("/proc/%d/fd", p.pid)
	ents, _ := os.ReadDir(dir)
	n := 0
	for _, e := range ents {
		if t, err := os.Readlink(dir + "/" + e.Name()); err == nil && strings.HasPrefix(t, "socket:") {
			n++
		}
	}
	return n
}

// peak samples RSS until stop is closed and returns the highest seen.
func (p probe) peak(stop <-chan struct{}) <-chan int64 {
	out := make(chan int64, 1)
	go func() {
		var max int64
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			max = maxOf(max, p.rss())
			select {
			case <-stop:
				out <- max
				return
			case <-t.C:
			}
		}
	}()
	return out
}

func (p probe) badPosts(n, size int) {
	stop := make(chan struct{})
	peak := p.peak(stop)
	codes := sync.Map{}
	var wg sync.WaitGroup
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0, DisableKeepAlives: true}, Timeout: 60 * time.Second}
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	for range n {
		wg.Go(func() {
			pr, pw := io.Pipe()
			go func() {
				for sent := 0; sent < size; sent += len(chunk) {
					if _, err := pw.Write(chunk); err != nil {
						return
					}
				}
				pw.Close()
			}()
			req, _ := http.NewRequest("POST", "http://"+p.addr+"/api/v1/hooks/git", pr)
			req.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("00", 32))
			resp, err := client.Do(req)
			key := "error"
			if err == nil {
				key = strconv.Itoa(resp.StatusCode)
				resp.Body.Close()
			}
			pr.CloseWithError(io.ErrClosedPipe)
			v, _ := codes.LoadOrStore(key, new(atomic.Int64))
			v.(*atomic.Int64).Add(1)
		})
	}
	wg.Wait()
	close(stop)
	fmt.Printf("badposts: %d concurrent badly signed %d MB posts: peak RSS %s; answers %s\n", n, size>>20, mib(<-peak), counts(&codes))
}

func (p probe) stall(n, sent int) {
	stop := make(chan struct{})
	peak := p.peak(stop)
	var conns []net.Conn
	for range n {
		c, err := net.Dial("tcp", p.addr)
		if err != nil {
			continue
		}
		fmt.Fprintf(c, "POST /api/v1/hooks/git HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\nX-Hub-Signature-256: sha256=%s\r\n\r\n", 1000000, strings.Repeat("00", 32))
		c.Write(bytes.Repeat([]byte("x"), sent))
		conns = append(conns, c)
	}
	before := p.sockets()
	time.Sleep(15 * time.Second)
	open := 0
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := io.Copy(io.Discard, c); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				open++
			}
		}
		c.Close()
	}
	close(stop)
	fmt.Printf("stall: %d connections sending %d KB and stalling: peak RSS %s; berth's sockets %d at once, %d of them still open after 15 s\n", len(conns), sent>>10, mib(<-peak), before, open)
}

func (p probe) idle(n int) {
	var conns []net.Conn
	served := 0
	for range n {
		c, err := net.Dial("tcp", p.addr)
		if err != nil {
			continue
		}
		conns = append(conns, c)
		c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			served++
		}
	}
	after := p.sockets()
	time.Sleep(35 * time.Second)
	later := p.sockets()
	for _, c := range conns {
		c.Close()
	}
	fmt.Printf("idle: %d keep-alive connections, %d served: berth held %d sockets right after, %d after 35 s\n", len(conns), served, after, later)
}

func counts(m *sync.Map) string {
	var parts []string
	m.Range(func(k, v any) bool {
		parts = append(parts, fmt.Sprintf("%s×%d", k, v.(*atomic.Int64).Load()))
		return true
	})
	return strings.Join(parts, " ")
}

func mib(b int64) string { return fmt.Sprintf("%d MiB", b>>20) }

func maxOf(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
