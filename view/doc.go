// Package view is what berth tells people about its loop: the read
// models. It holds the status documents the API serves (Status,
// WorkspaceStatus and its State, Transition, ProjectStatus, Health…), the
// explanations in sentences (Explain), the run times and likely starts
// of the queue (Predict), the dashboard's document and its deltas
// (Dashboard, Diff), and the Prometheus figures (Metrics).
//
// Package reconcile builds these values from a cycle's inputs and
// outcome and publishes them; package api serves them. Everything here
// is a function of its arguments: it reads no clock (a time is passed
// in: the cluster's), does no I/O, and never imports reconcile, so the
// read side cannot reach into the loop. A value handed in is never
// mutated; a value returned is new, or says what it shares.
package view
