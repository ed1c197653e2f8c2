// Package schema holds the spec types, the CUE schema that validates them
// (embedded in the binary) and the loader that turns a tree of YAML files
// into a validated Set with file:line:col errors.
//
// It must never import another berth package, talk to a cluster, or read a
// clock.
package schema
