package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/pack"
	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad/api"
)

const (
	packDir     = "../../packs/berth"
	agentJob    = "../../examples/deploy/berth-agent.nomad.hcl"
	gitSyncTag  = "registry.k8s.io/git-sync/git-sync:v4.2.1"
	packUIToken = "pack-test-ui-token-0123456789"
)

// specRepo builds berth as its image holds it (make static) and a spec
// repository with deploySpecs("first"); commit commits new specs to it.
func specRepo(t *testing.T) (bin, repo string, commit func(string)) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("the spec repository needs git")
	}
	tmp := t.TempDir()
	bin = filepath.Join(tmp, "berth")
	build := exec.Command("make", "-s", "static", "STATIC="+bin)
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make static: %v\n%s", err, out)
	}
	repo = filepath.Join(tmp, "cluster-specs")
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=test", "-c", "user.email=test@example.com"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	commit = func(specs string) {
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
	return bin, repo, commit
}

// renderPack renders packs/berth with set and has Nomad parse each job.
func renderPack(t *testing.T, c *api.Client, set map[string]string) map[string]*api.Job {
	t.Helper()
	p, err := pack.Load(packDir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := p.Render(set)
	if err != nil {
		t.Fatal(err)
	}
	jobs := map[string]*api.Job{}
	for name, hcl := range r.Jobs {
		job, err := c.Jobs().ParseHCLOpts(&api.JobsParseRequest{JobHCL: hcl, Canonicalize: true})
		if err != nil {
			t.Fatalf("Nomad parses the pack's %s: %v\n%s", name, err, hcl)
		}
		jobs[*job.ID] = job
	}
	return jobs
}

// parseFile has Nomad parse a job file with HCL variables.
func parseFile(t *testing.T, c *api.Client, file, vars string) *api.Job {
	t.Helper()
	hcl, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	job, err := c.Jobs().ParseHCLOpts(&api.JobsParseRequest{JobHCL: string(hcl), Canonicalize: true, Variables: vars})
	if err != nil {
		t.Fatalf("parse %s: %v", file, err)
	}
	return job
}

// runReconciler registers the pack's reconciler job, with raw_exec for
// docker as TestRealDeployReconcilerJob does, and waits until every
// replica runs with Nomad's /healthz check passing. It returns the
// replicas' API addresses.
func runReconciler(t *testing.T, c *api.Client, job *api.Job, bin string) []string {
	t.Helper()
	standIn, err := filepath.Abs("testdata/deploy/git-sync")
	if err != nil {
		t.Fatal(err)
	}
	rawExec(t, job, map[string]string{"berth-under-test": bin, gitSyncTag: standIn})
	if _, _, err := c.Jobs().Register(job, nil); err != nil {
		t.Fatalf("register the pack's %s: %v", *job.ID, err)
	}
	t.Cleanup(func() { stopJob(t, c, *job.ID) })
	want := *job.TaskGroups[0].Count
	var addrs []string
	waitFor(t, fmt.Sprintf("%d berth allocations running with their /healthz checks passing", want), 3*time.Minute, func() error {
		allocs, _, err := c.Jobs().Allocations(*job.ID, false, nil)
		if err != nil {
			return err
		}
		addrs = addrs[:0]
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
			if len(checks) == 0 {
				return fmt.Errorf("allocation %s: no check result yet", a.ID)
			}
			for _, ch := range checks {
				if ch.Status != "success" {
					return fmt.Errorf("allocation %s: check %s: %s %s", a.ID, ch.Check, ch.Status, ch.Output)
				}
			}
			info, _, err := c.Allocations().Info(a.ID, nil)
			if err != nil {
				return err
			}
			for _, n := range info.AllocatedResources.Shared.Networks {
				for _, p := range n.DynamicPorts {
					if p.Label == "http" {
						addrs = append(addrs, fmt.Sprintf("http://127.0.0.1:%d", p.Value))
					}
				}
			}
		}
		if len(addrs) != want {
			return fmt.Errorf("%d of %d replicas running and healthy", len(addrs), want)
		}
		return nil
	})
	return addrs
}

