package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/hashicorp/nomad/api"
)

// deployJob is the reconciler's job file, as examples/deploy ships it.
const deployJob = "../../examples/deploy/berth-reconciler.nomad.hcl"

// deploySpecs are the specs of the test's spec repository: one project and
// one workspace on a fake GPU, run by raw_exec.
func deploySpecs(workspaces ...string) string {
	s := `apiVersion: berth.dev/v1
kind: PriorityTier
metadata: {name: medium}
spec: {value: 50}
---
apiVersion: berth.dev/v1
kind: Project
metadata: {name: deployed}
spec:
  tier: medium
  quota: {gpus: 2}
`
	for _, w := range workspaces {
		s += fmt.Sprintf(`---
apiVersion: berth.dev/v1
kind: Workspace
metadata: {name: %s, project: deployed}
spec:
  owner: test
  state: Running
  task: {driver: raw_exec, command: /bin/sh, args: ["-c", "sleep 3600"]}
  resources: {gpus: 1, memory: 32Mi}
`, w)
	}
	return s
}

// TestRealDeployReconcilerJob registers examples/deploy's reconciler job
// on the real agent, as the README's commands do, with two substitutions
// the test agent needs: raw_exec runs the tasks the file gives to docker
// (berth is the binary `make static` builds, the Dockerfile's build step;
// git-sync is testdata/deploy/git-sync, a stand-in that takes the same
// flags and publishes the same link), and the static port becomes a
// dynamic one. The tokens come from the Nomad Variable nomad/jobs/berth
// through the job's templates. Nomad's check on /healthz passes, berth
// answers the API with the UI token only, starts the spec repository's
// workspace on Nomad, and applies a new commit once git-sync swaps its
// link.
func TestRealDeployReconcilerJob(t *testing.T) {
	c := realnomad.Client(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("the git-sync stand-in needs git")
	}
	tmp := t.TempDir()

	// 1. berth as the image holds it.
	bin := filepath.Join(tmp, "berth")
	build := exec.Command("make", "-s", "static", "STATIC="+bin)
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make static: %v\n%s", err, out)
	}
	standIn, err := filepath.Abs("testdata/deploy/git-sync")
	if err != nil {
		t.Fatal(err)
	}

	// 2. The spec repository git-sync follows.
	repo := filepath.Join(tmp, "cluster-specs")
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=test", "-c", "user.email=test@example.com"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	commit := func(specs string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(repo, "specs.yaml"), []byte(specs), 0o644); err != nil {
			t.Fatal(err)
		}
		git("add", "-A")
		git("commit", "-q", "-m", "specs")
	}
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	git("init", "-q")
	commit(deploySpecs("first"))

	// 3. The tokens, where the job's templates read them.
	const uiToken = "deploy-test-ui-token-0123456789"
	vars := c.Variables()
	if _, _, err := vars.Create(&api.Variable{Path: "nomad/jobs/berth", Items: api.VariableItems{
		"token": "unused-acl-is-off", "ui_token": uiToken}}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vars.Delete("nomad/jobs/berth", nil) })

	// 4. The job file, parsed by Nomad with the README's -var flags.
	hcl, err := os.ReadFile(deployJob)
	if err != nil {
		t.Fatal(err)
	}
	job, err := c.Jobs().ParseHCLOpts(&api.JobsParseRequest{JobHCL: string(hcl), Canonicalize: true, Variables: fmt.Sprintf(
		"image = %q\nspecs_repo = %q\nspecs_period = \"1s\"\nnomad_addr = %q\n", "berth-under-test", repo, os.Getenv("NOMAD_ADDR"))})
	if err != nil {
		t.Fatalf("parse %s: %v", deployJob, err)
	}
	rawExec(t, job, map[string]string{"berth-under-test": bin, "registry.k8s.io/git-sync/git-sync:v4.2.1": standIn})
	// One replica: this test proves the job starts and reconciles;
	// TestRealLeaderElection proves replicas hand over.
	one := 1
	job.TaskGroups[0].Count = &one
	if _, _, err := c.Jobs().Register(job, nil); err != nil {
		t.Fatalf("register %s: %v", deployJob, err)
	}
	t.Cleanup(func() { stopJob(t, c, *job.ID) })

	// 5. Healthy: running, with Nomad's check on /healthz passing.
	var alloc *api.Allocation
	waitFor(t, "the berth allocation running with its /healthz check passing", 3*time.Minute, func() error {
		allocs, _, err := c.Jobs().Allocations(*job.ID, false, nil)
		if err != nil {
			return err
		}
		for _, a := range allocs {
			if a.ClientStatus == api.AllocClientStatusFailed {
				t.Fatalf("allocation %s failed:%s", a.ID, allocEvents(c, a.ID))
			}
			for name, ts := range a.TaskStates {
				if ts.Restarts > 0 || ts.Failed {
					t.Fatalf("allocation %s: task %s failed or restarted:%s", a.ID, name, allocEvents(c, a.ID))
				}
			}
			if a.ClientStatus != api.AllocClientStatusRunning {
				continue
			}
			checks, err := c.Allocations().Checks(a.ID, nil)
			if err != nil {
				return err
			}
			for _, ch := range checks {
				if ch.Status != "success" {
					return fmt.Errorf("check %s: %s %s", ch.Check, ch.Status, ch.Output)
				}
			}
			if len(checks) == 0 {
				return fmt.Errorf("allocation %s: no check result yet", a.ID)
			}
			alloc, _, err = c.Allocations().Info(a.ID, nil)
			return err
		}
		return fmt.Errorf("no running allocation")
	})
	var addr string
	for _, n := range alloc.AllocatedResources.Shared.Networks {
		for _, p := range n.DynamicPorts {
			if p.Label == "http" {
				addr = fmt.Sprintf("http://127.0.0.1:%d", p.Value)
			}
		}
	}
	if addr == "" {
		t.Fatalf("allocation %s has no http port", alloc.ID)
	}
	if code, body := httpGet(t, addr+"/healthz", ""); code != http.StatusOK {
		t.Fatalf("GET /healthz: %d %s", code, body)
	}
	if code, _ := httpGet(t, addr+"/api/v1/status", ""); code != http.StatusUnauthorized {
		t.Fatalf("GET /api/v1/status without the UI token: %d, want 401", code)
	}

	// 6. Reconciling: the repository's workspace runs on Nomad; a new
	// commit is applied once git-sync publishes it.
	running := func(names ...string) func() error {
		return func() error {
			code, body := httpGet(t, addr+"/api/v1/status", uiToken)
			if code != http.StatusOK {
				return fmt.Errorf("GET /api/v1/status: %d %s", code, body)
			}
			var st struct {
				Workspaces []struct{ Project, Name, State string }
			}
			if err := json.Unmarshal([]byte(body), &st); err != nil {
				return err
			}
			for _, n := range names {
				found := false
				for _, w := range st.Workspaces {
					if w.Project == "deployed" && w.Name == n {
						if w.State != "Running" {
							return fmt.Errorf("deployed/%s is %s", n, w.State)
						}
						found = true
					}
				}
				if !found {
					return fmt.Errorf("no workspace deployed/%s in %s", n, body)
				}
			}
			return nil
		}
	}
	waitFor(t, "deployed/first running", 2*time.Minute, running("first"))
	commit(deploySpecs("first", "second"))
	waitFor(t, "deployed/second running after the new commit", 2*time.Minute, running("first", "second"))
	jobs, _, err := c.Jobs().List(&api.QueryOptions{Namespace: "deployed"})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 {
		t.Errorf("namespace deployed has %d jobs, want the 2 workspaces'", len(jobs))
	}
}

