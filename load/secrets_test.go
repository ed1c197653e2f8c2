package load

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-dev/berth/schema"
)

// secretsRepo is minimal with a workspace that takes three secrets; its
// secrets start at line 32 (the first one's variable).
const secretsRepo = minimal + `---
apiVersion: berth.dev/v1
kind: Workspace
metadata: {name: tune, project: ml}
spec:
  resources: {gpus: 1}
  task:
    image: pytorch/pytorch:2.3.0
    env: {HF_HOME: /data/hf}
    secrets:
    - variable: ml/hf
      key: token
      env: HF_TOKEN
    - variable: nomad/jobs/tune
      key: my-key
      file: gcloud/key.json
      changeMode: restart
    - variable: ml/wandb
      key: api_key
      env: WANDB_API_KEY
      changeMode: signal
      changeSignal: SIGHUP
`

// TestSecrets: each secret is read as written, in order, its change mode
// noop unless it says otherwise.
func TestSecrets(t *testing.T) {
	set, diags, err := FS(fstest.MapFS{"specs.yaml": {Data: []byte(secretsRepo)}}, ".")
	if err != nil || set == nil {
		t.Fatalf("FS: %v %v", err, diags)
	}
	if len(diags) > 0 {
		t.Errorf("diagnostics: %v", diags)
	}
	want := []schema.Secret{
		{Variable: "ml/hf", Key: "token", Env: "HF_TOKEN", ChangeMode: schema.SecretNoop},
		{Variable: "nomad/jobs/tune", Key: "my-key", File: "gcloud/key.json", ChangeMode: schema.SecretRestart},
		{Variable: "ml/wandb", Key: "api_key", Env: "WANDB_API_KEY", ChangeMode: schema.SecretSignal, ChangeSignal: "SIGHUP"},
	}
	w := set.Workspace(schema.Ref{Project: "ml", Name: "tune"})
	if diff := cmp.Diff(want, w.Spec.Task.Secrets); diff != "" {
		t.Errorf("secrets (-want +got):\n%s", diff)
	}
	if s := set.Workspace(schema.Ref{Project: "ml", Name: "train"}).Spec.Task.Secrets; s != nil {
		t.Errorf("a workspace without secrets has %#v, want nil", s)
	}
	for i, s := range []string{"ml/hf:token as $HF_TOKEN", "nomad/jobs/tune:my-key as secrets/gcloud/key.json, restart on change", "ml/wandb:api_key as $WANDB_API_KEY, SIGHUP on change"} {
		if got := w.Spec.Task.Secrets[i].String(); got != s {
			t.Errorf("secret %d reads %q, want %q", i, got, s)
		}
	}
}

