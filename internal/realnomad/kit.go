package realnomad

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Kit is the directory of the ../shared/nomad-dev cluster the tests run
// against (NOMAD_DEV_DIR, which make e2e sets): what a bad day needs
// beyond the API. Node K's GPUs are files under gpus-K (chmod 777 marks
// one unhealthy, removing it removes the GPU), and line K of pids is its
// agent's process.
type Kit struct{ Dir string }

// KitDir returns the kit of the running cluster, or skips t when
// NOMAD_DEV_DIR is not set (an agent started some other way).
func KitDir(t testing.TB) Kit {
	t.Helper()
	dir := os.Getenv("NOMAD_DEV_DIR")
	if dir == "" {
		t.Skip("NOMAD_DEV_DIR is not set: this test fails GPUs and nodes of a ../shared/nomad-dev cluster (make e2e sets it)")
	}
	return Kit{Dir: dir}
}

// nodeNumber is K of node "node-K".
func nodeNumber(t testing.TB, node string) int {
	t.Helper()
	k, err := strconv.Atoi(strings.TrimPrefix(node, "node-"))
	if err != nil || !strings.HasPrefix(node, "node-") {
		t.Fatalf("node %q is not one of the kit's (node-K)", node)
	}
	return k
}

// GPUFile is the file behind GPU id of node.
func (k Kit) GPUFile(t testing.TB, node, id string) string {
	return filepath.Join(k.Dir, fmt.Sprintf("gpus-%d", nodeNumber(t, node)), id)
}

// pid is the process of node's agent (line K of pids).
func (k Kit) pid(t testing.TB, node string) int {
	t.Helper()
	f, err := os.Open(filepath.Join(k.Dir, "pids"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for i := 1; s.Scan(); i++ {
		if i == nodeNumber(t, node) {
			pid, err := strconv.Atoi(strings.TrimSpace(s.Text()))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
	}
	t.Fatalf("%s has no line for %s", f.Name(), node)
	return 0
}

// KillClient kills node's client agent (kill -9), as a node that loses
// power; node-1 is the server too and is refused.
func (k Kit) KillClient(t testing.TB, node string) {
	t.Helper()
	if node == "node-1" {
		t.Fatal("node-1 runs the server: kill another node")
	}
	if err := syscall.Kill(k.pid(t, node), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}

// RestartClient starts node's client agent again from its config (its
// data directory keeps its node ID), and records its new process where
// down finds it.
func (k Kit) RestartClient(t testing.TB, node string) {
	t.Helper()
	log, err := os.OpenFile(filepath.Join(k.Dir, node+".log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(filepath.Join(k.Dir, "bin", "nomad"), "agent", "-config", filepath.Join(k.Dir, node+".hcl"))
	cmd.Env = append(os.Environ(), "TMPDIR="+filepath.Join(k.Dir, "tmp"))
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait() //nolint:errcheck // reaped whenever it ends
	path := filepath.Join(k.Dir, "pids")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	lines[nodeNumber(t, node)-1] = strconv.Itoa(cmd.Process.Pid)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Report logs a measured figure and appends it to the file E2E_REPORT
// names (make e2e prints it at the end, as go test shows no log of a
// test that passes).
func Report(t testing.TB, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf("%s: %s", t.Name(), fmt.Sprintf(format, args...))
	t.Log(line)
	path := os.Getenv("E2E_REPORT")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Errorf("report: %v", err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s\n", time.Now().UTC().Format(time.TimeOnly), line)
}
