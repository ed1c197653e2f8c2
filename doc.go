// Package berth is a GitOps reconciler for GPU clusters on HashiCorp Nomad.
// The binary is cmd/berth; this package holds only the repository-wide
// tests (deps_test.go keeps the package boundaries of DESIGN.md true).
package berth
