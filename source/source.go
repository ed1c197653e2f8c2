// Package source is where specs come from: a Source gives the loop a
// Revision of the spec files, read from a directory (DirSource; package
// source/watch says when it changes) or a branch of a git repository
// (package source/git, which api.Webhook pokes on a push); SpecLoader
// turns a revision's files into a validated Set.
package source

import (
	"context"
	"io/fs"
	"time"
)

// Source gives the loop the current revision of the specs.
type Source interface {
	Read(ctx context.Context) (Revision, error)
}

// Revision is one version of the spec files: an ID that changes whenever
// the content does, and the files (rooted at Root in FS).
type Revision struct {
	ID   string
	FS   fs.FS
	Root string
	// Problems, when not empty, make the revision invalid before its
	// files are read (the git source: an unsigned commit, a missing
	// --path); it is refused like one that fails validation.
	Problems []string
}

// Reporter is a Source that reports its own status (the git source:
// what it fetched, when, and what went wrong).
type Reporter interface {
	SourceStatus() Status
	// FullRevision is the full form of a revision ID it returned (a
	// commit's whole hash).
	FullRevision(id string) string
}

// Status is what the status reports about the source, like Flux's
// GitRepository status: the revision applied, the newest one seen and
// why it was not applied, the last fetch and force-pushes.
type Status struct {
	Kind   string `json:"kind"`
	URL    string `json:"url"`
	Branch string `json:"branch,omitempty"`
	Path   string `json:"path,omitempty"`
	// LastAppliedRevision is the revision in force, BRANCH@sha1:HASH.
	LastAppliedRevision string `json:"lastAppliedRevision,omitempty"`
	// LastAttemptedRevision is the newest revision seen; its errors say
	// why it is not in force when it differs from LastAppliedRevision.
	LastAttemptedRevision string    `json:"lastAttemptedRevision,omitempty"`
	LastAttemptErrors     []string  `json:"lastAttemptErrors,omitempty"`
	LastFetchedAt         time.Time `json:"lastFetchedAt,omitzero"`
	// FetchError is why the last fetch failed (unreachable remote, bad
	// credentials, missing branch); empty after a good fetch.
	FetchError string `json:"fetchError,omitempty"`
	// ForcePushes are the last force-pushes seen, oldest first.
	ForcePushes []ForcePush `json:"forcePushes,omitempty"`
}

// ForcePush is a branch head that moved to a commit that does not
// descend from the previous one.
type ForcePush struct {
	At   time.Time `json:"at"`
	From string    `json:"from"`
	To   string    `json:"to"`
}
