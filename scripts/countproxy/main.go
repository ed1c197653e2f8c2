// Command countproxy forwards to a Nomad agent and counts the requests it
// forwards, for scripts/bench-fleet.sh: berth is pointed at it, and the
// script reads the counts (GET /counts on the admin address: a JSON object
// of "METHOD /path" to count, the event stream included) before and after
// an idle window.
//
//	countproxy -target http://127.0.0.1:4646 -addr-file F -admin-file G
//
// It writes the proxy's URL to F and the admin URL to G, and runs until
// SIGINT or SIGTERM. It is a benchmark tool: no berth binary imports it.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/berth-dev/berth/internal/faultproxy"
)

func main() {
	target := flag.String("target", "", "the Nomad agent's URL")
	addrFile := flag.String("addr-file", "", "write the proxy's URL here")
	adminFile := flag.String("admin-file", "", "write the admin URL (GET /counts) here")
	flag.Parse()
	if err := run(*target, *addrFile, *adminFile); err != nil {
		fmt.Fprintln(os.Stderr, "countproxy:", err)
		os.Exit(1)
	}
}

func run(target, addrFile, adminFile string) error {
	p, err := faultproxy.New(target)
	if err != nil {
		return err
	}
	defer p.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	admin := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		counts := map[string]int{}
		for _, req := range p.Requests() {
			path := req.Path
			// One key per endpoint: IDs folded away (a Variable's path is
			// kept: the lease, the history's head and its shards are
			// told apart).
			if parts := strings.Split(path, "/"); len(parts) > 3 && (parts[2] == "job" || parts[2] == "node" || parts[2] == "allocation") {
				path = strings.Join(parts[:3], "/") + "/…"
				if len(parts) > 4 {
					path += "/" + parts[len(parts)-1]
				}
			}
			counts[req.Method+" "+path]++
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(counts)
	})}
	go admin.Serve(ln)
	defer admin.Close()
	if err := os.WriteFile(addrFile, []byte(p.URL()+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(adminFile, []byte("http://"+ln.Addr().String()+"\n"), 0o644); err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	return nil
}
