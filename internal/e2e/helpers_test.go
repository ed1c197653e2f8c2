package e2e

import (
	"context"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
)

var ctx = context.Background()

// ptr returns a pointer to a copy of v, for the optional fields of
// Nomad's API types.
func ptr[T any](v T) *T { return &v }

// realSmallStart is a 0-GPU start of workspace name in project
// berth-real on node.
func realSmallStart(name, node string) drivers.Action {
	ws := &schema.Workspace{
		Meta: schema.Meta{Name: name, Project: "berth-real"},
		Spec: schema.WorkspaceSpec{
			Task:      schema.Task{Driver: "raw_exec", Command: "/bin/sh", Args: []string{"-c", "sleep 3600"}},
			Resources: schema.WorkResources{CPUMHz: 100, MemoryBytes: 32 << 20},
		},
	}
	return drivers.Action{
		Kind: drivers.ActionStart, Workspace: ws.Ref(), Spec: ws, Revision: "r1",
		Project:    &schema.Project{Meta: schema.Meta{Name: "berth-real"}, Spec: schema.ProjectSpec{Tier: "medium"}},
		Tier:       &schema.PriorityTier{Meta: schema.Meta{Name: "medium"}, Spec: schema.TierSpec{Value: 50}},
		Placements: []drivers.Placement{{Node: node}},
	}
}
