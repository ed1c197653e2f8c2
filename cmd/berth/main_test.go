package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"berth": func() { os.Exit(Main()) },
	})
}

// TestScripts runs cmd/berth/testdata/script/*.txtar in-process.
// BERTH_UPDATE=1 rewrites the expected output in the scripts.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:           "testdata/script",
		UpdateScripts: os.Getenv("BERTH_UPDATE") != "",
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitfor":   cmdWaitFor,
			"http":      cmdHTTP,
			"fakenomad": fakeNomad,
		},
		Setup: func(env *testscript.Env) error {
			env.Setenv("GITHUB_STEP_SUMMARY", "")
			// berth apply's spec cache (--cache-dir) in the script's
			// own directory: every apply of a script goes through it.
			env.Setenv("XDG_CACHE_HOME", filepath.Join(env.WorkDir, ".cache"))
			return nil
		},
	})
}

// cmdWaitFor waits (up to 30s) for a berth reconcile started in the
// background to write its URL to ADDRFILE and to serve PATH with a body
// containing TEXT, then sets BERTH_SERVER to that URL.
//
//	waitfor ADDRFILE PATH TEXT
func cmdWaitFor(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: waitfor ADDRFILE PATH TEXT")
	}
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(ts.MkAbs(args[0]))
		if err == nil && len(b) > 0 {
			addr := strings.TrimSpace(string(b))
			resp, err := http.Get(addr + args[1])
			if err == nil {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				last = string(body)
				if strings.Contains(last, args[2]) {
					ts.Setenv("BERTH_SERVER", addr)
					return
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	ts.Fatalf("waitfor: %s never contained %q; last:\n%s", args[1], args[2], last)
}

// cmdHTTP sends one request to the berth that waitfor found and prints
// the answer's status code, then its body.
//
//	http METHOD PATH [NAME:VALUE...]   (a Host:NAME header sets the Host)
func cmdHTTP(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: http METHOD PATH [NAME:VALUE...]")
	}
	req, err := http.NewRequest(args[0], ts.Getenv("BERTH_SERVER")+args[1], nil)
	ts.Check(err)
	for _, h := range args[2:] {
		k, v, _ := strings.Cut(h, ":")
		if strings.EqualFold(k, "Host") {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	ts.Check(err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	ts.Check(err)
	fmt.Fprintf(ts.Stdout(), "%d\n%s", resp.StatusCode, body)
}
