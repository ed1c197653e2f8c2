// Package schema holds the spec types, the CUE schema that validates them
// (schema.cue, embedded in the binary) and the loader that turns a tree of
// YAML files into a validated Set with file:line:col diagnostics.
//
// Load and LoadFS run three stages and report every problem at once:
//
//  1. Each document on its own, in parallel: YAML syntax, its kind, then
//     "#Kind & document" evaluated by CUE in the schema's scope. berth
//     looks for unknown and missing fields itself, because CUE hides some
//     errors behind others. Each worker drops its cue.Context after a
//     bounded number of documents: a context keeps every value built in it.
//  2. The rules across documents, in Go, over the documents that passed:
//     references, duplicates, tier values, quota and cluster capacity.
//  3. The repo's own *.cue rules, unified with the documents as written.
//
// The cluster file (kind: Cluster) is read here too, once, by
// ParseCluster: drivers/sim builds its simulated cluster from what it
// returns, and stage 2 checks capacity against it.
//
// Diagnostics carry a sentence a person can act on; the schema's @hint
// attributes supply the second half of it. docs/reference.md is generated
// from the schema's comments (Reference) and a test keeps it current.
//
// The package must never import another berth package (but the leaf
// internal/text, which writes its quantities), talk to a cluster,
// read a clock, or panic on any input (FuzzLoad checks the last).
package schema
