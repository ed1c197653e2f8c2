package drivers

import (
	"testing"
	"time"

	"github.com/berth-dev/berth/schema"
)

// TestFingerprintUnchangedByKinds: a workspace that names a gpuModel and
// no kind fingerprints as it did before GPU kinds (the value computed at
// df8e861), so upgrading berth restarts nothing; asking for a kind is a
// change of what the task gets.
func TestFingerprintUnchangedByKinds(t *testing.T) {
	w := schema.WorkspaceSpec{
		Task:       schema.Task{Driver: "docker", Image: "pytorch:2.4", Args: []string{"train.py"}},
		Resources:  schema.WorkResources{GPUs: 2, GPUModel: "NVIDIA H100 80GB HBM3", CPUMHz: 4000, MemoryBytes: 16 << 30, DiskBytes: 300 << 20},
		Replicas:   1,
		Checkpoint: schema.Checkpoint{Signal: "SIGTERM", GracePeriod: 30 * time.Second},
	}
	if got := Fingerprint(&w); got != "d7fec908f48b04d1" {
		t.Errorf("fingerprint %s, want d7fec908f48b04d1 as before GPU kinds: every running workspace would restart on upgrade", got)
	}
	k := w
	k.Resources.GPUModel, k.Resources.GPUKind = "", "h100"
	if Fingerprint(&k) == Fingerprint(&w) {
		t.Error("asking for a kind instead of a model leaves the fingerprint as it was")
	}
}

// TestFingerprintUnchangedBySecrets: a workspace without secrets (its
// env in the spec) fingerprints as it did before secrets (the value
// computed at 2a2dbab), so upgrading berth restarts nothing; adding a
// secret, or changing where it comes from, where it goes or what a change
// does, is a change of what the task gets.
func TestFingerprintUnchangedBySecrets(t *testing.T) {
	w := schema.WorkspaceSpec{
		Task:       schema.Task{Driver: "docker", Image: "pytorch:2.4", Args: []string{"train.py"}, Env: map[string]string{"HF_HOME": "/data/hf"}},
		Resources:  schema.WorkResources{GPUs: 1, CPUMHz: 4000, MemoryBytes: 16 << 30, DiskBytes: 300 << 20},
		Replicas:   1,
		Checkpoint: schema.Checkpoint{Signal: "SIGTERM", GracePeriod: 30 * time.Second},
	}
	if got := Fingerprint(&w); got != "eaf54b1b994c16e1" {
		t.Errorf("fingerprint %s, want eaf54b1b994c16e1 as before secrets: every running workspace would restart on upgrade", got)
	}
	empty := w
	empty.Task.Secrets = []schema.Secret{}
	if Fingerprint(&empty) != Fingerprint(&w) {
		t.Error("an empty list of secrets changes the fingerprint")
	}
	hf := schema.Secret{Variable: "ml/hf", Key: "token", Env: "HF_TOKEN", ChangeMode: schema.SecretNoop}
	with := func(s schema.Secret) string {
		x := w
		x.Task.Secrets = []schema.Secret{s}
		return Fingerprint(&x)
	}
	seen := map[string]string{"none": Fingerprint(&w)}
	for name, s := range map[string]schema.Secret{
		"env":      hf,
		"path":     {Variable: "ml/wandb", Key: "token", Env: "HF_TOKEN", ChangeMode: schema.SecretNoop},
		"key":      {Variable: "ml/hf", Key: "read", Env: "HF_TOKEN", ChangeMode: schema.SecretNoop},
		"file":     {Variable: "ml/hf", Key: "token", File: "hf-token", ChangeMode: schema.SecretNoop},
		"restart":  {Variable: "ml/hf", Key: "token", Env: "HF_TOKEN", ChangeMode: schema.SecretRestart},
		"signal":   {Variable: "ml/hf", Key: "token", Env: "HF_TOKEN", ChangeMode: schema.SecretSignal, ChangeSignal: "SIGHUP"},
		"signal 2": {Variable: "ml/hf", Key: "token", Env: "HF_TOKEN", ChangeMode: schema.SecretSignal, ChangeSignal: "SIGUSR1"},
	} {
		fp := with(s)
		for other, o := range seen {
			if o == fp {
				t.Errorf("secrets %s and %s fingerprint alike (%s)", name, other, fp)
			}
		}
		seen[name] = fp
	}
}