// workspacesRunning returns a condition: the berth at addr reports each
// of names in project deployed as Running.
func workspacesRunning(t *testing.T, addr string, names ...string) func() error {
	return func() error {
		code, body := httpGet(t, addr+"/api/v1/status", packUIToken)
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

// TestRealPackRendersTheDeployJobs renders packs/berth with the settings
// examples/deploy's job files take (a static token: Nomad 1.6) and has
// Nomad parse both: the pack's jobs are the files' jobs, field for field.
// It then runs the pack's reconciler as it renders it — two replicas on
// the kit's two nodes, git-sync checking the spec repository out, the
// static token and the UI token from nomad/jobs/berth — with raw_exec
// standing in for docker: both replicas pass Nomad's /healthz check, the
// repository's workspace runs, and a new commit is applied. The agent's
// job, which needs NVML, is planned: Nomad places it on the nodes marked
// meta.gpu = true, and only there.
func TestRealPackRendersTheDeployJobs(t *testing.T) {
	c := realnomad.Client(t)
	bin, repo, commit := specRepo(t)
	addr := os.Getenv("NOMAD_ADDR")
	const artifact = "https://files.example.com/berth_linux_amd64.tar.gz"
	jobs := renderPack(t, c, map[string]string{
		"workload_identity": "false", "image": "berth-under-test", "specs_repo": repo,
		"specs_period": "1s", "nomad_addr": addr, "agent_artifact": artifact,
	})
	if len(jobs) != 2 || jobs["berth"] == nil || jobs["berth-agent"] == nil {
		t.Fatalf("the pack renders jobs %v, want berth and berth-agent", jobs)
	}
	files := map[string]*api.Job{
		"berth": parseFile(t, c, deployJob, fmt.Sprintf("image = %q\nspecs_repo = %q\nspecs_period = \"1s\"\nnomad_addr = %q\n",
			"berth-under-test", repo, addr)),
		"berth-agent": parseFile(t, c, agentJob, fmt.Sprintf("berth_artifact = %q\nnomad_addr = %q\n", artifact, addr)),
	}
	for id, want := range files {
		if d := cmp.Diff(want, jobs[id]); d != "" {
			t.Errorf("the pack's job %s differs from examples/deploy's (-file +pack):\n%s", id, d)
		}
	}

	// The tokens, where the job's templates read them (ACLs may be off:
	// the token is then not checked, as in TestRealDeployReconcilerJob).
	token := "unused-acl-is-off"
	if tok := os.Getenv("NOMAD_TOKEN"); tok != "" {
		token = tok
	}
	vars := c.Variables()
	if _, _, err := vars.Create(&api.Variable{Path: "nomad/jobs/berth", Items: api.VariableItems{
		"token": token, "ui_token": packUIToken}}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vars.Delete("nomad/jobs/berth", nil) })
	addrs := runReconciler(t, c, jobs["berth"], bin)
	if code, _ := httpGet(t, addrs[0]+"/api/v1/status", ""); code != http.StatusUnauthorized {
		t.Fatalf("GET /api/v1/status without the UI token: %d, want 401", code)
	}
	// Every replica answers the status (the followers read-only, naming
	// the leader); the leader's cycles start the workspace.
	for _, a := range addrs {
		waitFor(t, "deployed/first running, as "+a+" reports it", 2*time.Minute, workspacesRunning(t, a, "first"))
	}
	commit(deploySpecs("first", "second"))
	waitFor(t, "deployed/second running after the new commit", 2*time.Minute, workspacesRunning(t, addrs[0], "first", "second"))

	// The agent: planned onto the GPU nodes only.
	nodes, _, err := c.Nodes().List(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) < 2 {
		t.Fatalf("%d nodes: the kit starts 2", len(nodes))
	}
	gpu := nodes[0].ID
	if _, err := c.Nodes().Meta().Apply(&api.NodeMetaApplyRequest{NodeID: gpu, Meta: map[string]*string{"gpu": new("true")}}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Nodes().Meta().Apply(&api.NodeMetaApplyRequest{NodeID: gpu, Meta: map[string]*string{"gpu": nil}}, nil)
	})
	// The client sends its new metadata to the servers in its own time.
	waitFor(t, "the servers see meta.gpu on "+gpu, time.Minute, func() error {
		n, _, err := c.Nodes().Info(gpu, nil)
		if err != nil {
			return err
		}
		if n.Meta["gpu"] != "true" {
			return fmt.Errorf("meta %v", n.Meta)
		}
		return nil
	})
	plan, _, err := c.Jobs().Plan(jobs["berth-agent"], false, nil)
	if err != nil {
		t.Fatalf("plan the pack's berth-agent: %v", err)
	}
	placed := map[string]int{}
	if plan.Annotations != nil {
		for name, tg := range plan.Annotations.DesiredTGUpdates {
			placed[name] = int(tg.Place)
		}
	}
	if placed["agent"] != 1 {
		t.Errorf("berth-agent planned %v placements, want 1: the one node with meta.gpu = true", placed)
	}
}

