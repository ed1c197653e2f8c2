package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/berth-dev/berth/reconcile"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/source"
	"github.com/berth-dev/berth/view"
	"github.com/hashicorp/nomad/api"
)

// secretPolicy is the ACL policy examples/deploy ships for a workspace's
// secrets (project ml's jobs reading ml/*).
const secretPolicy = "../../examples/deploy/workspace-secrets.policy.hcl"

func newLoggedLoop(t *testing.T, log *logBuffer) *realLoop {
	c := realnomad.Client(t)
	d := realnomad.NewDriver(t, nomad.ConfigFromEnv(""))
	dir := t.TempDir()
	l, err := reconcile.New(reconcile.Config{Source: source.DirSource{Dir: dir}, Cluster: d, Store: d,
		Logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	return &realLoop{t: t, c: c, d: d, loop: l, dir: dir}
}

// secretWorkspace is a workspace of project that prints what it got
// (script, with $NOMAD_SECRETS_DIR) and sleeps, with secrets (YAML list
// items, each on its own line).
func secretWorkspace(project, name, script string, secrets ...string) string {
	return fmt.Sprintf(`apiVersion: berth.dev/v1
kind: Workspace
metadata: {name: %s, project: %s}
spec:
  task:
    driver: raw_exec
    command: /bin/sh
    args: ["-c", %q]
    secrets:
%s
  resources: {gpus: 0, memory: 32Mi}
  checkpoint: {signal: SIGTERM, gracePeriod: 2s}
`, name, project, script+"; sleep 3600", "    - "+strings.Join(secrets, "\n    - "))
}

// putVar writes Variable path in namespace ns, and deletes it when the
// test ends (before the agent is cleaned: a namespace holding a
// Variable cannot be deleted).
func putVar(t *testing.T, c *api.Client, ns, path string, items api.VariableItems) {
	t.Helper()
	if _, _, err := c.Variables().Update(&api.Variable{Namespace: ns, Path: path, Items: items}, &api.WriteOptions{Namespace: ns}); err != nil {
		t.Fatalf("write variable %s/%s: %v", ns, path, err)
	}
	t.Cleanup(func() { c.Variables().Delete(path, &api.WriteOptions{Namespace: ns}) })
}

// taskOutput is what replica 0 of ref printed so far.
func taskOutput(t *testing.T, d *nomad.Driver, ref schema.Ref) string {
	t.Helper()
	var b bytes.Buffer
	if err := d.Logs(ctx, ref, 0, "stdout", false, &b); err != nil {
		t.Fatalf("logs of %s: %v", ref, err)
	}
	return b.String()
}

// liveAlloc is ref's one live allocation (its namespace is its project's).
func liveAlloc(t *testing.T, c *api.Client, ref schema.Ref) *api.Allocation {
	t.Helper()
	stubs, _, err := c.Jobs().Allocations(ref.Name, false, &api.QueryOptions{Namespace: ref.Project})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stubs {
		if s.DesiredStatus == "run" && (s.ClientStatus == "running" || s.ClientStatus == "pending") {
			a, _, err := c.Allocations().Info(s.ID, &api.QueryOptions{Namespace: ref.Project})
			if err != nil {
				t.Fatal(err)
			}
			return a
		}
	}
	t.Fatalf("%s has no live allocation: %+v", ref, stubs)
	return nil
}

// The values the tests' Variables hold: what a shell, a template, JSON
// and an env file could each get wrong (quotes, a newline, HTML's and
// the shell's specials, a template's delimiters, a backslash, non-ASCII),
// and a marker no spec, plan, status or log of berth's may hold.
const (
	secretValue  = `tok-0a9f"quoted' line1` + "\n" + `line2 <&> $HOME {{ .x }} \ é`
	secretFile   = `{"type": "service_account", "private_key": "-----BEGIN KEY-----\nMIIE…\n-----END KEY-----\n"}`
	secretNewVal = "tok-ROTATED-7c21"
)

// TestRealSecretsReachTheTask (issue 38, item 1): a workspace's secrets
// reach its task through the real agent, in its environment and as a file
// under its secrets directory, every character as written, from the
// job's own Variable (nomad/jobs/JOB), which it reads without a policy.
// Before the Variable exists the workspace is Starting with a reason
// that names the path. Neither the spec, berth plan's report (text,
// Markdown, JSON), the status, the dashboard's document, the history nor
// berth's log holds a value. A changed value restarts nothing by default
// (the task keeps running, berth applies nothing), and restarts the task
// in place where its secret says changeMode: restart.
func TestRealSecretsReachTheTask(t *testing.T) {
	var log logBuffer
	r := newLoggedLoop(t, &log)
	ref, refR := r.ref("sec"), r.ref("sec-restart")
	script := `printf 'env=[%s]\n' "$HF_TOKEN"; printf 'file=[%s]\n' "$(cat "$NOMAD_SECRETS_DIR/gcloud/key.json")"`
	sec := secretWorkspace("berth-real", "sec", script,
		"{variable: nomad/jobs/sec, key: token, env: HF_TOKEN}",
		`{variable: nomad/jobs/sec, key: "sa.json", file: gcloud/key.json}`)
	secR := secretWorkspace("berth-real", "sec-restart", `printf 'file=[%s]\n' "$(cat "$NOMAD_SECRETS_DIR/token")"`,
		"{variable: nomad/jobs/sec-restart, key: token, file: token, changeMode: restart}")
	r.write("tiers.yaml", realTiers)
	r.write("sec.yaml", sec)
	r.write("sec-restart.yaml", secR)

	// 1. The Variable does not exist yet: Starting, saying which to write.
	r.until(60*time.Second, "sec waits for its Variable", func() bool { return r.state("sec").ReasonKind == view.ReasonWaiting })
	st := r.state("sec")
	want := "its task waits for its secrets: Nomad Variable nomad/jobs/sec (namespace berth-real) does not exist: write it (nomad var put -namespace berth-real nomad/jobs/sec KEY=VALUE)"
	if st.State != view.StateStarting || st.Reason != want {
		t.Errorf("sec is %s: %q\nwant Starting: %q", st.State, st.Reason, want)
	}
	if !strings.Contains(log.String(), "workspace waits to start: "+want) {
		t.Errorf("berth's log does not say why sec waits:\n%s", log.String())
	}

	// 2. Written: it starts, and its task got every character.
	putVar(t, r.c, "berth-real", "nomad/jobs/sec", api.VariableItems{"token": secretValue, "sa.json": secretFile})
	putVar(t, r.c, "berth-real", "nomad/jobs/sec-restart", api.VariableItems{"token": secretValue})
	start := time.Now()
	r.until(90*time.Second, "both run", r.running("sec", "sec-restart"))
	realnomad.Report(t, "secrets: a workspace held for its Variable runs %.1fs after the Variable is written", time.Since(start).Seconds())
	if st := r.state("sec"); st.ReasonKind == view.ReasonWaiting {
		t.Errorf("sec runs but still says %q", st.Reason)
	}
	var out string
	r.until(20*time.Second, "sec printed its secrets", func() bool { out = taskOutput(t, r.d, ref); return strings.Contains(out, "file=[") })
	if w := "env=[" + secretValue + "]\nfile=[" + secretFile + "]\n"; out != w {
		t.Errorf("sec's task got\n%q\nwant\n%q", out, w)
	}

	// 3. Nowhere in berth: a plan adding a secret (a task change: it
	// restarts, the plan names the references), the status, the
	// dashboard, the history, the log.
	base := mustLoad(t, r.dir)
	r.write("sec-restart.yaml", strings.Replace(secR, "restart}", "restart}\n    - {variable: nomad/jobs/sec-restart, key: token, env: TOKEN}", 1))
	head := mustLoad(t, r.dir)
	r.write("sec-restart.yaml", secR)
	snap, err := r.d.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range snap.Allocs {
		if a.Drift != "" {
			t.Errorf("%s reads back from Nomad as drifted: %s (its templates must hash as rendered)", a.Workspace, a.Drift)
		}
	}
	rep := r.plan(base, head, snap)
	repJSON, _ := json.Marshal(rep)
	for _, w := range []string{"update  berth-real/sec-restart on ",
		": restarts: its task changed (secrets [nomad/jobs/sec-restart:token as secrets/token, restart on change] → [nomad/jobs/sec-restart:token as secrets/token, restart on change; nomad/jobs/sec-restart:token as $TOKEN])"} {
		if rep.Summary.Update != 1 || !strings.Contains(rep.Text(), w) {
			t.Errorf("the plan for a new secret:\n%s\nwant it to say %q", rep.Text(), w)
		}
	}
	status, _ := json.Marshal(r.loop.Status())
	detail, _ := r.loop.Workspace(ref)
	detailJSON, _ := json.Marshal(detail)
	m := r.loop.Model()
	dash, _ := json.Marshal(view.NewDashboard(m.Page(schema.Ref{}, 0), m.Inputs, nil))
	hist, err := r.d.LoadHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	histJSON, _ := json.Marshal(hist)
	specs, _ := os.ReadFile(filepath.Join(r.dir, "sec.yaml"))
	for what, text := range map[string]string{
		"the spec": string(specs), "the plan's text": rep.Text(), "the plan's Markdown": strings.Join(rep.Markdown(0), ""), "the plan's JSON": string(repJSON),
		"the status": string(status), "the workspace's detail": string(detailJSON), "the dashboard": string(dash), "the history": string(histJSON),
		"berth's log": log.String(), "the Nomad job": jobJSON(t, r.c, ref),
	} {
		for _, v := range []string{"tok-0a9f", "service_account", "MIIE"} {
			if strings.Contains(text, v) {
				t.Errorf("%s holds a secret's value (%q)", what, v)
			}
		}
	}

	// 4. A changed value: sec (noop) keeps running untouched; sec-restart
	// restarts in place with the new value; berth applies nothing.
	a0, aR := liveAlloc(t, r.c, ref), liveAlloc(t, r.c, refR)
	putVar(t, r.c, "berth-real", "nomad/jobs/sec", api.VariableItems{"token": secretNewVal, "sa.json": secretFile})
	putVar(t, r.c, "berth-real", "nomad/jobs/sec-restart", api.VariableItems{"token": secretNewVal})
	start = time.Now()
	res := r.until(60*time.Second, "sec-restart restarted with the new value", func() bool {
		return strings.Contains(taskOutput(t, r.d, refR), "file=["+secretNewVal+"]")
	})
	realnomad.Report(t, "secrets: a changed value reaches a changeMode: restart task %.1fs after it is written", time.Since(start).Seconds())
	res = append(res, r.until(15*time.Second, "a while later", func() bool { return time.Since(start) > 15*time.Second })...)
	if n := countUpdates(res); n != 0 {
		t.Errorf("berth applied %d updates for a changed Variable", n)
	}
	for _, res := range res {
		if len(res.Applied) > 0 {
			t.Errorf("berth applied %v for a changed Variable", res.Applied)
		}
	}
	a1, aR1 := liveAlloc(t, r.c, ref), liveAlloc(t, r.c, refR)
	if a1.ID != a0.ID || a1.TaskStates[nomad.TaskName].Restarts != 0 {
		t.Errorf("sec (changeMode noop) was restarted: allocation %s → %s, %d restarts", a0.ID, a1.ID, a1.TaskStates[nomad.TaskName].Restarts)
	}
	if out := taskOutput(t, r.d, ref); strings.Count(out, "env=[") != 1 {
		t.Errorf("sec (changeMode noop) ran its command again:\n%s", out)
	}
	if aR1.ID != aR.ID || aR1.TaskStates[nomad.TaskName].Restarts != 1 {
		t.Errorf("sec-restart (changeMode restart): allocation %s → %s, %d restarts; want restarted once in place", aR.ID, aR1.ID, aR1.TaskStates[nomad.TaskName].Restarts)
	}
	for _, name := range []string{"sec", "sec-restart"} {
		if st := r.state(name); st.State != view.StateRunning {
			t.Errorf("%s is %s (%s) after its Variable changed", name, st.State, st.Reason)
		}
	}
	if strings.Contains(log.String(), secretNewVal) {
		t.Error("berth's log holds the new value")
	}
}

// jobJSON is ref's Nomad job as Nomad returns it.
func jobJSON(t *testing.T, c *api.Client, ref schema.Ref) string {
	t.Helper()
	j, _, err := c.Jobs().Info(ref.Name, &api.QueryOptions{Namespace: ref.Project})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(j)
	return string(b)
}

// TestRealSecretNeedsPolicy (issue 38, item 1; ACLs on): a secret at a
// path other than the job's own (ml/hf) is one the job may not read
// without a policy: the workspace is Starting with a reason that names
// the path and the policy, also once the Variable exists; once the policy
// examples/deploy ships is bound to the job with the command the reason
// gives, it runs with the value. Skipped on an agent without ACLs (make
// e2e with E2E_ACL=1 starts one with them).
func TestRealSecretNeedsPolicy(t *testing.T) {
	c := realnomad.Client(t)
	if _, _, err := c.ACLPolicies().List(nil); err != nil { // 400 "ACL support disabled"
		t.Skipf("the agent has no ACLs (E2E_ACL=1 starts one with them): %v", err)
	}
	bin := filepath.Join(os.Getenv("NOMAD_DEV_DIR"), "bin", "nomad")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("the kit's nomad binary (%s) applies the policy as the docs say: %v", bin, err)
	}
	var log logBuffer
	r := newLoggedLoop(t, &log)
	ref := schema.Ref{Project: "ml", Name: "train"}
	r.write("specs.yaml", `apiVersion: berth.dev/v1
kind: PriorityTier
metadata: {name: medium}
spec: {value: 50}
---
apiVersion: berth.dev/v1
kind: Project
metadata: {name: ml}
spec: {tier: medium}
---
`+secretWorkspace("ml", "train", `printf 'env=[%s]\n' "$HF_TOKEN"`, "{variable: ml/hf, key: token, env: HF_TOKEN}"))
	state := func() view.WorkspaceStatus { w, _ := r.loop.Workspace(ref); return w.Workspace }
	r.until(60*time.Second, "train waits for its Variable", func() bool { return state().ReasonKind == view.ReasonWaiting })
	putVar(t, r.c, "ml", "ml/hf", api.VariableItems{"token": secretValue})
	// The Variable exists; the job still may not read it.
	written := time.Now()
	r.until(20*time.Second, "some cycles later", func() bool { return time.Since(written) > 8*time.Second })
	st := state()
	for _, want := range []string{
		"Nomad Variable ml/hf (namespace ml) does not exist, or job train may not read it",
		"nomad acl policy apply -namespace ml -job train train-secrets FILE",
		`path "ml/hf" { capabilities = ["read"] }`,
		"examples/deploy/workspace-secrets.policy.hcl",
	} {
		if st.State != view.StateStarting || !strings.Contains(st.Reason, want) {
			t.Errorf("train is %s: %q\nwant Starting, with %q", st.State, st.Reason, want)
		}
	}
	if !strings.Contains(log.String(), "workspace waits to start: its task waits for its secrets: Nomad Variable ml/hf") {
		t.Errorf("berth's log does not say why train waits:\n%s", log.String())
	}

	// The shipped policy, bound to the job as the reason says.
	bindPolicy(t, c, bin, "ml", "train", "train-secrets", secretPolicy)
	start := time.Now()
	r.until(4*time.Minute, "train runs once its job may read ml/hf", func() bool { return state().State == view.StateRunning })
	realnomad.Report(t, "secrets: a workspace held for its Variable runs %.1fs after the policy is bound to its job", time.Since(start).Seconds())
	var out string
	r.until(20*time.Second, "train printed its secret", func() bool { out = taskOutput(t, r.d, ref); return strings.Contains(out, "env=[") })
	if w := "env=[" + secretValue + "]\n"; out != w {
		t.Errorf("train's task got %q, want %q", out, w)
	}
	if strings.Contains(log.String(), "tok-0a9f") {
		t.Error("berth's log holds the value")
	}
}
