// Package nomad is berth's driver for a real Nomad cluster (Community
// Edition 1.6 and later), through github.com/hashicorp/nomad/api only.
//
// Projects are namespaces; each workspace is one job in its project's
// namespace, with berth's marker meta (project, workspace, revision,
// GPUs). berth places: every replica is a task group pinned to the node
// berth chose (${node.unique.id}) and to the exact GPUs (device
// "nvidia/gpu", count, ${device.ids} set_contains_any), and every
// allocation's devices are checked against the pin, after waiting for
// Nomad's evaluation with blocking queries (never a fixed poll); a
// placement Nomad cannot make is withdrawn and reported ClassUnplaceable
// with Nomad's own reason (FailedTGAllocs), and not registered again until
// a backoff passes. Job meta carries the workspace's task fingerprint
// (drivers.Fingerprint) and a hash of the task-visible job: a revision that
// changes neither registers nothing (a meta change would make Nomad
// restart the task), a priority change is an in-place update, and a job
// edited outside berth is reported as drift. Jobs are batch jobs: a task
// that ends on its own is reported in Snapshot.Exits and not run again
// unless berth starts it (stopping the dead job first, since Nomad does
// not rerun an unchanged batch job). Preemption is berth's:
// the victim's job is deregistered without purge, so its task gets the
// checkpoint signal and grace. The reconciler's memory lives in a Nomad
// Variable written with check-and-set. Node topology comes from the
// metadata `berth agent` publishes (package gpumeta).
//
// Observe lists, then watches (follow.go): a full read (the nodes, every
// allocation as a list stub, berth's jobs; each job version once, never an
// allocation's embedded job), then, while Watch follows Nomad's event
// stream, snapshots from the cache the stream keeps current, without a
// request; a gap in the stream, and every Config.Resync, reads whole again.
//
// GPU utilization (use.go): once StartSampling runs, a sampler of its
// own reads each node that holds berth's running GPUs once per
// Config.Use.Interval (GET /v1/client/stats, one request per node, never
// one per allocation), at most Config.Use.Rate requests a second, and
// Observe gives each running allocation its GPUs' last reading
// (drivers.Alloc.Use) without a request.
//
// It must never touch a job or namespace without berth's marker, never
// rewrite the scheduler configuration unless asked (FixScheduler), never
// print or log the ACL token, and never import package reconcile (it
// satisfies drivers.Cluster and drivers.Store).
package nomad
