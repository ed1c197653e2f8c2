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
