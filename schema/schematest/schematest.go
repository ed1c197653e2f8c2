// Package schematest builds small spec Sets for the tests of the
// packages above schema (the loop, the plan).
package schematest

import (
	"time"

	"github.com/berth-dev/berth/schema"
)

// TiersAndProjects is a Set with tiers high (80) and medium (50), both
// preemptible and able to preempt, and projects hi (tier high) and med
// (tier medium) with a quota of one GPU each.
func TiersAndProjects() *schema.Set {
	s := &schema.Set{Policy: schema.DefaultPolicy()}
	s.Tiers = []schema.PriorityTier{
		{Meta: schema.Meta{Name: "high"}, Spec: schema.TierSpec{Value: 80, Preemptible: true, CanPreempt: true}},
		{Meta: schema.Meta{Name: "medium"}, Spec: schema.TierSpec{Value: 50, Preemptible: true, CanPreempt: true}},
	}
	s.Projects = []schema.Project{
		{Meta: schema.Meta{Name: "hi"}, Spec: schema.ProjectSpec{Tier: "high", Quota: schema.Resources{GPUs: 1}}},
		{Meta: schema.Meta{Name: "med"}, Spec: schema.ProjectSpec{Tier: "medium", Quota: schema.Resources{GPUs: 1}}},
	}
	return s
}

// Workspace is a preemptible workspace of one replica with one GPU, a
// 30 s checkpoint grace and a checkpoint every minute.
func Workspace(project, name string, desired schema.DesiredState) schema.Workspace {
	w := schema.Workspace{Meta: schema.Meta{Name: name, Project: project}}
	w.Spec.State = desired
	w.Spec.Replicas = 1
	w.Spec.Resources.GPUs = 1
	w.Spec.Preemptible = true
	w.Spec.Checkpoint = schema.Checkpoint{Signal: "SIGTERM", GracePeriod: 30 * time.Second, Interval: time.Minute}
	return w
}

// WithWorkspaces is TiersAndProjects with ws, sorted.
func WithWorkspaces(ws ...schema.Workspace) *schema.Set {
	s := TiersAndProjects()
	s.Workspaces = ws
	s.Sort()
	return s
}

// Running is a Running Workspace of project for each name.
func Running(project string, names ...string) []schema.Workspace {
	ws := make([]schema.Workspace, 0, len(names))
	for _, n := range names {
		ws = append(ws, Workspace(project, n, schema.DesiredRunning))
	}
	return ws
}

// TwoGPUs is a simulated cluster (a Cluster document for drivers/sim) of
// one node with two H100s.
const TwoGPUs = `
apiVersion: berth.dev/v1
kind: Cluster
metadata: {name: two}
spec:
  nodes:
  - name: node
    gpus:
    - {model: H100, memory: 80Gi}
    - {model: H100, memory: 80Gi}
`
