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
// narrowed queue where that is exact: narrow.go) and its plan step:
// replayer.apply turns each decision into actions with plan.NewWith and
// sends them by the loop's rule (plan.Plan.Waves: stops and preemptions
// first, a Wait holds back its Start). When a victim that never started
// working is gone at once, the cluster is observed and the decision
// planned again, as the loop's next cycle would at the same instant, so
// its preemptor starts in the same pass. The replay's specs and
// priorities never change and it decides every job that holds GPUs, so
// it tells the plan step there is nothing to update and nothing
// forgotten (plan.Options.Settled): a plan then costs what the decision
// starts and preempts. Checking every running job for an update and
// walking every allocation in each cycle that acts made a replay up to
// twice as costly (issue 35). Its history step (replayer.record) keeps
// each job's quota label as the loop's does, with the loop's own
// function (policies.RecordAdmission): a job admitted inside its quota
// stays inside it while it runs (History.Borrowing), where the replay
// once derived the labels again from start order at every decision
// (TestReplayKeepsTheLoopsLabels). It keeps the queue places and
// preemption records as jobs arrive, start and are preempted, not with
// policies.RecordDecision, which would forget the places of the jobs a
// narrowed queue leaves out and copies the whole history each cycle.
// Each cycle's snapshot is built in the array of the one before last
// (sim.Cluster.ObserveInto) and each decision in the arrays of the one
// before (policies.Scratch): built fresh, they were three quarters of
// what a replay allocated, and the collections they caused marked a
// live heap that grows with the trace (issue 40).
//
// GPU kinds (kinds.go): a CSV trace's gpu_kind column names each job's
// kind, one the cluster file declares (spec.kinds) or, where it declares
// none, a model of its GPUs. MapCluster declares the kinds in the specs
// (Set.Kinds, where the cluster file declares them or the trace names
// one: a trace of no kinds on a cluster of models decides as it always
// did, at the same cost) and gives each job's workspace its
// kind (resources.gpuKind), so berth's policy places it there; the
// baselines place by kind and device group as berth does (a job of no
// kind on whole GPUs only, never a MIG instance), and a narrowed queue's
// classes tell kinds apart. Quotas stay in quota.gpus, which counts every
// kind. A job naming a kind the cluster has no GPU of is an error before
// the replay; one too large for its kind's GPUs is skipped. Where the
// cluster has several kinds or the trace names one, the report has each
// kind's busy and available GPU-hours and GPU-equivalents (KindUse); a
// replay of one kind reports as before.
//
// Time limits (Mapping.MaxRuntime, berth simulate --max-runtime): every
// tier's maxRuntime, so a job's limit is schema.Set.MaxRuntime of its
// workspace, as the loop reads it. A job's run time is counted over its
// runs, each from its start, as policies.AdvanceHistory counts it; the
// replay stops a job when it reaches its limit (an event, like a
// completion), with a stop and its grace, under every policy (the limit
// is the platform's, not a scheduler's), and it never runs again
// (jobLimited: counted apart from completions, with the GPU-hours of its
// trace run it did not get to). The decision never sees a job past its
// limit: it counts a run from its allocation's start, never more than
// the replay does.
//
// Attained-service ordering (the default policy's service, or
// Mapping.Service, berth simulate --service): berth queues a job that
// has run by the GPU-time it ran, and a job of its tier that has run
// less may preempt it. The replay keeps, for berth, each preempted job's
// run time over its runs (History.Ran, the record counting up to the
// preemption), as the loop's AdvanceHistory keeps it; jobs waiting to
// resume are never cut from a narrowed queue. The report counts every
// policy's preemptions per job, and berth's preemptions for ordering
// with the work they lost (sim.Cluster.AtRisk at the preemption: the
// progress since the job's last checkpoint).
//
// It must never talk to a real cluster or read the wall clock except to
// time decisions and simulated months (Timing); it reads only the trace
// and cluster files it is given.
package replay
