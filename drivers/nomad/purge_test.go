package nomad_test

import (
	"testing"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
	"github.com/hashicorp/nomad/api"
)

// Purge removes a job berth stopped; a running job is refused, and a job
// already gone is nothing to do.
func TestPurgeOnlyStoppedJobs(t *testing.T) {
	h, d, nodes := newHooked(t)
	if err := d.Apply(ctx, startAction("train", "gpu-a", nodes[0].GPUs[0].ID)); err != nil {
		t.Fatal(err)
	}
	ref := schema.Ref{Project: "vision", Name: "train"}
	purge := drivers.Action{Kind: drivers.ActionPurge, Workspace: ref}
	if err := d.Apply(ctx, purge); err == nil {
		t.Fatal("purged a running job")
	}
	if err := d.Apply(ctx, drivers.Action{Kind: drivers.ActionStop, Workspace: ref, Project: project}); err != nil {
		t.Fatal(err)
	}
	h.Settle()
	if j := jobOf(t, d, "vision", "train"); j.Stop == nil || !*j.Stop {
		t.Fatalf("not stopped: %+v", j.Stop)
	}
	if err := d.Apply(ctx, purge); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Client().Jobs().Info("train", &api.QueryOptions{Namespace: "vision"}); err == nil {
		t.Errorf("the job is still there after the purge")
	}
	if err := d.Apply(ctx, purge); err != nil {
		t.Errorf("purging twice: %v", err)
	}
}
