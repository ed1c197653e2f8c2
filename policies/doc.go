// Package policies is berth's scheduling policy as a pure function:
// Decide(specs, snapshot, history, now) → Decision. Admission (quota,
// borrowing, fair share, aging), preemption (victims), topology placement
// and gangs live here.
//
// It must never do I/O, read a clock, use global randomness, import a
// driver, or mutate its input.
//
// # The decision, in phases
//
//  1. Holders: a workspace the specs no longer list, or want Stopped, gets
//     VerdictStop; one still stopping keeps VerdictPreempt; one running
//     gets VerdictRun at its placements. GPUs of leaving workspaces are
//     "releasing": a start may take them, listing the owner in Preempts.
//  2. Queue: every workspace that wants to run and holds nothing, one
//     queue per project (tier, then aging, then first come, first
//     served), merged
//     by a heap: in-quota before borrowing, then tier, then fair share
//     (decayed usage plus held GPUs at steady state, per weight) less a
//     bounded aging credit, then time queued, then Ref. A project offers
//     its first workspace that still fits inside its quota, if any.
//     The starvation guard reserves free GPUs for the oldest overdue
//     workspace (waiting past Aging.MaxWait, the wait bound), in a group
//     where no late work runs (queued after it, started once it was
//     overdue: what holds the rest ends within the longest run), against
//     all work of its tier and lower whatever the quotas (higher tiers
//     see through it), and no later preemptor places a replica on a node
//     it holds GPUs on; with none overdue, for the longest-waiting
//     workspace at maximum aging that needs more than the smallest one
//     of its tier. A workspace that started past the wait bound is
//     preempted only by a higher tier.
//  3. Admission, in queue order: quota and borrow limit; a workspace
//     preempted by a higher tier of its own project that comes before
//     its preemptor in the queue (inside its quota while the preemptor
//     borrows) waits for the preemptor to start, unless overdue:
//     otherwise it takes back the GPUs it gave up and is preempted again
//     at once; free GPUs (best
//     fit: the node or NVLink domain left with the fewest free GPUs,
//     preferred topology first); else preemption (strictly lower tiers of
//     its own project, or of other projects' borrowed work, or of any
//     project when the quotas overcommit the cluster and it is inside its
//     own; or, inside its quota, whole workspaces other projects borrow; the
//     fewest, lowest-tier, over-quota, least-work-lost, most recently
//     started victims whose removal makes it fit on that node or domain,
//     at most MaxVictims, none younger than MinRuntime); else wait with a
//     reason, and the first gang that waits for capacity reserves the free
//     GPUs it will need (for each replica, in a group with room for it) (a single workspace reserves only as the
//     starvation guard's pick). Gangs place every replica or none. A node
//     must also have what the replica reserves besides GPUs, in each
//     dimension it tracks (Node.CPUMilli, MemoryBytes, DiskBytes, Cores:
//     CPU as Nomad's MHz shares, an exclusive core costing a core and
//     Node.CPUPerCore MHz), and the task driver and host volumes the
//     workspace needs (Node.Features); a victim may be taken for its CPU,
//     memory, disk or cores. A workspace whose driver or host volume no
//     ready node has waits saying so. One that needs no GPU goes to a
//     ready node where it fits, packed (nodes without GPUs first, then
//     the least CPU left), and never preempts. A workspace with any
//     allocation, GPUs or not, runs or leaves: it never queues again.
//  4. Output sorted by Ref; Render prints it for people.
//
// A quota counts GPUs, and CPU and memory where it names them (above
// zero: a dimension it leaves out is not counted), each the same way: a
// workspace is inside the quota only if it fits what is left in every
// counted dimension, a project never holds more than quota plus borrow
// limit in any (a limit < 0: none), and borrowed work is reclaimed for
// whichever it lacks. CPU counts resources.cpu per replica (an exclusive
// core as 1000), memory resources.memory (QuotaPerReplica); a running
// workspace counts its spec once per allocation.
//
// The wait bound, Aging.MaxWait (72h by default; zero turns it off): a
// workspace that fits the cluster and that its project's limits let
// start (borrow limit; inside the quota when not preemptible), of the
// highest tier waiting, starts within
// Aging.MaxWait + (n+1)·(L+Δ) of queueing, where n counts the workspaces
// queued before it still there when it became overdue (once each, and
// again each time one is preempted after that), L is the longest a
// workspace holds GPUs and Δ the time between decisions: the guard
// serves the overdue oldest first, and the GPUs its pick holds stay free
// for it while the work beside them ends. Work of a higher tier still
// goes first (TestPropWaitBound).
//
// A workspace's tier is its own (Workspace.spec.tier) or its project's. A
// project is a team with a quota; tier orders the team's own work, and
// across teams quota, borrowing and reclaim decide first.
//
// Borrowed work is a running workspace admitted beyond its project's
// quota. The label is decided once, when the workspace starts
// (WorkspaceDecision.Borrowed), and History.Borrowing remembers it while
// the workspace runs: a workspace admitted inside its quota stays in-quota
// work whatever its project starts after it and whatever older work
// leaves; a borrower moves inside the quota only when in-quota work
// leaving makes room for it (that only takes a right away). Running
// workspaces without a record (an older history, allocations berth did
// not start) are labelled from start order, and among workspaces started
// together in the order their decision admitted them (time queued, those
// that fit the quota first). Reclaim, and priority preemption by a
// preemptor that is itself beyond its quota, take only borrowed work, and
// only while its project stays at or above its quota (in GPUs, or in a
// named CPU or memory dimension the work taken uses); so what reclaimed a
// quota is never taken back by the borrower it reclaimed from (no A↔B
// ping-pong).
//
// Free GPUs are indexed per (GPU model, level) — node, NVLink domain,
// NUMA node, both — in buckets by free count, and per preemptor tier by
// the GPUs a preemptor could get; so a decision over 50,000 pending
// workspaces and 16,384 GPUs takes well under a second.
//
// # Where each rule lives
//
// The rules, one file each: queue.go (the queue order), quota.go (who is
// in quota), admit.go (admission and waiting reasons), preempt.go (who
// may preempt whom, and victim choice), guard.go (the starvation guard),
// holders.go (phase 1), resources.go (CPU, memory, disk, cores, drivers
// and host volumes), predict.go (run-time prediction from
// History.RunTimes and expectedDuration), likely.go (the queue's likely
// start, for people: Decide never reads it). decide.go runs the phases. The machinery that makes
// them fast has files of its own, each saying which rule it serves:
// records.go (the records a decision builds), index.go (free GPUs by
// level), avail.go (what a preemptor could get), memo.go (failures per
// shape), journal.go (rollback of a failed trial), verify.go (the
// property tests' recount). history.go advances History between
// decisions; render.go prints a Decision.
//
// The reconciler advances History between decisions with AdvanceUsage
// (decayed usage), RecordDecision (queue times, preemption records,
// quota labels) and RecordRuns (run times of completed runs).
package policies