// TestRealPackWorkloadIdentity runs the pack's reconciler as it renders
// by default, with workload identity (Nomad 1.7+), on an agent with ACLs
// on (make e2e with E2E_ACL=1 and NOMAD_DEV_VERSION=2.0.5): berth's task
// has no static token, only its workload identity (identity { env = true
// }: NOMAD_TOKEN) and the Task API socket (NOMAD_ADDR=unix://…/api.sock),
// and the job's only policy is examples/deploy's least-privilege one,
// bound to the job with `nomad acl policy apply -namespace default -job
// berth`. Its replicas pass Nomad's /healthz check, its cycles start the
// spec repository's workspace, and a new commit is applied.
// Before the policy is bound, the same identity is refused: the policy is
// what lets it in. Skipped without ACLs, or before Nomad 1.7.
func TestRealPackWorkloadIdentity(t *testing.T) {
	c := realnomad.Client(t)
	nomadBin := needWorkloadIdentity(t, c)
	bin, repo, commit := specRepo(t)
	jobs := renderPack(t, c, map[string]string{
		"image": "berth-under-test", "specs_repo": repo, "specs_period": "1s", "agent_enabled": "false",
	})
	job := jobs["berth"]
	if job == nil || len(jobs) != 1 {
		t.Fatalf("the pack renders %v, want the job berth alone", jobs)
	}
	task := job.TaskGroups[0].Tasks[2]
	if task.Name != "berth" || task.Env["NOMAD_ADDR"] != "unix://${NOMAD_SECRETS_DIR}/api.sock" || task.Identity == nil || !task.Identity.Env {
		t.Fatalf("the pack's berth task does not reach Nomad with its identity: %+v", task)
	}
	for _, tpl := range task.Templates {
		if strings.Contains(*tpl.EmbeddedTmpl, "NOMAD_TOKEN") {
			t.Fatalf("the pack's berth task still renders a static token: %s", *tpl.EmbeddedTmpl)
		}
	}

	// Nomad CE lets only a management token create namespaces: the
	// project's, made beforehand as the quickstart says.
	if _, err := c.Namespaces().Register(&api.Namespace{Name: "deployed"}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Namespaces().Delete("deployed", nil) })
	// The UI token alone: no Nomad token anywhere.
	vars := c.Variables()
	if _, _, err := vars.Create(&api.Variable{Path: "nomad/jobs/berth", Items: api.VariableItems{"ui_token": packUIToken}}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vars.Delete("nomad/jobs/berth", nil) })

	// The job's identity, before any policy is bound to it, is refused.
	one := 1
	job.TaskGroups[0].Count = &one
	standIn, err := filepath.Abs("testdata/deploy/git-sync")
	if err != nil {
		t.Fatal(err)
	}
	rawExec(t, job, map[string]string{"berth-under-test": bin, gitSyncTag: standIn})
	if _, _, err := c.Jobs().Register(job, nil); err != nil {
		t.Fatalf("register the pack's berth: %v", err)
	}
	waitFor(t, "berth's log saying Nomad refuses its identity", 2*time.Minute, func() error {
		allocs, _, err := c.Jobs().Allocations("berth", false, nil)
		if err != nil {
			return err
		}
		if len(allocs) == 0 {
			return fmt.Errorf("no allocation")
		}
		out := allocLogs(t, c, allocs[0], "berth") // one replica
		if strings.Contains(out, "Nomad refused berth's token") {
			t.Logf("before the policy, berth's log says:\n%s", out)
			return nil
		}
		time.Sleep(time.Second)
		return fmt.Errorf("berth's log so far:\n%s", out)
	})
	stopJob(t, c, "berth")

	// The shipped policy, bound to the job.
	policy, err := filepath.Abs("../../examples/deploy/berth-reconciler.policy.hcl")
	if err != nil {
		t.Fatal(err)
	}
	bindPolicy(t, c, nomadBin, "default", "berth", "berth-reconciler", policy)

	job = renderPack(t, c, map[string]string{
		"image": "berth-under-test", "specs_repo": repo, "specs_period": "1s", "agent_enabled": "false",
	})["berth"]
	addrs := runReconciler(t, c, job, bin)
	for _, a := range addrs {
		waitFor(t, "deployed/first running, as "+a+" reports it", 2*time.Minute, workspacesRunning(t, a, "first"))
	}
	commit(deploySpecs("first", "second"))
	waitFor(t, "deployed/second running after the new commit", 2*time.Minute, workspacesRunning(t, addrs[0], "first", "second"))
}

