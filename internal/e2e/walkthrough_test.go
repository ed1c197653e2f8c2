package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/drivers/nomad/gpumeta"
	"github.com/berth-dev/berth/drivers/nomad/nomadfake"
	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/berth-dev/berth/reconcile"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/source"
	"github.com/berth-dev/berth/view"
	"github.com/hashicorp/nomad/api"
)

const example = "../../examples/walkthrough"

// TestWalkthroughOnFakeNomad plays the seed walk-through through the real
// loop and the Nomad driver against the fake Nomad: medium starts; high
// arrives and preempts it (deregistered without purge, its GPU freed
// before high is registered); high stops and medium resumes; a restarted
// berth with no local state decides the same.
func TestWalkthroughOnFakeNomad(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"tiers.yaml", "projects.yaml", "volume.yaml"} {
		b, err := os.ReadFile(filepath.Join(example, f))
		if err != nil {
			t.Fatal(err)
		}
		write(t, dir, f, string(b))
	}
	b, err := os.ReadFile(filepath.Join(example, "workspaces.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(b), "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("workspaces.yaml: %d documents", len(docs))
	}
	medDoc, highDoc := docs[0]+"\n", docs[1]
	write(t, dir, "medium.yaml", medDoc)

	fake := nomadfake.New()
	const gpu = "GPU-8a1f6c2e-0000-4000-8000-000000000000"
	fake.AddNode(nomadfake.Node{
		ID: "9d2c4e1a-0000-4000-8000-000000000001", Name: "gpu-node", MemoryMB: 262144,
		HostVolumes: []string{"ml-training-vol"}, // the walk-through's Volume
		GPUs:        []nomadfake.GPU{{ID: gpu, PCIBusID: "00000000:18:00.0", Healthy: true}},
		Meta:        gpumeta.Encode([]gpumeta.GPU{{Index: 0, UUID: gpu, PCIBusID: "00000000:18:00.0", Model: "H100"}}),
	})
	url := fake.Start(t).URL
	newLoop := func() *reconcile.Loop {
		d := realnomad.NewDriver(t, nomad.Config{Address: url, PlacementTimeout: 1e9})
		l, err := reconcile.New(reconcile.Config{Source: source.DirSource{Dir: dir}, Cluster: d, Store: d, ClusterName: "nomad " + url})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	loop := newLoop()
	once := func(step string) reconcile.Result {
		t.Helper()
		res, err := loop.Once(ctx)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		return res
	}
	medium := schema.Ref{Project: "medium-priority-project", Name: "medium-training"}
	high := schema.Ref{Project: "high-priority-project", Name: "high-training"}
	job := func(ref schema.Ref) *api.Job {
		j, err := api.NewClient(&api.Config{Address: url})
		if err != nil {
			t.Fatal(err)
		}
		out, _, err := j.Jobs().Info(ref.Name, &api.QueryOptions{Namespace: ref.Project})
		if err != nil {
			t.Fatalf("job %s: %v", ref, err)
		}
		return out
	}
	kinds := func(res reconcile.Result) string {
		var out []string
		for _, a := range res.Applied {
			out = append(out, a.Kind.String()+" "+a.Workspace.Name)
		}
		return strings.Join(out, ", ")
	}

	// 1. medium starts, pinned to the only GPU, priority from its tier.
	if got := kinds(once("start medium")); got != "start medium-training" {
		t.Fatalf("applied %q, want start medium-training", got)
	}
	fake.Settle()
	once("medium running")
	m := job(medium)
	if *m.Priority != 50 || m.Meta[nomad.MetaGPUs] != gpu || *m.Stop {
		t.Errorf("medium job: priority %d, gpus %q, stop %v", *m.Priority, m.Meta[nomad.MetaGPUs], *m.Stop)
	}

	// 2. high arrives: medium is preempted first; high waits for the GPU.
	write(t, dir, "high.yaml", highDoc)
	res := once("high arrives")
	if got := kinds(res); got != "preempt medium-training" {
		t.Fatalf("applied %q, want preempt medium-training (high deferred)", got)
	}
	if !*job(medium).Stop {
		t.Fatalf("medium was not deregistered")
	}
	if allocs := fake.AllocsOf("medium-priority-project", "medium-training"); len(allocs) != 1 || allocs[0].DesiredStatus != "stop" || allocs[0].ClientStatus != "running" {
		t.Fatalf("medium should be stopping with its grace: %+v", allocs)
	}
	once("medium still stopping") // high must not be registered while the GPU is held
	fake.Settle()
	if got := kinds(once("GPU free")); got != "start high-training" {
		t.Fatalf("applied %q, want start high-training", got)
	}
	h := job(high)
	if *h.Priority != 80 || h.Meta[nomad.MetaGPUs] != gpu {
		t.Errorf("high job: priority %d, gpus %q", *h.Priority, h.Meta[nomad.MetaGPUs])
	}
	fake.Settle()
	once("high running")
	st := loop.Status()
	if s := wsState(st, medium); s != view.StatePreempted {
		t.Errorf("medium is %s while high runs, want Preempted", s)
	}

	// 3. high stops; medium resumes with no edit of its own.
	write(t, dir, "high.yaml", strings.Replace(highDoc, "state: Running", "state: Stopped", 1))
	if got := kinds(once("stop high")); !strings.HasPrefix(got, "stop high-training") {
		t.Fatalf("applied %q, want stop high-training first", got)
	}
	fake.Settle()
	once("medium resumes")
	fake.Settle()
	once("medium running again")
	if s := wsState(loop.Status(), medium); s != view.StateRunning {
		t.Errorf("medium is %s, want Running", s)
	}
	if *job(medium).Stop {
		t.Errorf("medium's job is still stopped")
	}

	// 4. berth restarts with no local state: the history is in Nomad
	// Variables and the plan is empty.
	loop = newLoop()
	if res := once("restarted"); !res.Plan.Empty() {
		t.Errorf("a restarted berth plans %v", res.Plan.Actions)
	}
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func wsState(st view.Status, ref schema.Ref) view.State {
	for _, w := range st.Workspaces {
		if w.Project == ref.Project && w.Name == ref.Name {
			return w.State
		}
	}
	return ""
}
