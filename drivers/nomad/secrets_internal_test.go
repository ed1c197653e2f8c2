package nomad

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad/api"
)

// varItems stands for consul-template's NomadVarItems, what nomadVar
// gives a template: a Variable's items by key, with its methods (a key
// named like one, read as .Keys, would be the method).
type varItems map[string]varItem

type varItem struct{ Key, Value string }

func (i varItem) String() string { return i.Value }

func (v varItems) Keys() []string { return []string{"the method"} }

func (v varItems) ItemsMap() map[string]any {
	out := map[string]any{}
	for k, i := range v {
		out[k] = i.Value
	}
	return out
}

// execTemplate evaluates tmpl as the Nomad client would, with the
// functions it uses standing in for consul-template's and sprig's, over
// the Variables vars (path → key → value).
func execTemplate(tmpl string, vars map[string]map[string]string) (string, error) {
	funcs := template.FuncMap{
		"nomadVar": func(path string) varItems {
			out := varItems{}
			for k, v := range vars[path] {
				out[k] = varItem{Key: k, Value: v}
			}
			return out
		},
		"sprig_hasKey": func(m map[string]any, k string) bool { _, ok := m[k]; return ok },
		"sprig_fail":   func(msg string) (string, error) { return "", fmt.Errorf("%s", msg) },
		"toJSON": func(v any) (string, error) {
			b, err := json.Marshal(v)
			return string(b), err
		},
	}
	t, err := template.New("").Funcs(funcs).Parse(tmpl)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	err = t.Execute(&b, nil)
	return b.String(), err
}

// TestSecretTemplates: each secret is a template reading its Variable
// with nomadVar, an env one rendering NAME="value" with the value
// JSON-quoted (every character comes back, quotes and newlines too), a
// file one the value as it is; keys that are no Go identifier, or that
// name a method of the items, are read by index; a key the Variable
// lacks fails the template, naming the path and key; change_mode is
// always written (Nomad's default is restart).
func TestSecretTemplates(t *testing.T) {
	value := "s3cr\"et\nline2 <&> {{ .x }} \\ é"
	vars := map[string]map[string]string{"ml/hf": {"token": value, "my-key": "dash", "Keys": "k", `a"b}}`: "q"}}
	ss := []schema.Secret{
		{Variable: "ml/hf", Key: "token", Env: "HF_TOKEN"},
		{Variable: "ml/hf", Key: "my-key", File: "gcloud/key.json", ChangeMode: schema.SecretRestart},
		{Variable: "ml/hf", Key: "Keys", File: "keys", ChangeMode: schema.SecretSignal, ChangeSignal: "SIGHUP"},
		{Variable: "ml/hf", Key: `a"b}}`, Env: "Q", ChangeMode: schema.SecretNoop},
	}
	got := secretTemplates(ss)
	type fields struct {
		Dest, ChangeMode, ChangeSignal string
		Env                            bool
	}
	var gotFields []fields
	for _, tm := range got {
		gotFields = append(gotFields, fields{deref(tm.DestPath), deref(tm.ChangeMode), deref(tm.ChangeSignal), tm.Envvars != nil && *tm.Envvars})
	}
	want := []fields{
		{"secrets/.berth/env/HF_TOKEN", "noop", "", true},
		{"secrets/gcloud/key.json", "restart", "", false},
		{"secrets/keys", "signal", "SIGHUP", false},
		{"secrets/.berth/env/Q", "noop", "", true},
	}
	if diff := cmp.Diff(want, gotFields); diff != "" {
		t.Errorf("templates (-want +got):\n%s", diff)
	}
	rendered := make([]string, len(got))
	for i, tm := range got {
		out, err := execTemplate(deref(tm.EmbeddedTmpl), vars)
		if err != nil {
			t.Fatalf("template %d: %v\n%s", i, err, deref(tm.EmbeddedTmpl))
		}
		rendered[i] = out
		if strings.Contains(deref(tm.EmbeddedTmpl), "s3cr") {
			t.Errorf("template %d holds the value: %s", i, deref(tm.EmbeddedTmpl))
		}
	}
	envValue := func(line, name string) string {
		t.Helper()
		q, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), name+"=")
		var v string
		if !ok || json.Unmarshal([]byte(q), &v) != nil || strings.Count(line, "\n") != 1 {
			t.Fatalf("env template rendered %q, want one line %s=\"JSON string\"", line, name)
		}
		return v
	}
	if v := envValue(rendered[0], "HF_TOKEN"); v != value {
		t.Errorf("HF_TOKEN reads back %q, want %q", v, value)
	}
	if rendered[1] != "dash" || rendered[2] != "k" {
		t.Errorf("files rendered %q and %q, want dash and k", rendered[1], rendered[2])
	}
	if v := envValue(rendered[3], "Q"); v != "q" {
		t.Errorf("Q reads back %q, want q", v)
	}

	// A key the Variable lacks.
	_, err := execTemplate(deref(secretTemplates([]schema.Secret{{Variable: "ml/hf", Key: "tokn", Env: "HF_TOKEN"}})[0].EmbeddedTmpl), vars)
	if err == nil || !strings.Contains(err.Error(), `berth: Nomad Variable ml/hf has no key "tokn"`) {
		t.Errorf("a missing key: %v; want the template to fail naming the path and key", err)
	}
	if secretTemplates(nil) != nil {
		t.Error("no secrets render templates")
	}
}

