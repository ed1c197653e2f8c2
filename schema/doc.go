// Package schema holds the spec types: the Set of a spec tree, its
// priority tiers, projects, workspaces, volumes and scheduling policy,
// their resources and the quantities they are written in (ParseCPU,
// ParseBytes, ParseDuration), and the cluster presets a cluster file may
// name. Package load fills them from YAML, validates them with CUE and
// reports what is wrong; the packages that decide (policies, plan) and
// the drivers see only these types.
//
// The package must never import another berth package, CUE or a parser,
// do I/O or read a clock.
package schema
