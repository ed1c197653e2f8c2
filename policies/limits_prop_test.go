package policies

import (
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
	"pgregory.net/rapid"
)

// TestPropLimitsTouchOnlyTheirOwn: over generated workloads with time
// limits, idle rules, run times, idle readings and utilization, a
// workspace is stopped (or reported) by a limit only where its own rule
// says so: it has a time limit it has run out (RemainingRuntime 0), or
// an idle rule whose run of idle readings has lasted its after (stop, or
// report for a reason on a run); no other workspace carries a limit's
// reason; and the decision keeps every other invariant.
func TestPropLimitsTouchOnlyTheirOwn(t *testing.T) {
	verifying(t)
	rapid.Check(t, func(t *rapid.T) {
		in := genInput(t)
		set := in.Specs
		hist := *in.History
		hist.Ran = map[schema.Ref]drivers.RunTime{}
		hist.Idle = map[schema.Ref]drivers.IdleSpan{}
		if rapid.Bool().Draw(t, "tierLimit") && len(set.Tiers) > 0 {
			d := rapid.SampledFrom([]time.Duration{time.Hour, 4 * time.Hour}).Draw(t, "tierMax")
			set.Tiers[0].Spec.MaxRuntime = &d
		}
		if rapid.Bool().Draw(t, "policyIdle") {
			set.Policy.Spec.Idle = schema.IdleRule{After: rapid.SampledFrom([]time.Duration{time.Hour, 3 * time.Hour}).Draw(t, "after")}
		}
		for i := range set.Workspaces {
			w := &set.Workspaces[i]
			switch rapid.IntRange(0, 3).Draw(t, "limit") {
			case 1:
				d := time.Duration(rapid.IntRange(0, 6).Draw(t, "max")) * time.Hour
				w.Spec.MaxRuntime = &d
			case 2:
				w.Spec.Idle = schema.IdleRule{After: time.Duration(rapid.IntRange(1, 4).Draw(t, "wafter")) * time.Hour,
					Below:  rapid.SampledFrom([]float64{0, 5, 50}).Draw(t, "below"),
					Action: rapid.SampledFrom([]schema.IdleAction{"", schema.IdleStop, schema.IdleReport, schema.IdleOff}).Draw(t, "action")}
			}
			ref := w.Ref()
			if rapid.Bool().Draw(t, "ran") {
				hist.Ran[ref] = drivers.RunTime{Ran: time.Duration(rapid.IntRange(0, 360).Draw(t, "ranMin")) * time.Minute}
			}
			if rapid.Bool().Draw(t, "idleSpan") {
				since := propNow.Add(-time.Duration(rapid.IntRange(0, 300).Draw(t, "idleFor")) * time.Minute)
				hist.Idle[ref] = drivers.IdleSpan{Since: since, Last: propNow}
			}
		}
		snap := *in.Snapshot
		snap.Allocs = append([]drivers.Alloc(nil), snap.Allocs...)
		for i := range snap.Allocs {
			a := &snap.Allocs[i]
			if len(a.GPUs) > 0 && rapid.Bool().Draw(t, "use") {
				a.Use = &drivers.GPUUse{At: propNow, Percent: make([]float64, len(a.GPUs))}
				for j := range a.Use.Percent {
					a.Use.Percent[j] = rapid.SampledFrom([]float64{0, 3, 90}).Draw(t, "pct")
				}
			}
		}
		in = Input{Specs: set, Snapshot: &snap, History: &hist, Now: propNow}
		d := Decide(in)
		checkDecision(t, in, d)
		allocs := drivers.ByWorkspace(snap.Allocs)
		for _, wd := range d.Workspaces {
			w := set.Workspace(wd.Ref)
			switch wd.Reason.Kind {
			case ReasonTimeLimit:
				left, ok := RemainingRuntime(set, wd.Ref, allocs[wd.Ref], &hist, propNow)
				if w == nil || !ok || left > 0 || wd.Verdict != VerdictStop {
					t.Fatalf("%s stopped at a time limit (%s, %q) with %s left of its limit (has one: %v)", wd.Ref, wd.Verdict, wd.Reason.Message, left, ok)
				}
			case ReasonIdle:
				rule := set.Idle(w)
				span, ok := hist.Idle[wd.Ref]
				want := VerdictStop
				if rule.Action == schema.IdleReport {
					want = VerdictRun
				}
				if !rule.On() || !ok || span.Last.Sub(span.Since) < rule.After || wd.Verdict != want || len(allocs[wd.Ref]) == 0 {
					t.Fatalf("%s %s as idle (%q): its rule %+v, its idle run %+v (%v)", wd.Ref, wd.Verdict, wd.Reason.Message, rule, span, ok)
				}
			default:
				if w == nil || w.Spec.State != schema.DesiredRunning {
					continue
				}
				if left, ok := RemainingRuntime(set, wd.Ref, allocs[wd.Ref], &hist, propNow); ok && left == 0 {
					t.Fatalf("%s ran out its time limit yet %s (%s)", wd.Ref, wd.Verdict, wd.Reason.Kind)
				}
			}
		}
	})
}