// TestJobHashUnchangedWithoutSecrets: a job without secrets hashes as it
// did before them (the value computed at 2a2dbab), so upgrading berth
// reports no drift on the jobs it runs; a secret, and a change to one,
// change it.
func TestJobHashUnchangedWithoutSecrets(t *testing.T) {
	ws := &schema.Workspace{
		Meta: schema.Meta{Name: "train", Project: "ml"},
		Spec: schema.WorkspaceSpec{
			Task:       schema.Task{Driver: "docker", Image: "pytorch:2.4", Args: []string{"train.py"}, Env: map[string]string{"HF_HOME": "/data/hf"}},
			Resources:  schema.WorkResources{GPUs: 1, CPUMHz: 4000, MemoryBytes: 16 << 30, DiskBytes: 300 << 20},
			Replicas:   1,
			Checkpoint: schema.Checkpoint{Signal: "SIGTERM", GracePeriod: 30 * time.Second},
		},
	}
	render := func(ss ...schema.Secret) *api.Job {
		t.Helper()
		w := *ws
		w.Spec.Task.Secrets = ss
		a := drivers.Action{Kind: drivers.ActionStart, Workspace: w.Ref(), Spec: &w, Revision: "r1",
			Project: &schema.Project{Meta: schema.Meta{Name: "ml"}}, Tier: &schema.PriorityTier{Meta: schema.Meta{Name: "low"}, Spec: schema.TierSpec{Value: 20}}}
		j, err := renderJob(a, "ml", []placed{{Placement: drivers.Placement{Node: "gpu-a", GPUs: []string{"GPU-1"}}, NodeID: "node-id-a"}}, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	plain := render()
	if got := plain.Meta[MetaJobHash]; got != "fd7cdd43e51de09b" {
		t.Errorf("job hash %s, want fd7cdd43e51de09b as before secrets: every job would show as drifted on upgrade", got)
	}
	if n := len(plain.TaskGroups[0].Tasks[0].Templates); n != 0 {
		t.Errorf("a task without secrets has %d templates", n)
	}
	hf := schema.Secret{Variable: "ml/hf", Key: "token", Env: "HF_TOKEN", ChangeMode: schema.SecretNoop}
	with := render(hf).Meta[MetaJobHash]
	restart := hf
	restart.ChangeMode = schema.SecretRestart
	if with == plain.Meta[MetaJobHash] || render(restart).Meta[MetaJobHash] == with {
		t.Error("a secret, or its change mode, leaves the job hash as it was: an edit of the job's templates outside berth would go unseen")
	}
}

// TestWaitingOf: only a task whose last event is a template's "Missing:"
// is waiting; each Variable named, the paths Nomad grants the task
// itself as missing only, the others with the policy, and what Nomad
// left out counted.
func TestWaitingOf(t *testing.T) {
	alloc := func(events ...*api.TaskEvent) *api.Allocation {
		return &api.Allocation{JobID: "train", Namespace: "ml", TaskGroup: "replica-1",
			TaskStates: map[string]*api.TaskState{TaskName: {State: "pending", Events: events}}}
	}
	received := &api.TaskEvent{Type: "Received", DisplayMessage: "Task received by client"}
	missing := func(msg string) *api.TaskEvent {
		return &api.TaskEvent{Type: "Template", DisplayMessage: "Missing: " + msg}
	}
	policy := func(path string) string {
		return "Nomad Variable " + path + " (namespace ml) does not exist, or job train may not read it: write it (nomad var put -namespace ml " + path +
			` KEY=VALUE), or bind the job a policy that reads it (nomad acl policy apply -namespace ml -job train train-secrets FILE, FILE granting namespace "ml" { variables { path "` + path +
			`" { capabilities = ["read"] } } }, as examples/deploy/workspace-secrets.policy.hcl does)`
	}
	own := func(path string) string {
		return "Nomad Variable " + path + " (namespace ml) does not exist: write it (nomad var put -namespace ml " + path + " KEY=VALUE)"
	}
	for name, tt := range map[string]struct {
		a    *api.Allocation
		want string
	}{
		"no task state": {&api.Allocation{JobID: "train"}, ""},
		"received":      {alloc(received), ""},
		"another path":  {alloc(received, missing("nomad.var.block(ml/hf@ml.global)")), "its task waits for its secrets: " + policy("ml/hf")},
		"own paths": {alloc(received, missing("nomad.var.block(nomad/jobs/train/replica-1/main@ml.global), nomad.var.block(nomad/jobs/train@ml.global), nomad.var.block(nomad/jobs/train/x@ml.global)")),
			"its task waits for its secrets: " + own("nomad/jobs/train/replica-1/main") + "; " + own("nomad/jobs/train") + "; " + policy("nomad/jobs/train/x")},
		"another group's": {alloc(received, missing("nomad.var.block(nomad/jobs/train/replica-0@ml.global)")), "its task waits for its secrets: " + policy("nomad/jobs/train/replica-0")},
		"and more": {alloc(received, missing("nomad.var.block(a@ml.global), nomad.var.block(b@ml.global), nomad.var.block(c@ml.global), and 2 more")),
			"its task waits for its secrets: " + policy("a") + "; " + policy("b") + "; " + policy("c") + "; and 2 more Variables"},
		"no variable":   {alloc(received, missing("kv.block(x)")), "Nomad holds its task: its template is missing kv.block(x)"},
		"started since": {alloc(received, missing("nomad.var.block(ml/hf@ml.global)"), &api.TaskEvent{Type: "Started"}), ""},
	} {
		if got := waitingOf(tt.a); got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", name, got, tt.want)
		}
	}
}