// rawExec turns the docker tasks of job into raw_exec ones: the image
// names the command that stands in for it (commands), the args stay. Static
// ports become dynamic, so the test does not need port 4680.
func rawExec(t *testing.T, job *api.Job, commands map[string]string) {
	t.Helper()
	for _, tg := range job.TaskGroups {
		for _, n := range tg.Networks {
			for _, p := range n.ReservedPorts {
				n.DynamicPorts = append(n.DynamicPorts, api.Port{Label: p.Label, To: p.To})
			}
			n.ReservedPorts = nil
		}
		for _, task := range tg.Tasks {
			if task.Driver != "docker" {
				continue
			}
			image, _ := task.Config["image"].(string)
			cmd, ok := commands[image]
			if !ok {
				t.Fatalf("task %s: no stand-in for image %q", task.Name, image)
			}
			task.Driver = "raw_exec"
			task.Config = map[string]any{"command": cmd, "args": task.Config["args"]}
		}
	}
}

// bindPolicy applies the policy file as name, bound to job in namespace
// (workload identity: nomad acl policy apply -job), with nomad at bin,
// and deletes it when the test ends.
func bindPolicy(t *testing.T, c *api.Client, bin, namespace, job, name, file string) {
	t.Helper()
	cmd := exec.Command(bin, "acl", "policy", "apply", "-namespace", namespace, "-job", job, name, file)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
	}
	t.Cleanup(func() { c.ACLPolicies().Delete(name, nil) })
}

// stopJob purges a job and waits until its allocations are terminal, so
// that its berth stops reconciling before the agent is cleaned.
func stopJob(t *testing.T, c *api.Client, id string) {
	if _, _, err := c.Jobs().Deregister(id, true, nil); err != nil {
		t.Errorf("deregister %s: %v", id, err)
		return
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		allocs, _, err := c.Allocations().List(&api.QueryOptions{Filter: fmt.Sprintf("JobID == %q", id)})
		done := err == nil
		for _, a := range allocs {
			if a.ClientStatus == api.AllocClientStatusRunning || a.ClientStatus == api.AllocClientStatusPending {
				done = false
			}
		}
		if done {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Errorf("job %s: allocations still running a minute after deregistering", id)
}

// allocEvents summarises an allocation's task events, for failures.
func allocEvents(c *api.Client, id string) string {
	a, _, err := c.Allocations().Info(id, nil)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(a.TaskStates)) {
		for _, e := range a.TaskStates[name].Events {
			fmt.Fprintf(&b, "\n  %s: %s %s", name, e.Type, e.DisplayMessage)
		}
		// And what the task wrote to stderr last: why it exited.
		if r, err := c.AllocFS().Cat(a, "alloc/logs/"+name+".stderr.0", nil); err == nil {
			out, _ := io.ReadAll(r)
			r.Close()
			if len(out) > 2000 {
				out = out[len(out)-2000:]
			}
			fmt.Fprintf(&b, "\n  %s's stderr:\n%s", name, out)
		}
	}
	return b.String()
}

// httpGet GETs url, with token as the bearer token when it is not empty.
func httpGet(t *testing.T, url, token string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// waitFor polls cond every 200 ms until it returns nil, and fails t with
// its last error after limit.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s: %v", what, limit, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
