package nomad_test

import (
	"strings"
	"testing"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/drivertest"
	"github.com/berth-dev/berth/schema"
	"github.com/hashicorp/nomad/api"
)

// TestSecretsRenderedAndWaitedFor: a workspace's secrets become its
// task's templates, reading their Variables in the job's namespace, and
// the job holds no value; while a Variable is missing the allocation is
// starting, with a reason naming the path (the job's own path: write it;
// another: write it or bind the job a policy that reads it); once the
// Variables exist it runs, and the reason is gone. The job reads back
// as registered: no drift.
func TestSecretsRenderedAndWaitedFor(t *testing.T) {
	fake, d := fakeCluster(t, drivertest.Nodes())
	snap, err := d.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a := startAction("train", snap.Nodes[0].Name, snap.Nodes[0].GPUs[0].ID)
	a.Spec.Spec.Task.Secrets = []schema.Secret{
		{Variable: "ml/hf", Key: "token", Env: "HF_TOKEN", ChangeMode: schema.SecretNoop},
		{Variable: "nomad/jobs/train", Key: "key.json", File: "gcloud/key.json", ChangeMode: schema.SecretRestart},
	}
	if err := d.Apply(ctx, a); err != nil {
		t.Fatal(err)
	}
	task := jobOf(t, d, "vision", "train").TaskGroups[0].Tasks[0]
	if len(task.Templates) != 2 || *task.Templates[0].DestPath != "secrets/.berth/env/HF_TOKEN" || !*task.Templates[0].Envvars ||
		*task.Templates[1].DestPath != "secrets/gcloud/key.json" || *task.Templates[1].ChangeMode != "restart" {
		t.Fatalf("templates %+v", task.Templates)
	}
	if !strings.Contains(*task.Templates[0].EmbeddedTmpl, `nomadVar "ml/hf"`) {
		t.Errorf("the env template reads %q", *task.Templates[0].EmbeddedTmpl)
	}

	fake.Settle()
	alloc := func() drivers.Alloc {
		t.Helper()
		snap, err := d.Observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		al := drivers.AllocsOf(snap.Allocs, a.Workspace)
		if len(al) != 1 {
			t.Fatalf("allocations %+v", snap.Allocs)
		}
		return al[0]
	}
	got := alloc()
	if got.Phase != drivers.AllocStarting || got.Drift != "" {
		t.Fatalf("with its Variables missing: phase %s, drift %q", got.Phase, got.Drift)
	}
	for _, want := range []string{
		"its task waits for its secrets: Nomad Variable ml/hf (namespace vision) does not exist, or job train may not read it: write it (nomad var put -namespace vision ml/hf KEY=VALUE), or bind the job a policy that reads it (nomad acl policy apply -namespace vision -job train train-secrets FILE",
		`path "ml/hf" { capabilities = ["read"] }`,
		"; Nomad Variable nomad/jobs/train (namespace vision) does not exist: write it (nomad var put -namespace vision nomad/jobs/train KEY=VALUE)",
	} {
		if !strings.Contains(got.Waiting, want) {
			t.Errorf("waiting reason %q\nwant it to hold %q", got.Waiting, want)
		}
	}

	for _, path := range []string{"ml/hf", "nomad/jobs/train"} {
		if _, _, err := d.Client().Variables().Create(&api.Variable{Path: path, Items: api.VariableItems{"token": "x", "key.json": "{}"}}, &api.WriteOptions{Namespace: "vision"}); err != nil {
			t.Fatal(err)
		}
	}
	fake.Settle()
	if got := alloc(); got.Phase != drivers.AllocRunning || got.Waiting != "" {
		t.Errorf("with its Variables written: phase %s, waiting %q", got.Phase, got.Waiting)
	}
}
