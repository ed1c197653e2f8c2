// Package baseline holds the schedulers berth is compared with in
// `berth simulate`, as pure decision functions with Decide's signature
// (policies.Input → policies.Decision), so a trace replay swaps them:
//
//   - FIFO: one queue in submit order, no priorities, no preemption,
//     first-fit placement; the head of the queue blocks everyone behind it.
//   - Nomad: Nomad's native scheduler: job priority only (the tier's
//     value), preemption of whole allocations at least 10 priority points
//     lower, bin-packing placement without NVLink awareness, no quotas, no
//     checkpoint awareness.
//   - Quota: a Kueue-like quota scheduler: guaranteed quotas with
//     borrowing of idle capacity and reclaim from borrowers, priority
//     within a project, no decayed fair share, no aging, victims by
//     Kueue's order (borrowers, lower priority, most recently admitted),
//     not by work lost.
//
// Each places a workspace as berth's policy does by kind (groups.go): a
// replica's GPUs from one device group (one model of one node), a
// workspace asking for a GPU kind or model on those alone, one asking for
// neither on whole GPUs only, never a MIG instance.
//
// Like policies it must never do I/O, read a clock, use global randomness
// or mutate its input.
package baseline
