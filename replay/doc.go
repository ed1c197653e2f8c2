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
// It must never talk to a real cluster or read the wall clock except to
// time decisions; it reads only the trace and cluster files it is given.
package replay
