// Package policies is berth's scheduling policy as a pure function:
// Decide(specs, snapshot, history, now) → Decision. Admission (quota,
// borrowing, fair share, aging), preemption (victims), topology placement
// and gangs live here.
//
// It must never do I/O, read a clock, use global randomness, import a
// driver, or mutate its input.
package policies