// needWorkloadIdentity skips t unless the agent has ACLs on, is Nomad
// 1.7 or later, and its directory is short enough for Nomad to create a
// task's Task API socket; it returns the kit's nomad binary.
func needWorkloadIdentity(t *testing.T, c *api.Client) string {
	t.Helper()
	nomadBin, why := workloadIdentity(t, c)
	if why != "" {
		t.Skip(why)
	}
	return nomadBin
}

// workloadIdentity returns the kit's nomad binary when a job's task can
// reach the agent with its workload identity under a policy bound to the
// job (ACLs on, Nomad 1.7 or later, the kit's directory short enough for
// Nomad to create a task's Task API socket), and otherwise why not.
func workloadIdentity(t *testing.T, c *api.Client) (nomadBin, why string) {
	t.Helper()
	if _, _, err := c.ACLPolicies().List(nil); err != nil { // 400 "ACL support disabled"
		return "", fmt.Sprintf("the agent has no ACLs (E2E_ACL=1 starts one with them): %v", err)
	}
	self, err := c.Agent().Self()
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := self.Config["Version"].(map[string]any); v != nil {
		if ver, _ := v["Version"].(string); strings.HasPrefix(ver, "1.6.") || strings.HasPrefix(ver, "1.5.") {
			return "", fmt.Sprintf("Nomad %s: workload identities reach the API from 1.7 (NOMAD_DEV_VERSION=2.0.5)", ver)
		}
	}
	nomadBin = filepath.Join(os.Getenv("NOMAD_DEV_DIR"), "bin", "nomad")
	if _, err := os.Stat(nomadBin); err != nil {
		return "", fmt.Sprintf("the kit's nomad binary (%s) applies the policy as the docs say: %v", nomadBin, err)
	}
	// Nomad creates the Task API socket in the task's secrets directory,
	// under the kit's data directory DIR/tmp/NomadClientN/ALLOC/berth/:
	// a socket's address holds 107 bytes, so DIR must be short.
	if dir := os.Getenv("NOMAD_DEV_DIR"); len(dir)+len("/tmp/NomadClient0123456789/00000000-0000-0000-0000-000000000000/berth/secrets/api.sock") > 107 {
		return "", fmt.Sprintf("the kit's directory %s is too deep for Nomad to create a task's api.sock (107 bytes at most): run with a shorter E2E_DIR (E2E_DIR=/tmp/bwi)", dir)
	}
	return nomadBin, ""
}

// allocLogs returns what task of a wrote to stderr and stdout so far
// (its first log files), each read with one request.
func allocLogs(t *testing.T, c *api.Client, a *api.AllocationListStub, task string) string {
	t.Helper()
	alloc, _, err := c.Allocations().Info(a.ID, nil)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, stream := range []string{"stderr", "stdout"} {
		r, err := c.AllocFS().Cat(alloc, "alloc/logs/"+task+"."+stream+".0", nil)
		if err != nil {
			b.WriteString(err.Error() + "\n")
			continue
		}
		data, _ := io.ReadAll(io.LimitReader(r, 1<<20))
		r.Close()
		b.Write(data)
	}
	return b.String()
}
