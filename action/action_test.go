// Package action_test runs the steps of berth's GitHub Action (action.yml
// at the repository's root, the scripts in this folder) on an example spec
// repository, as a pull request's workflow would.
package action_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// action is the part of action.yml the test reads.
type action struct {
	Runs struct {
		Using string `json:"using"`
		Steps []struct {
			Name string            `json:"name"`
			Uses string            `json:"uses"`
			Run  string            `json:"run"`
			If   string            `json:"if"`
			Env  map[string]string `json:"env"`
			With map[string]string `json:"with"`
		} `json:"steps"`
	} `json:"runs"`
}

// TestActionSteps reads action.yml, checks that each step runs a script
// of this folder with the environment the script reads, and runs them
// (install aside: the test builds berth from this tree) on a pull
// request of examples/plan-pr: the base committed as main, the change on
// top. Validate passes, then fails with an annotation on a broken spec;
// the plan, against a snapshot file and one fetched by URL, is Markdown
// with exit code 2 in GITHUB_OUTPUT and in the job's summary.
func TestActionSteps(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var a action
	if err := yaml.Unmarshal(b, &a); err != nil {
		t.Fatalf("action.yml: %v", err)
	}
	if a.Runs.Using != "composite" {
		t.Fatalf("action.yml runs %q, want composite", a.Runs.Using)
	}
	scripts := map[string]map[string]string{} // script → the env its step gives it
	script := regexp.MustCompile(`^"\$GITHUB_ACTION_PATH/action/([a-z]+\.sh)"$`)
	for _, s := range a.Runs.Steps {
		if s.Run == "" {
			continue
		}
		m := script.FindStringSubmatch(s.Run)
		if m == nil {
			t.Fatalf("step %q runs %q: a step runs one script of action/, so that this test runs what the action runs", s.Name, s.Run)
		}
		if _, err := os.Stat(filepath.Join(root, "action", m[1])); err != nil {
			t.Fatalf("step %q: %v", s.Name, err)
		}
		scripts[m[1]] = s.Env
	}
	for name, env := range map[string][]string{
		"install.sh":  {"BERTH_VERSION"},
		"validate.sh": {"BERTH_SPECS", "BERTH_STRICT"},
		"plan.sh":     {"BERTH_SPECS", "BERTH_CLUSTER", "BERTH_BASE"},
	} {
		for _, k := range env {
			if _, ok := scripts[name][k]; !ok {
				t.Errorf("action.yml gives %s no %s", name, k)
			}
		}
	}

	// berth from this tree, and the pull request of examples/plan-pr.
	tmp := t.TempDir()
	berth := filepath.Join(tmp, "berth")
	run(t, root, nil, "go", "build", "-o", berth, "./cmd/berth")
	repo := filepath.Join(tmp, "repo")
	example := filepath.Join(root, "examples", "plan-pr")
	copyYAML(t, filepath.Join(example, "base"), filepath.Join(repo, "specs"))
	git := []string{"-c", "user.name=berth", "-c", "user.email=berth@example.invalid"}
	run(t, repo, nil, "git", "init", "-q", "-b", "main")
	run(t, repo, nil, "git", "add", "specs")
	run(t, repo, nil, "git", append(git, "commit", "-q", "-m", "base")...)
	copyYAML(t, filepath.Join(example, "change"), filepath.Join(repo, "specs"))
	snap, err := os.ReadFile(filepath.Join(example, "snap.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "snap.json"), snap, 0o644); err != nil {
		t.Fatal(err)
	}
	step := func(name string, env ...string) (string, error) {
		cmd := exec.Command(filepath.Join(root, "action", name))
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), append([]string{"BERTH=" + berth, "BERTH_SPECS=specs", "RUNNER_TEMP=" + tmp}, env...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	if out, err := step("validate.sh", "BERTH_STRICT=false"); err != nil {
		t.Fatalf("validate.sh on the example: %v\n%s", err, out)
	}
	// A broken spec: exit 1 and an annotation at the file and line.
	broken := filepath.Join(repo, "specs", "zz-broken.yaml")
	if err := os.WriteFile(broken, []byte("apiVersion: berth.dev/v1\nkind: Workspace\nmetadata: {name: x, project: research}\nspec:\n  task: {image: x}\n  resources: {gpus: -1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := step("validate.sh", "BERTH_STRICT=false")
	if code := exitCode(err); code != 1 || !strings.Contains(out, "::error file=specs/zz-broken.yaml,line=6") {
		t.Errorf("validate.sh on a broken spec: exit %d, want 1 with an annotation at specs/zz-broken.yaml line 6:\n%s", code, out)
	}
	os.Remove(broken)

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(snap) }))
	defer srv.Close()
	for _, cluster := range []string{"snapshot:" + filepath.Join(tmp, "snap.json"), srv.URL + "/snap.json"} {
		output, summary := filepath.Join(tmp, "output"), filepath.Join(tmp, "summary")
		os.Remove(output)
		os.Remove(summary)
		out, err := step("plan.sh", "BERTH_CLUSTER="+cluster, "BERTH_BASE=main", "GITHUB_OUTPUT="+output, "GITHUB_STEP_SUMMARY="+summary)
		if err != nil {
			t.Fatalf("plan.sh against %s: %v\n%s", cluster, err, out)
		}
		got, _ := os.ReadFile(output)
		if string(got) != "exitcode=2\n" {
			t.Errorf("plan.sh against %s: GITHUB_OUTPUT %q, want exitcode=2 (changes)", cluster, got)
		}
		plan, _ := os.ReadFile(filepath.Join(repo, "plan.md"))
		sum, _ := os.ReadFile(summary)
		if !strings.Contains(string(plan), "research") || string(sum) != string(plan) {
			t.Errorf("plan.sh against %s: plan.md\n%s\nsummary\n%s", cluster, plan, sum)
		}
	}
	// A cluster it cannot read fails the step, and says so.
	out, err = step("plan.sh", "BERTH_CLUSTER=snapshot:"+filepath.Join(tmp, "none.json"), "BERTH_BASE=main", "GITHUB_OUTPUT="+filepath.Join(tmp, "output"))
	if exitCode(err) != 1 {
		t.Errorf("plan.sh against a missing snapshot: exit %d, want 1\n%s", exitCode(err), out)
	}
}

// TestActionComment runs the comment step's script under Node, as
// actions/github-script does, with a fake GitHub client: the plan
// comments of earlier pushes go, each part of the plan is a comment of
// its own, and other comments stay.
func TestActionComment(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node here: the comment step runs under actions/github-script (.ci/run installs nodejs)")
	}
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan.md")
	if err := os.WriteFile(plan, []byte("part one\n<!-- berth plan: next comment -->\npart two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	js := `
const comment = require(process.argv[1]);
const calls = [];
const github = {
  paginate: async (fn, args) => { calls.push('list ' + args.issue_number); return [
    { id: 1, body: '<!-- berth plan comment -->\nold plan' },
    { id: 2, body: 'a reviewer writes' }]; },
  rest: { issues: {
    listComments: () => {},
    deleteComment: async (a) => calls.push('delete ' + a.comment_id),
    createComment: async (a) => calls.push('create ' + a.owner + '/' + a.repo + '#' + a.issue_number + ' ' + JSON.stringify(a.body)),
  } },
};
const context = { repo: { owner: 'o', repo: 'specs' }, issue: { number: 7 } };
comment({ github, context, file: process.argv[2] }).then(() => console.log(calls.join('\n')));
`
	cmd := exec.Command(node, "-e", js, filepath.Join(mustAbs(t, "comment.js")), plan)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	want := `list 7
delete 1
create o/specs#7 "<!-- berth plan comment -->\npart one"
create o/specs#7 "<!-- berth plan comment -->\npart two\n"
`
	if string(out) != want {
		t.Errorf("calls:\n%s\nwant:\n%s", out, want)
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func run(t *testing.T, dir string, env []string, name string, args ...string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

func copyYAML(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(from, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: no YAML (%v)", from, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if e, ok := err.(*exec.ExitError); ok {
		return e.ExitCode()
	}
	return -1
}
