package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/hashicorp/nomad/api"
)

const quickstart = "../../docs/quickstart.md"

// quickstartScript returns the page's sh blocks in order, joined, except
// a block right after a `<!-- quickstart-test: skip … -->` line.
func quickstartScript(t *testing.T) (string, int) {
	t.Helper()
	f, err := os.Open(quickstart)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		b              strings.Builder
		in, skip, drop bool
		blocks         int
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !in && strings.HasPrefix(line, "<!-- quickstart-test: skip"):
			skip = true
		case !in && line == "```sh":
			in, drop, skip = true, skip, false
			if !drop {
				blocks++
				fmt.Fprintf(&b, "echo '+ quickstart block %d'\n", blocks)
			}
		case in && line == "```":
			in = false
		case in && !drop:
			b.WriteString(line + "\n")
		case !in && strings.TrimSpace(line) != "":
			skip = skip && strings.HasPrefix(line, "<!--")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String(), blocks
}

// TestRealQuickstart runs docs/quickstart.md as a new user follows it:
// every sh block in order, in one bash (set -euo pipefail) at the
// repository's root, on the kit this run started (the page's first
// block, which starts one, is marked to skip), with the kit's nomad and
// berth's nomad-pack stand-in (internal/pack/nomadpack: the Go proxy
// does not serve nomad-pack) on PATH, and berth's port moved next to
// the kit's. The page's own waits prove each step (healthz, the demo
// workspace Running in berth status, the second one after a commit);
// afterwards both workspaces' jobs run in the namespace demo. Needs what
// workload identity needs (TestRealPackWorkloadIdentity).
func TestRealQuickstart(t *testing.T) {
	c := realnomad.Client(t)
	nomadBin := needWorkloadIdentity(t, c)
	script, blocks := quickstartScript(t)
	if blocks < 8 || !strings.Contains(script, "nomad-pack run packs/berth") {
		t.Fatalf("%s: %d sh blocks, without nomad-pack run packs/berth?\n%s", quickstart, blocks, script)
	}
	u, err := url.Parse(os.Getenv("NOMAD_ADDR"))
	if err != nil {
		t.Fatal(err)
	}
	var kitPort int
	if _, err := fmt.Sscan(u.Port(), &kitPort); err != nil {
		t.Fatalf("NOMAD_ADDR %s: %v", u, err)
	}
	port := fmt.Sprint(kitPort + 80) // the kit's clients use +10·K
	script = strings.ReplaceAll(script, "4680", port)

	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "nomad-pack"), "./internal/pack/nomadpack")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the nomad-pack stand-in: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		c.Jobs().Deregister("berth", true, nil)
		c.ACLPolicies().Delete("berth-reconciler", nil)
		c.Variables().Delete("nomad/jobs/berth", nil)
		os.Remove("../../berth.token")
	})

	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	sh := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	sh.Dir = "../.."
	sh.Env = append(os.Environ(), "PATH="+bin+":"+filepath.Dir(nomadBin)+":"+os.Getenv("PATH"))
	out, err := sh.CombinedOutput()
	if err != nil {
		t.Fatalf("the quickstart's commands: %v\n%s", err, out)
	}
	t.Logf("the quickstart's commands:\n%s", out)
	for _, want := range []string{"berth is deployed: job berth", "demo/hello"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the quickstart's output lacks %q", want)
		}
	}
	jobs, _, err := c.Jobs().List(&api.QueryOptions{Namespace: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	running := 0
	for _, j := range jobs {
		if j.Status == "running" {
			running++
		}
	}
	if running != 2 {
		t.Errorf("namespace demo: %d jobs running, want the 2 workspaces'", running)
	}
	if err := realnomad.Clean(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Namespaces().Delete("demo", nil); err != nil {
		t.Errorf("delete namespace demo: %v", err)
	}
}
