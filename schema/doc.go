// Package schema holds the spec types: the Set of a spec tree, its
// priority tiers, projects, workspaces, volumes and scheduling policy,
// their resources and the quantities they are written in (ParseCPU,
// ParseBytes, ParseDuration), and the cluster presets a cluster file may
// name. Package load fills them from YAML, validates them with CUE and
// reports what is wrong; the packages that decide (policies, plan) and
// the drivers see only these types.
//
// The cluster file (kind: Cluster) is parsed here, once, by
// ParseCluster (its JSON, strictly): drivers/sim builds its simulated
// cluster from what it returns, and the loader checks workspaces and
// quotas against it.
//
// The package must never import another berth package, CUE or a YAML
// parser, do I/O or read a clock.
package schema
