// Package load turns a tree of YAML files into a validated schema.Set
// with file:line:col diagnostics. It holds the CUE schema that validates
// the documents (schema.cue, embedded in the binary), the YAML parsing,
// the reading of spec trees (files, directories, a git commit's tree) and
// the spec cache that lets a load reuse what the last one learned. The
// types it fills are package schema's, which imports no CUE.
//
// Paths and FS run three stages and report every problem at once:
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
// Stage 2 checks capacity against the cluster files in the tree, read
// with schema.ParseCluster as drivers/sim reads them.
//
// Diagnostics carry a sentence a person can act on; the schema's @hint
// attributes supply the second half of it. docs/reference.md is generated
// from the schema's comments (Reference) and a test keeps it current.
//
// The package imports no berth package but schema and internal/readfile
// (a file read without waiting); it must never talk to a cluster, read a
// clock, or panic on any input (FuzzLoad checks the last).
package load