// TestSecretErrors: each malformed reference is one error at its line,
// saying what to write instead.
func TestSecretErrors(t *testing.T) {
	tests := map[string]struct {
		edits []string // old, new pairs replaced in secretsRepo
		want  string   // the one diagnostic
	}{
		"path syntax": {edits: []string{"variable: ml/hf", "variable: ml/hf.token"},
			want: `specs.yaml:32:7: spec.task.secrets.0.variable: "ml/hf.token" is not valid: a Nomad Variable path is parts of letters, digits, '-', '_' and '~' separated by '/', such as ml/hf, at most 128 characters`},
		"empty part": {edits: []string{"variable: ml/hf", "variable: ml//hf"},
			want: `specs.yaml:32:7: spec.task.secrets.0.variable: "ml//hf" is not valid: a Nomad Variable path is parts of letters, digits, '-', '_' and '~' separated by '/', such as ml/hf, at most 128 characters`},
		"leading slash": {edits: []string{"variable: ml/hf", "variable: /ml/hf"},
			want: `specs.yaml:32:7: spec.task.secrets.0.variable: "/ml/hf" is not valid: a Nomad Variable path is parts of letters, digits, '-', '_' and '~' separated by '/', such as ml/hf, at most 128 characters`},
		"too long": {edits: []string{"variable: ml/hf", "variable: ml/" + strings.Repeat("x", 126)},
			want: `specs.yaml:32:7: spec.task.secrets.0.variable: "ml/` + strings.Repeat("x", 76) + `… (131 characters) is not valid: a Nomad Variable path is parts of letters, digits, '-', '_' and '~' separated by '/', such as ml/hf, at most 128 characters`},
		"nomad's own": {edits: []string{"variable: ml/hf", "variable: nomad/secrets"},
			want: `specs.yaml:32:7: spec.task.secrets.0.variable "nomad/secrets": Nomad keeps nomad/ for itself: a Variable there is at nomad/jobs or below (nomad/jobs/JOB is the job's own, which it reads without a policy) or at nomad/job-templates/NAME; use one of those, or a path of your own such as ml/hf`},
		"no path": {edits: []string{"    - variable: ml/hf\n      key: token", "    - key: token"},
			want: `specs.yaml:32:7: spec.task.secrets.0.variable is missing: a Nomad Variable path is parts of letters, digits, '-', '_' and '~' separated by '/', such as ml/hf, at most 128 characters`},
		"empty key": {edits: []string{"key: token", `key: ""`},
			want: `specs.yaml:33:7: spec.task.secrets.0.key: "" is not valid: key names an item of the Variable, such as token: text without control characters, at most 256 characters`},
		"no key": {edits: []string{"      key: token\n", ""},
			want: `specs.yaml:32:7: spec.task.secrets.0.key is missing: key names an item of the Variable, such as token: text without control characters, at most 256 characters`},
		"env and file": {edits: []string{"env: HF_TOKEN", "env: HF_TOKEN\n      file: hf-token"},
			want: `specs.yaml:35:7: spec.task.secrets.0 sets both env and file; give one: env: HF_TOKEN puts the value in an environment variable, file: hf-token writes it to a file under the task's secrets directory (list the secret twice for both)`},
		"neither": {edits: []string{"      env: HF_TOKEN\n", ""},
			want: `specs.yaml:32:7: spec.task.secrets.0 says where the value comes from but not where it goes: add env: NAME (an environment variable) or file: PATH (a file under the task's secrets directory)`},
		"bad env": {edits: []string{"env: HF_TOKEN", "env: HF-TOKEN"},
			want: `specs.yaml:34:7: spec.task.secrets.0.env: "HF-TOKEN" is not valid: an environment variable name uses letters, digits and '_' and does not start with a digit`},
		"escapes": {edits: []string{"file: gcloud/key.json", "file: ../local/key.json"},
			want: `specs.yaml:37:7: spec.task.secrets.1.file "../local/key.json" is not a plain path under the task's secrets directory: write it without . and .. parts, such as hf-token or gcloud/key.json`},
		"absolute": {edits: []string{"file: gcloud/key.json", "file: /etc/key.json"},
			want: `specs.yaml:37:7: spec.task.secrets.1.file: "/etc/key.json" is not valid: file is a relative path under the task's secrets directory, such as hf-token or gcloud/key.json: letters, digits, '.', '-' and '_' in parts separated by '/'`},
		"berth's own": {edits: []string{"file: gcloud/key.json", "file: .berth/env/X"},
			want: `specs.yaml:37:7: spec.task.secrets.1.file ".berth/env/X" is in .berth/, where berth writes the task's secret environment variables: choose another path`},
		"env twice": {edits: []string{"env: WANDB_API_KEY", "env: HF_TOKEN"},
			want: `specs.yaml:41:7: spec.task.secrets.0 and spec.task.secrets.2 both set environment variable HF_TOKEN; the task gets one value for it: remove one, or give one to another variable`},
		"env clash": {edits: []string{"env: {HF_HOME: /data/hf}", "env: {HF_HOME: /data/hf, HF_TOKEN: none}"},
			want: `specs.yaml:34:7: spec.task.secrets.0.env HF_TOKEN is also in spec.task.env; the task would get two values for it: remove spec.task.env.HF_TOKEN, or give the secret to another variable`},
		"file twice": {edits: []string{"env: WANDB_API_KEY", "file: gcloud/key.json"},
			want: `specs.yaml:41:7: spec.task.secrets.1 and spec.task.secrets.2 both write file gcloud/key.json; a file holds one value: give one another path`},
		"file in a file": {edits: []string{"env: WANDB_API_KEY", "file: gcloud/key.json/x"},
			want: `specs.yaml:41:7: spec.task.secrets.2.file gcloud/key.json/x is under spec.task.secrets.1.file gcloud/key.json, which is a file, not a directory: give one another path`},
		"signal without a signal": {edits: []string{"      changeSignal: SIGHUP\n", ""},
			want: `specs.yaml:42:7: spec.task.secrets.2.changeMode is signal but names no signal; add changeSignal, such as SIGHUP`},
		"signal without signal mode": {edits: []string{"changeMode: signal", "changeMode: restart"},
			want: `specs.yaml:43:7: spec.task.secrets.2.changeSignal is set but changeMode is restart; write changeMode: signal to send SIGHUP when the value changes, or leave changeSignal out`},
		"signal alone": {edits: []string{"      changeMode: signal\n", ""},
			want: `specs.yaml:42:7: spec.task.secrets.2.changeSignal is set but changeMode is not signal; add changeMode: signal to send SIGHUP when the value changes, or leave changeSignal out`},
		"bad mode": {edits: []string{"changeMode: restart", "changeMode: reload"},
			want: `specs.yaml:38:7: spec.task.secrets.1.changeMode: "reload" is not allowed; use one of "noop", "restart", "signal"`},
		"bad signal": {edits: []string{"changeSignal: SIGHUP", "changeSignal: SIGKILL"},
			want: `specs.yaml:43:7: spec.task.secrets.2.changeSignal: "SIGKILL" is not valid: use SIGHUP, SIGUSR1, SIGUSR2, SIGINT, SIGTERM or SIGQUIT`},
		"unknown field": {edits: []string{"key: token", "key: token\n      value: hf_abc"},
			want: `specs.yaml:34:7: unknown field "value" in spec.task.secrets.0 of a Workspace; allowed fields are changeMode, changeSignal, env, file, key, variable`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			src := secretsRepo
			for i := 0; i < len(tt.edits); i += 2 {
				if !strings.Contains(src, tt.edits[i]) {
					t.Fatalf("%q is not in the repo", tt.edits[i])
				}
				src = strings.Replace(src, tt.edits[i], tt.edits[i+1], 1)
			}
			_, diags, err := FS(fstest.MapFS{"specs.yaml": {Data: []byte(src)}}, ".")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range diags {
				got = append(got, d.String())
			}
			if diff := cmp.Diff([]string{tt.want}, got); diff != "" {
				t.Errorf("diagnostics (-want +got):\n%s", diff)
			}
		})
	}
}
