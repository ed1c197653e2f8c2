// Package replay is the engine of `berth simulate`, a second loop beside
// reconcile (not a way to reach a cluster): it reads job traces
// (berth's generic CSV and the Philly trace), maps them onto berth's specs
// (projects, tiers, checkpoints, gangs: every choice in Mapping and stated
// in the report), replays them event by event through the simulated
// cluster of drivers/sim under several decision functions (berth's
// policies.Decide and the baselines of replay/baseline), and reports how
// each did as a table, JSON or a self-contained HTML page.
//
// The clock is the simulator's ManualClock: it jumps to the next arrival,
// completion or end of a preemption grace, and a policy decides only when
// one of those happened and some job waits. A replay is deterministic:
// the same trace, cluster, mapping and seed give the same report, except
// for the decision timings (Timing), which measure this machine.
//
// It shares the loop's decide step (the policies themselves, decided on a
// narrowed queue where that is exact: narrow.go) but not its plan and
// history steps: replayer.apply reads a decision's Start and Preempt
// verdicts itself, and records its preemptions by hand. Turning each
// decision into actions with plan.New instead, sent by the loop's rule (a
// Wait holds back its Start), with the cluster observed and the decision
// planned again after preemptions (a victim that never started working
// is gone at once), was tried (issue 35): the same reports byte for byte,
// but twice the CPU (the first 20,000 Philly jobs, the four policies:
// 103 and 117 user seconds against 48 and 52; 81 with plan.New's maps
// sized and no plan for decisions that start and preempt nothing), as
// plan.New fingerprints every running workspace for an update and indexes
// every allocation and GPU, in every cycle that starts or preempts
// anything. policies.RecordDecision does not fit the narrowed decisions
// (it forgets the queue places of the jobs a window leaves out), and it
// would give berth the admission labels the loop remembers
// (History.Borrowing), which the replay derives from start order: both
// change results.
//
// It must never talk to a real cluster or read the wall clock except to
// time decisions and simulated months (Timing); it reads only the trace
// and cluster files it is given.
package replay
