// Package policies is berth's scheduling policy as a pure function:
// Decide(specs, snapshot, history, now) → Decision. Admission (quota,
// borrowing, fair share, aging), preemption (victims), topology placement
// and gangs live here.
//
// The rules themselves are written once, in DESIGN.md at the repository
// root ("The decision's rules"); this comment holds the contract.
//
// # Contract
//
// Input: the specs (schema.Set: policy, tiers, projects, workspaces; nil
// means none, with the default policy), the snapshot drivers observed
// (nodes, GPUs, allocations; nil means an empty cluster), the history
// (decayed usage, queue times, preemption records, quota labels, run
// times; nil means none) and the time of the decision.
//
// Output: a Decision with one WorkspaceDecision per workspace in the
// specs and one per workspace holding allocations that the specs no
// longer list, sorted by Ref: its verdict (run, start, preempt, wait,
// stop), placements, who preempts or preempted it and by which right,
// its queue place, whether it borrows, what it holds, and the reason, as
// data and as a sentence. Render prints a Decision for people.
//
// Purity: the package never does I/O, reads a clock, uses global
// randomness, imports a driver, or mutates its input; so deciding again
// on the same input gives the same bytes (the scenarios check it).
//
// Invariants (the property tests check them, checkDecision first):
// every workspace waiting has a reason; no GPU goes to two workspaces,
// and a start takes a held GPU only once its holder is listed in
// Preempts; a start uses ready, healthy GPUs of its model (with none named,
// whole GPUs, never MIG instances: drivers.ParseMIG) on nodes with
// its driver and host volumes, keeps its required topology and fits its
// node in every dimension the node tracks; a gang places every replica
// or none; no project goes beyond its quota plus borrow limit; a victim
// is preemptible, past the minimum runtime, and taken by a right (a
// strictly higher tier, reclaim by another project, or attained-service
// ordering: same tier, a victim that checkpoints, is not interactive and
// has run past a step its preemptor has not, of its team or borrowing);
// decisions
// applied one after another settle without ping-pong; and the wait
// bounds hold (TestPropWaitBound).
//
// # The wait bounds
//
// Both are per team; L is the longest a workspace holds GPUs, Δ the
// time between decisions, maxWait the policy's Aging.MaxWait.
//
//   - In quota: when the quotas add up to no more GPUs than the cluster
//     has, and every replica's GPUs divide a node's (so no work strands
//     GPUs another replica could use), a workspace of the highest tier
//     waiting that fits inside its
//     project's quota together with its team's work queued before it
//     starts within maxWait + (n+1)·(L+Δ) of queueing, whatever other
//     teams do; n counts its own team's work only: the workspaces queued
//     before it still there when it became overdue (again each time one
//     is preempted after that), and those queued after it that started
//     before it. Nothing another team does (an overdue workspace, a
//     reservation of the starvation guard, a gang's hold) takes its
//     quota: it reclaims what others borrow. Where shapes strand GPUs
//     (a replica of 3 on nodes of 4: another team's 2-GPU job inside its
//     own quota leaves no node with 3 free), the quotas do not fit the
//     cluster as the work asks for them; berth does not move another
//     team's in-quota work to make room, so the borrowing bound below is
//     what holds (it counts those starts).
//   - Borrowing: a workspace that fits the cluster and that its
//     project's limits let start, of the highest tier waiting, starts
//     within maxWait + (n+1)·(L+Δ) of queueing, where n counts the
//     workspaces queued before it still there when it became overdue
//     (again each time one is preempted after that) and every start of
//     work inside a team's quota once it is overdue. An overdue
//     borrower goes ahead of the borrowers of its tier and lower, its
//     own team's included, never ahead of in-quota work: another team's
//     is guaranteed, and its own team's is what its quota has left,
//     which it could not use (it needs more).
//
// Both hold as stated with borrowWithinCohort off, its default. A tier
// that opts in takes other teams' in-quota work of the tiers below its
// threshold, and its borrowers queue ahead of that work (so the GPUs
// they free are theirs, not their victims'): for work of those tiers the
// in-quota bound no longer holds, which is what the opt-in says.
//
// The reconciler advances History between decisions with AdvanceUsage
// (decayed usage; with AdvanceHistory, how long each ran: attained
// service and time limits), RecordDecision (queue times, preemption
// records, quota labels) and RecordRuns (run times of completed runs).
//
// # Where each rule lives
//
// The rules, one file each; those that decide have their scenarios in
// testdata/FOLDER/ named after the file, and predict.go and likely.go
// are tested by tables (predict_test.go): queue.go (the queue order), quota.go (who is in
// quota), admit.go (admission and waiting reasons), preempt.go (who may
// preempt whom, and victim choice), guard.go (the starvation guard and
// the wait bound), holders.go (phase 1), limits.go (time limits and
// idle GPUs, and the history they read), service.go (attained-service
// ordering: the queues by GPU-time run, promotion, who yields), resources.go (CPU, memory,
// disk, cores, drivers, host volumes and placement), predict.go
// (run-time prediction from History.RunTimes and expectedDuration),
// likely.go (the queue's likely start, for people: Decide never reads
// it). decide.go runs the phases; testdata/walkthrough/ is the seed
// walk-through, end to end. The machinery that makes them fast has
// files of its own, each saying which rule it serves: records.go (the
// records a decision builds), index.go (free GPUs by level), avail.go
// (what a preemptor could get), memo.go (failures per shape),
// journal.go (rollback of a failed trial), verify.go (the property
// tests' recount). history.go advances History between decisions;
// render.go prints a Decision. Free GPUs are indexed per (GPU model,
// level) — node, NVLink domain, NUMA node, both — in buckets by free
// count, and per preemptor tier by the GPUs a preemptor could get; so a
// decision over 50,000 pending workspaces and 16,384 GPUs takes well
// under a second.
package policies
