package drivers

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/berth-dev/berth/schema"
)

// Fingerprint returns a short, stable hash of everything in a workspace
// spec that its task sees: the task (driver, image, command, args, env,
// and its secrets' references: where each value comes from, where it goes
// and what a change of it does; never a value, which berth never reads),
// the resources, the gang size, the volumes, the checkpoint signal and
// grace period, the restart behaviour, and the ports and service. Two specs with the same
// fingerprint run the same task; a spec change that leaves it equal (a
// comment, the owner, the desired state, the topology preference, the
// checkpoint interval, preemptibility) must never restart a task.
//
// Drivers carry it on what they start and report it back on Alloc and
// Exit; the plan compares it with the spec's own. It is defined here, once,
// so every driver agrees. A nil spec has the empty fingerprint.
func Fingerprint(ws *schema.WorkspaceSpec) string {
	if ws == nil {
		return ""
	}
	seen := struct {
		Task             schema.Task          `json:"task"`
		Resources        schema.WorkResources `json:"resources"`
		Replicas         int                  `json:"replicas"`
		Volumes          []schema.VolumeMount `json:"volumes,omitempty"`
		Signal           string               `json:"signal,omitempty"`
		Grace            int64                `json:"grace,omitempty"`
		RestartOnFailure bool                 `json:"restartOnFailure,omitempty"`
		Restart          *schema.Restart      `json:"restart,omitempty"`
		Ports            []schema.Port        `json:"ports,omitempty"`
		Service          *schema.Service      `json:"service,omitempty"`
	}{
		Task: ws.Task, Resources: ws.Resources, Replicas: max(ws.Replicas, 1), Volumes: ws.Volumes,
		Signal: ws.Checkpoint.Signal, Grace: int64(ws.Checkpoint.GracePeriod),
		Ports: ws.Ports, Service: ws.Service,
	}
	// restartOnFailure: true fingerprints as it did before restart had
	// its own fields, so that no running workspace restarts on berth's
	// upgrade; any other restart policy by its fields.
	switch r := ws.Restart; {
	case r == schema.LegacyRestart:
		seen.RestartOnFailure = true
	case r.Attempts > 0:
		seen.Restart = &r
	}
	if len(seen.Task.Env) == 0 {
		seen.Task.Env = nil
	}
	if len(seen.Task.Secrets) == 0 {
		seen.Task.Secrets = nil
	}
	if len(seen.Task.Args) == 0 {
		seen.Task.Args = nil
	}
	if len(seen.Volumes) == 0 {
		seen.Volumes = nil
	}
	b, _ := json.Marshal(seen) // maps marshal sorted: deterministic
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
