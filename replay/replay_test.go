package replay

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/schema"
)

const oneNode = `apiVersion: berth.dev/v1
kind: Cluster
metadata: {name: one}
spec:
  startDelay: 5s
  checkpointTime: 10s
  nodes:
  - {name: gpu, preset: dgx-h100}
`

// handTrace: project a fills the node with two low jobs of 4 GPUs at 0
// and 1m (2h each, no checkpoints); at 10m project b submits a high job of
// 4 GPUs for 10m. Quotas: 4 GPUs each, so a borrows 4.
const handTrace = `submit,duration,gpus,project,tier
0,2h,4,a,low
60,2h,4,a,low
600,10m,4,b,high
`

func replayText(t *testing.T, trace, cluster string, m Mapping, pols ...Policy) *Report {
	t.Helper()
	jobs, err := Read(strings.NewReader(trace), "")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := sim.Parse([]byte(cluster))
	if err != nil {
		t.Fatal(err)
	}
	wl, err := MapCluster(jobs, *spec, m)
	if err != nil {
		t.Fatal(err)
	}
	if len(pols) == 0 {
		pols = Policies()
	}
	rep, err := Run(wl, *spec, m, pols, Options{Parallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestBaselinesOnHandMadeTrace(t *testing.T) {
	m := DefaultMapping()
	m.Quotas = map[string]int{"a": 4, "b": 4}
	rep := replayText(t, handTrace, oneNode, m)
	// a1 works from 5s, a2 from 1m5s; the signal comes at 10m.
	lostA1 := 4 * (10*time.Minute - 5*time.Second).Hours()
	lostA2 := 4 * (10*time.Minute - 65*time.Second).Hours()
	tests := map[string]struct {
		preemptions int
		lost        float64
		highWait    time.Duration
	}{
		// FIFO: b waits for a1 to finish (2h after its start delay).
		"fifo": {0, 0, 2*time.Hour + 5*time.Second - 10*time.Minute},
		// Nomad: high preempts low, blind to work lost: a1 (frees as much, first).
		"nomad": {1, lostA1, 30 * time.Second},
		// Quota: b reclaims its quota from a's borrower, the latest started.
		"quota": {1, lostA2, 30 * time.Second},
		// berth: the victim that loses the least work.
		"berth": {1, lostA2, 30 * time.Second},
	}
	for _, p := range rep.Policies {
		tt := tests[p.Name]
		if p.Preemptions != tt.preemptions {
			t.Errorf("%s: %d preemptions, want %d", p.Name, p.Preemptions, tt.preemptions)
		}
		if math.Abs(p.GPUHours.Lost-tt.lost) > 1e-9 {
			t.Errorf("%s: %.4f GPU-hours lost, want %.4f", p.Name, p.GPUHours.Lost, tt.lost)
		}
		if got := time.Duration(p.Wait[0].Max * float64(time.Second)); p.Wait[0].Tier != "high" || got != tt.highWait {
			t.Errorf("%s: tier %s waited %s, want high %s", p.Name, p.Wait[0].Tier, got, tt.highWait)
		}
		if p.Completed != 3 {
			t.Errorf("%s: %d jobs completed, want 3", p.Name, p.Completed)
		}
	}
}

// Without quotas for b, the Kueue-like scheduler has no right to take
// anything for it: priority counts only within a project.
func TestQuotaNeedsQuota(t *testing.T) {
	m := DefaultMapping()
	m.Quotas = map[string]int{"a": 8, "b": 0}
	rep := replayText(t, handTrace, oneNode, m, Policies()[2])
	if p := rep.Policies[0]; p.Preemptions != 0 || p.Wait[0].Max < time.Hour.Seconds() {
		t.Errorf("quota: %d preemptions, high waited %s; want none and over an hour", p.Preemptions, short(p.Wait[0].Max))
	}
}

func sampleReport(t *testing.T, seed uint64) *Report {
	t.Helper()
	return sampleReportWith(t, seed, Options{Parallel: 2})
}

// sampleWorkload maps the sample trace onto the sample cluster.
func sampleWorkload(t *testing.T, seed uint64) (*Workload, *sim.Spec, Mapping) {
	t.Helper()
	jobs, err := ReadFile("testdata/philly-sample.csv", "")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := sim.ReadFile("testdata/cluster-64.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := DefaultMapping()
	m.Seed = seed
	wl, err := MapCluster(jobs, *spec, m)
	if err != nil {
		t.Fatal(err)
	}
	return wl, spec, m
}

func sampleReportWith(t *testing.T, seed uint64, opt Options) *Report {
	t.Helper()
	wl, spec, m := sampleWorkload(t, seed)
	rep, err := Run(wl, *spec, m, Policies(), opt)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// Deciding on a narrowed queue (narrow.go) gives every policy the outcome
// the whole queue gives: every narrowed decision is checked, and the
// report is the one the checks (which apply the whole queue's decision)
// give.
func TestNarrowedQueueIsExact(t *testing.T) {
	if testing.Short() {
		t.Skip("replays the sample twice")
	}
	checked := sampleReportWith(t, 1, Options{Parallel: 2, Verify: 1})
	for _, p := range checked.Policies {
		tm := p.Timing
		t.Logf("%s: %d decisions on the whole queue, %d narrowed", p.Name, tm.Decisions, tm.Narrowed)
		if tm.Narrowed == 0 || tm.Verified != tm.Narrowed {
			t.Errorf("%s: %d narrowed decisions, %d verified: want some, all verified", p.Name, tm.Narrowed, tm.Verified)
		}
		if tm.Differed != 0 {
			t.Errorf("%s: %d of %d narrowed decisions differ from the whole queue's", p.Name, tm.Differed, tm.Verified)
		}
	}
	if a, b := untimed(t, checked), untimed(t, sampleReport(t, 1)); a != b {
		t.Errorf("narrowed decisions changed the report")
	}
}

// untimed is the report as JSON without the decision timings.
func untimed(t *testing.T, r *Report) string {
	t.Helper()
	for i := range r.Policies {
		r.Policies[i].Timing = Timing{}
	}
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestSampleDeterministic(t *testing.T) {
	if testing.Short() {
		t.Skip("replays the sample three times")
	}
	a, b := untimed(t, sampleReport(t, 7)), untimed(t, sampleReport(t, 7))
	if a != b {
		t.Errorf("the same seed gave two reports")
	}
	if c := untimed(t, sampleReport(t, 8)); c == a {
		t.Errorf("another seed gave the same report: the seed does nothing")
	}
}

func TestSampleConservationAndRegression(t *testing.T) {
	rep := sampleReport(t, 1)
	byName := map[string]PolicyResult{}
	for _, p := range rep.Policies {
		byName[p.Name] = p
		g := p.GPUHours
		// Delivered + lost + overhead + idle = capacity × time.
		if sum := g.Delivered + g.Lost + g.Overhead + g.Idle; math.Abs(sum-g.Capacity) > 1e-6*g.Capacity {
			t.Errorf("%s: delivered %.3f + lost %.3f + overhead %.3f + idle %.3f = %.3f GPU-hours, capacity × time is %.3f",
				p.Name, g.Delivered, g.Lost, g.Overhead, g.Idle, sum, g.Capacity)
		}
		// The replay's own integral of working GPUs agrees with the
		// simulator's accounting.
		if math.Abs(g.Worked-(g.Delivered+g.Lost)) > 1e-6*g.Capacity {
			t.Errorf("%s: the replay saw %.3f GPU-hours of work, the simulator %.3f delivered + %.3f lost", p.Name, g.Worked, g.Delivered, g.Lost)
		}
		// Every job completes, and delivers exactly the work it asked for.
		if p.Completed != rep.Trace.Jobs || math.Abs(g.Delivered-rep.Trace.GPUHours) > 1e-6*rep.Trace.GPUHours {
			t.Errorf("%s: %d/%d jobs completed, %.3f GPU-hours delivered of %.3f asked", p.Name, p.Completed, rep.Trace.Jobs, g.Delivered, rep.Trace.GPUHours)
		}
		if p.Name == "fifo" && p.Preemptions != 0 {
			t.Errorf("fifo preempted %d times", p.Preemptions)
		}
	}
	fifo, berth := byName["fifo"], byName["berth"]
	if !(berth.JCT.Mean < fifo.JCT.Mean) {
		t.Errorf("mean JCT: berth %s, fifo %s; berth must beat fifo", short(berth.JCT.Mean), short(fifo.JCT.Mean))
	}
	if !(berth.Wait[0].P99 < fifo.Wait[0].P99) {
		t.Errorf("p99 wait of tier %s: berth %s, fifo %s; berth must beat fifo", berth.Wait[0].Tier, short(berth.Wait[0].P99), short(fifo.Wait[0].P99))
	}
}

func TestReportFormats(t *testing.T) {
	m := DefaultMapping()
	m.Quotas = map[string]int{"a": 4, "b": 4}
	rep := replayText(t, handTrace, oneNode, m)
	var table, html bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"fifo", "nomad", "quota", "berth", "wait p99 high", "fairness (Jain)", "GPU-hours lost", "2 trace projects (the trace's project column), one berth project (a team) each", "tiers: per job (the workspace's own tier), from the trace's tier column"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	if err := rep.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	h := html.String()
	for _, want := range []string{"<svg", "Wait-time CDF, tier high", "GPU utilization over time", "Per team", "2.0h · 2.00", "</html>"} {
		if !strings.Contains(h, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	for _, bad := range []string{"<script", "http://", "https://"} {
		if strings.Contains(strings.ReplaceAll(h, `xmlns="http://www.w3.org/2000/svg"`, ""), bad) {
			t.Errorf("HTML is not self-contained: it has %q", bad)
		}
	}
}

// Skipping decisions while nothing fits the free GPUs changes nothing for
// a policy that never preempts.
func TestNeverPreemptsSkipIsExact(t *testing.T) {
	if testing.Short() {
		t.Skip("replays the sample twice")
	}
	wl, spec, m := sampleWorkload(t, 1)
	fifo, _ := PolicyByName("fifo")
	always := fifo
	always.NeverPreempts, always.HeadBlocks = false, false
	a, err := Run(wl, *spec, m, []Policy{fifo}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(wl, *spec, m, []Policy{always}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ta, tb := a.Policies[0].Timing, b.Policies[0].Timing; ta.Cycles() >= tb.Cycles() {
		t.Errorf("skipping decided %d times, deciding always %d", ta.Cycles(), tb.Cycles())
	}
	if ua, ub := untimed(t, a), untimed(t, b); ua != ub {
		t.Errorf("skipping changed the outcome")
	}
}

// With a tick, policies decide less often; jobs still arrive and finish
// at their own times, so all the work is done and accounted for.
func TestTick(t *testing.T) {
	wl, spec, m := sampleWorkload(t, 1)
	berth, _ := PolicyByName("berth")
	exact, err := Run(wl, *spec, m, []Policy{berth}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ticked, err := Run(wl, *spec, m, []Policy{berth}, Options{Tick: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	e, k := exact.Policies[0], ticked.Policies[0]
	if k.Timing.Cycles() >= e.Timing.Cycles() {
		t.Errorf("decisions: %d with a 5m tick, %d without", k.Timing.Cycles(), e.Timing.Cycles())
	}
	g := k.GPUHours
	if k.Completed != e.Completed || math.Abs(g.Delivered-ticked.Trace.GPUHours) > 1e-6*g.Capacity ||
		math.Abs(g.Delivered+g.Lost+g.Overhead+g.Idle-g.Capacity) > 1e-6*g.Capacity {
		t.Errorf("with a tick: %d/%d completed, GPU-hours %+v of %.3f asked", k.Completed, e.Completed, g, ticked.Trace.GPUHours)
	}
	if k.Wait[2].P50 < e.Wait[2].P50 {
		t.Errorf("median low-tier wait %s with a 5m tick, %s without: a tick cannot make starts earlier", short(k.Wait[2].P50), short(e.Wait[2].P50))
	}
}

// A victim still starting is gone at once: its preemptor starts at the
// same instant and no work is lost.
func TestVictimStillStarting(t *testing.T) {
	trace := "submit,duration,gpus,project,tier\n0,1h,8,a,low\n2,10m,8,b,high\n"
	m := DefaultMapping()
	m.Quotas = map[string]int{"a": 0, "b": 8} // a borrows everything
	rep := replayText(t, trace, oneNode, m, Policies()[1], Policies()[3])
	for _, p := range rep.Policies {
		if p.Preemptions != 1 || p.GPUHours.Lost != 0 || p.Wait[0].Max != 0 || p.Completed != 2 {
			t.Errorf("%s: %d preemptions, %.3f GPU-hours lost, high waited %s, %d completed; want 1, 0, 0s, 2",
				p.Name, p.Preemptions, p.GPUHours.Lost, short(p.Wait[0].Max), p.Completed)
		}
	}
}

// Each team's mean completion time and share, on the hand-made trace.
// Under FIFO, b waits from 10m until a1 ends (2h5s) while a holds 8 GPUs
// against its quota of 4: shares 2 and 0 all that time, so Jain is 0.5.
// Under berth, b preempts a's borrower: a holds 8 during the 30 s grace,
// then 4 while b runs, and both are due exactly their quota.
func TestTeams(t *testing.T) {
	m := DefaultMapping()
	m.Quotas = map[string]int{"a": 4, "b": 4}
	rep := replayText(t, handTrace, oneNode, m)
	for _, p := range rep.Policies {
		if len(p.Teams) != 2 || p.Teams[0].Project != "a" || p.Teams[1].Project != "b" {
			t.Fatalf("%s: teams %+v, want a and b in the report's order", p.Name, p.Teams)
		}
	}
	fifo, berth := rep.Policies[0], rep.Policies[3]
	a, b := fifo.Teams[0], fifo.Teams[1]
	start := 5 * time.Second // the cluster's start delay
	if want := (2*time.Hour + start).Seconds(); a.Completed != 2 || a.JCTMean != want {
		t.Errorf("fifo, a: %d done, mean JCT %s; want 2, %s", a.Completed, short(a.JCTMean), short(want))
	}
	// b starts when a1 ends and runs 10m after its start delay.
	if want := (2*time.Hour + start - 10*time.Minute + start + 10*time.Minute).Seconds(); b.Completed != 1 || b.JCTMean != want {
		t.Errorf("fifo, b: %d done, mean JCT %s; want 1, %s", b.Completed, short(b.JCTMean), short(want))
	}
	contended := (2*time.Hour + start - 10*time.Minute).Hours()
	if a.Share != 2 || b.Share != 0 || math.Abs(a.ShareHours-contended) > 1e-9 || math.Abs(b.ShareHours-contended) > 1e-9 || fifo.Fairness != 0.5 {
		t.Errorf("fifo: shares a %.3f over %.3fh, b %.3f over %.3fh, Jain %.3f; want 2 and 0 over %.3fh, Jain 0.5", a.Share, a.ShareHours, b.Share, b.ShareHours, fifo.Fairness, contended)
	}
	grace := 30 * time.Second
	a, b = berth.Teams[0], berth.Teams[1]
	total := (grace + start + 10*time.Minute).Seconds()
	if wantA, wantB := (2*grace.Seconds()+(total-grace.Seconds()))/total, (total-grace.Seconds())/total; math.Abs(a.Share-wantA) > 1e-9 || math.Abs(b.Share-wantB) > 1e-9 {
		t.Errorf("berth: shares a %.4f, b %.4f; want %.4f, %.4f", a.Share, b.Share, wantA, wantB)
	}
	var out bytes.Buffer
	if err := rep.WriteTeams(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"per team: mean JCT · share", "2.0h · 2.00", "2.0h · 0.00"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("teams table lacks %q:\n%s", want, out.String())
		}
	}
}

// TestPromise: what the replay reports of the quotas' promise on the
// hand-made trace (one 8-GPU node, a and b with a quota of 4 each). Under
// fifo, b's in-quota job waits behind a's borrowing job until it ends;
// berth reclaims, and b waits only the victim's grace.
func TestPromise(t *testing.T) {
	m := DefaultMapping()
	m.Quotas = map[string]int{"a": 4, "b": 4}
	rep := replayText(t, handTrace, oneNode, m)
	fifo, berth := rep.Policies[0], rep.Policies[3]
	start, grace := 5*time.Second, 30*time.Second
	// fifo: b asks at 10m and starts when a1 ends (2h + its start delay);
	// a, holding its quota throughout, always had its due.
	waited := 2*time.Hour + start - 10*time.Minute
	ran := start + 10*time.Minute
	if a, b := fifo.Teams[0], fifo.Teams[1]; a.EntitlementMet != 1 || math.Abs(b.EntitlementMet-ran.Seconds()/(waited+ran).Seconds()) > 1e-9 {
		t.Errorf("fifo: entitlement met a %.4f, b %.4f; want 1, %.4f", a.EntitlementMet, b.EntitlementMet, ran.Seconds()/(waited+ran).Seconds())
	}
	if want := 4 * (waited - grace).Hours(); math.Abs(fifo.Teams[1].QuotaDebt-want) > 1e-9 || fifo.QuotaDebt != fifo.Teams[1].QuotaDebt || fifo.Teams[0].QuotaDebt != 0 {
		t.Errorf("fifo: quota debt a %.4f, b %.4f, all %.4f GPU-hours; want 0, %.4f, %.4f", fifo.Teams[0].QuotaDebt, fifo.Teams[1].QuotaDebt, fifo.QuotaDebt, want, want)
	}
	if fifo.MinEntitlement != fifo.Teams[1].EntitlementMet {
		t.Errorf("fifo: least entitlement met %.4f, b's %.4f", fifo.MinEntitlement, fifo.Teams[1].EntitlementMet)
	}
	// berth: b reclaims a2 at once and waits out its grace, no longer.
	if want := ran.Seconds() / (grace + ran).Seconds(); math.Abs(berth.MinEntitlement-want) > 1e-9 || berth.QuotaDebt != 0 {
		t.Errorf("berth: least entitlement met %.4f, quota debt %.4f; want %.4f, 0", berth.MinEntitlement, berth.QuotaDebt, want)
	}
	// The waits split by quota at the first start: b's high job was in
	// its quota; of a's low jobs, a1 was and a2 borrowed.
	high, low := berth.QuotaWait[0], berth.QuotaWait[len(berth.QuotaWait)-1]
	if high.Tier != "high" || high.InQuota.Jobs != 1 || high.Borrowed.Jobs != 0 || high.InQuota.P99 != grace.Seconds() {
		t.Errorf("berth, high: %+v; want 1 job in quota that waited %s", high, grace)
	}
	if low.Tier != "low" || low.InQuota.Jobs != 1 || low.Borrowed.Jobs != 1 {
		t.Errorf("berth, low: %+v; want 1 job in quota, 1 borrowing", low)
	}
	var table, teams bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteTeams(&teams); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"entitlement met (least team)", "quota debt (GPU-hours)", "wait p99 high, in quota", "wait p99 high, borrowing"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	if want := fmt.Sprintf("%.3f · %d", fifo.Teams[1].EntitlementMet, int(fifo.Teams[1].QuotaDebt+0.5)); !strings.Contains(teams.String(), want) {
		t.Errorf("teams table lacks fifo's b, %q:\n%s", want, teams.String())
	}
}

// TestCohortMapping: --borrow-within-cohort sets the highest tier's
// borrowWithinCohort; a tier the replay does not have is an error.
func TestCohortMapping(t *testing.T) {
	jobs, err := Read(strings.NewReader(handTrace), "")
	if err != nil {
		t.Fatal(err)
	}
	m := DefaultMapping()
	m.CohortBelow = "high"
	wl, err := Map(jobs, 8, 8, m)
	if err != nil {
		t.Fatal(err)
	}
	for _, tier := range wl.Base.Tiers {
		b := tier.Spec.BorrowWithinCohort
		if top := tier.Meta.Name == "high"; top != (b != nil) || (top && b.Below != "high") {
			t.Errorf("tier %s: borrowWithinCohort %+v; want below high on the highest tier only", tier.Meta.Name, b)
		}
	}
	m.CohortBelow = "urgent"
	if _, err := Map(jobs, 8, 8, m); err == nil || !strings.Contains(err.Error(), `below tier "urgent": the replay's tiers are high, medium, low`) {
		t.Errorf("unknown tier: %v", err)
	}
}

// The timing is split by simulated month: each month a cycle fell in, in
// order, with its decisions; together they are all the replay's.
func TestTimingByMonth(t *testing.T) {
	// Two 8-GPU jobs of January take the node in turn: the first starts
	// at once and runs into February, where the second starts. A third
	// starts at once in March.
	const trace = `submit,duration,gpus,project,tier
2017-01-10T00:00:00Z,600h,8,a,low
2017-01-10T01:00:00Z,1h,8,a,low
2017-03-05T00:00:00Z,1h,8,a,low
`
	fifo, _ := PolicyByName("fifo")
	rep := replayText(t, trace, oneNode, DefaultMapping(), fifo)
	tm := rep.Policies[0].Timing
	var months []string
	cycles := 0
	for _, mo := range tm.Months {
		months = append(months, mo.Month)
		cycles += mo.Cycles
		if mo.Cycles > 0 && (mo.LoopMillis <= 0 || mo.DecideMillis < 0) {
			t.Errorf("%s: %d cycles, %v ms a decision, %v ms of replay a decision", mo.Month, mo.Cycles, mo.DecideMillis, mo.LoopMillis)
		}
	}
	if want := []string{"2017-01", "2017-02", "2017-03"}; fmt.Sprint(months) != fmt.Sprint(want) {
		t.Errorf("months %v, want %v", months, want)
	}
	if cycles != tm.Cycles() || slices.ContainsFunc(tm.Months, func(mo MonthTiming) bool { return mo.Cycles == 0 }) {
		t.Errorf("months %+v: %d cycles, want %d, some in each month", tm.Months, cycles, tm.Cycles())
	}
	// Each decision takes the workspace that waits, at least.
	var took int64
	for _, mo := range tm.Months {
		took += mo.Workspaces
		if mo.Workspaces < int64(mo.Cycles) {
			t.Errorf("%s: %d cycles took %d workspaces, want one a cycle at least", mo.Month, mo.Cycles, mo.Workspaces)
		}
	}
	if took != tm.Workspaces {
		t.Errorf("the months took %d workspaces, the replay %d", took, tm.Workspaces)
	}
}

// TestOrderingReported: berth's default attained-service ordering
// preempts on the sample, and the report counts those preemptions and
// the work they lost (part of all the work lost); no baseline orders,
// and berth with ordering off (Mapping.Service) does not either. Every
// policy's preemptions per job are reported.
func TestOrderingReported(t *testing.T) {
	if testing.Short() {
		t.Skip("replays the sample twice")
	}
	rep := sampleReport(t, 1)
	for _, p := range rep.Policies {
		if want := float64(p.Preemptions) / float64(p.Jobs); p.PreemptionsPerJob != want {
			t.Errorf("%s: %v preemptions per job, want %v", p.Name, p.PreemptionsPerJob, want)
		}
		if p.Name != "berth" {
			if p.OrderPreemptions != 0 || p.OrderLost != 0 {
				t.Errorf("%s: %d preemptions for ordering, %.1f GPU-h lost: a baseline never orders", p.Name, p.OrderPreemptions, p.OrderLost)
			}
			continue
		}
		if p.OrderPreemptions == 0 || p.OrderLost <= 0 || p.OrderLost > p.GPUHours.Lost || p.OrderPreemptions > p.Preemptions {
			t.Errorf("berth: %d of %d preemptions for ordering, %.1f of %.1f GPU-h lost: want some, within the totals", p.OrderPreemptions, p.Preemptions, p.OrderLost, p.GPUHours.Lost)
		}
	}
	jobs, err := ReadFile("testdata/philly-sample.csv", "")
	if err != nil {
		t.Fatal(err)
	}
	_, spec, m := sampleWorkload(t, 1)
	m.Service = &schema.ServicePolicy{}
	wl, err := MapCluster(jobs, *spec, m)
	if err != nil {
		t.Fatal(err)
	}
	off, err := Run(wl, *spec, m, Policies()[3:], Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p := off.Policies[0]; p.OrderPreemptions != 0 {
		t.Errorf("berth with ordering off: %d preemptions for ordering", p.OrderPreemptions)
	}
}

// TestRefilledHistory: refilling the history's maps (compactHistory) after
// every job removed gives the report of never refilling them.
func TestRefilledHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("replays the sample twice")
	}
	defer func(m, f int) { refillMin, refillFactor = m, f }(refillMin, refillFactor)
	refillMin, refillFactor = math.MaxInt, 0
	never := sampleReport(t, 1)
	refillMin = 0
	always := sampleReport(t, 1)
	for _, p := range always.Policies {
		if p.Preemptions == 0 && p.Name != "fifo" {
			t.Errorf("%s preempts nothing on the sample: the history's maps lose no entries to check", p.Name)
		}
	}
	if a, b := untimed(t, always), untimed(t, never); a != b {
		t.Errorf("refilling the history's maps changed the report")
	}
}

// TestCompactHistory: compactHistory keeps every entry of the history's
// maps.
func TestCompactHistory(t *testing.T) {
	at := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	a, b := schema.Ref{Project: "p", Name: "a"}, schema.Ref{Project: "p", Name: "b"}
	r := &replayer{hist: drivers.History{
		QueuedSince: map[schema.Ref]time.Time{a: at, b: at.Add(time.Hour)},
		Preempted:   map[schema.Ref]drivers.Preemption{a: {Victim: a, By: b, At: at}},
		Borrowing:   map[schema.Ref]bool{b: true},
		Ran:         map[schema.Ref]drivers.RunTime{a: {Ran: time.Hour}},
	}}
	want := drivers.History{
		QueuedSince: maps.Clone(r.hist.QueuedSince),
		Preempted:   maps.Clone(r.hist.Preempted),
		Borrowing:   maps.Clone(r.hist.Borrowing),
		Ran:         maps.Clone(r.hist.Ran),
	}
	r.removed = 5
	r.compactHistory()
	if diff := cmp.Diff(want, r.hist); diff != "" {
		t.Errorf("the history after compactHistory (-want +got):\n%s", diff)
	}
	if r.removed != 0 {
		t.Errorf("removed = %d after compactHistory, want 0", r.removed)
	}
	r.hist.Ran = nil // a policy that keeps no run times
	r.compactHistory()
	if r.hist.Ran != nil {
		t.Errorf("compactHistory made a nil Ran a map")
	}
}

// TestProgressDecided: each policy's progress reports count the cycles
// it decided as they go, and its last, Finished, counts them all, as its
// timing does.
func TestProgressDecided(t *testing.T) {
	var mu sync.Mutex
	last := map[string]Progress{}
	rep := sampleReportWith(t, 1, Options{Parallel: 2, Progress: func(p Progress) {
		mu.Lock()
		defer mu.Unlock()
		if prev, ok := last[p.Policy]; ok && (prev.Finished || p.Decided < prev.Decided) {
			t.Errorf("%s: %+v after %+v", p.Policy, p, prev)
		}
		last[p.Policy] = p
	}})
	for _, p := range rep.Policies {
		got := last[p.Name]
		if !got.Finished || got.Decided != p.Timing.Cycles() || got.Decided == 0 {
			t.Errorf("%s: last progress %+v, want Finished with its %d cycles", p.Name, got, p.Timing.Cycles())
		}
	}
}
