package replay

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const fullTrace = "../traces/philly-pollux/philly.csv.gz"

// BenchmarkSimulate replays the whole Philly trace under the four
// policies, and prints the table. BERTH_SIM_LIMIT replays the first jobs
// only, BERTH_SIM_POLICY one policy, BERTH_SIM_VERIFY checks every Nth
// narrowed decision (Options.Verify).
func BenchmarkSimulate(b *testing.B) {
	if _, err := os.Stat(fullTrace); err != nil {
		b.Skip("no Philly trace at " + fullTrace)
	}
	pols := benchPolicies(b)
	defer LimitGC()()
	for b.Loop() {
		start := time.Now()
		jobs, err := ReadFile(fullTrace, "")
		if err != nil {
			b.Fatal(err)
		}
		if n, err := strconv.Atoi(os.Getenv("BERTH_SIM_LIMIT")); err == nil && n > 0 {
			jobs = jobs[:min(n, len(jobs))]
		}
		opt := Options{Parallel: 2}
		opt.Verify, _ = strconv.Atoi(os.Getenv("BERTH_SIM_VERIFY"))
		_, rep := replayTimed(b, jobs, pols, opt)
		rep.WriteTable(os.Stdout)
		for _, p := range rep.Policies {
			b.Logf("%s: %+v", p.Name, p.Timing)
		}
		b.Logf("wall %s", time.Since(start))
	}
}

// benchPolicies is the four policies, or the one BERTH_SIM_POLICY names.
func benchPolicies(b *testing.B) []Policy {
	name := os.Getenv("BERTH_SIM_POLICY")
	if name == "" {
		return Policies()
	}
	p, ok := PolicyByName(name)
	if !ok {
		b.Fatalf("BERTH_SIM_POLICY=%s: no such policy", name)
	}
	return []Policy{p}
}

// BenchmarkSimulateYear replays the Philly trace as shipped, then the
// same trace three times end to end (each copy 110 days after the one
// before: a year of history; each job of each copy in the tier the
// single trace draws for it), then the single trace again, under the
// four policies as berth simulate does, and prints the wall time of
// each, the year's ratio to the single trace's mean and the peak RSS
// (issue 40: at most 3.3 times the single trace, at most 6 minutes on 2
// cores, at most 1 GiB), then, per policy, the replay's wall and CPU time
// over each copy's 110 days and over each quarter of a copy, and its CPU
// time a decision in each quarter (the same work a copy later, against
// the single trace's same quarter), and its time per decision by
// simulated month (which follows the load: the single trace's months
// differ as much). BERTH_SIM_POLICY replays one policy only.
func BenchmarkSimulateYear(b *testing.B) {
	if _, err := os.Stat(fullTrace); err != nil {
		b.Skip("no Philly trace at " + fullTrace)
	}
	jobs, err := ReadFile(fullTrace, "")
	if err != nil {
		b.Fatal(err)
	}
	const every = 110 * 24 * time.Hour
	jobs = drawnTiers(b, jobs)
	year := tile(jobs, 3, every)
	pols := benchPolicies(b)
	defer LimitGC()()
	for b.Loop() {
		// The single trace is replayed before the year and again after it,
		// and the ratio taken against the mean of the two: this machine's
		// speed drifts by 15-25% over minutes, and one replay of the single
		// trace on either side of the year moved the ratio by as much.
		cpu0 := cpuTime()
		before := newSpanClock(jobs[0].Submit, every/phases, phases)
		single1, srep := replayTimed(b, jobs, pols, Options{Parallel: 2, Progress: before.progress})
		cpu1 := cpuTime()
		spans := newSpanClock(year[0].Submit, every/phases, 3*phases)
		tiled, rep := replayTimed(b, year, pols, Options{Parallel: 2, Progress: spans.progress})
		cpu2 := cpuTime()
		after := newSpanClock(jobs[0].Submit, every/phases, phases)
		single2, _ := replayTimed(b, jobs, pols, Options{Parallel: 2, Progress: after.progress})
		cpu3 := cpuTime()
		single, singleCPU := (single1+single2)/2, ((cpu1-cpu0)+(cpu3-cpu2))/2
		fmt.Printf("the Philly trace, %d jobs: %.1fs wall, %.1f CPU-s before the year; %.1fs, %.1f CPU-s after it\n", len(jobs),
			single1.Seconds(), (cpu1 - cpu0).Seconds(), single2.Seconds(), (cpu3 - cpu2).Seconds())
		fmt.Printf("three times over, %d jobs over %.0f days: %.1fs wall, %.1f CPU-s, %.2f× the single trace's mean wall (%.2f× its CPU; %.2f× and %.2f× its walls before and after), peak RSS %s\n",
			len(year), rep.Trace.Last.Sub(rep.Trace.First).Hours()/24, tiled.Seconds(), (cpu2 - cpu1).Seconds(),
			tiled.Seconds()/single.Seconds(), (cpu2-cpu1).Seconds()/singleCPU.Seconds(), tiled.Seconds()/single1.Seconds(), tiled.Seconds()/single2.Seconds(), peakRSS())
		for _, p := range srep.Policies {
			fmt.Printf("  %-5s the single trace's replay: %.1f / %.1f s wall, its own CPU %.1f / %.1f s (before / after)\n", p.Name,
				sum(before.walls[p.Name]), sum(after.walls[p.Name]), sum(before.cpus[p.Name]), sum(after.cpus[p.Name]))
		}
		for i, p := range rep.Policies {
			// The load decided over, against the single trace's: the same
			// work three times over takes three times the workspaces.
			st, yt := srep.Policies[i].Timing, p.Timing
			fmt.Printf("  %-5s its decisions took %.1f M workspaces in %.1f s of deciding, the single trace's %.1f M in %.1f s before the year: %.2f× the workspaces, %.2f× the time, %.2f× the decisions\n", p.Name,
				float64(yt.Workspaces)/1e6, yt.TotalSeconds, float64(st.Workspaces)/1e6, st.TotalSeconds,
				float64(yt.Workspaces)/float64(st.Workspaces), yt.TotalSeconds/st.TotalSeconds, float64(yt.Cycles())/float64(st.Cycles()))
			walls, cpus := spans.walls[p.Name], spans.cpus[p.Name]
			fmt.Printf("  %-5s replay seconds by copy, wall:%s; its own CPU:%s\n", p.Name, spread(byCopy(walls), "%.1f"), spread(byCopy(cpus), "%.1f"))
			// The same simulated work a copy later: each phase of the
			// trace, in the single trace's two replays and in each copy.
			fmt.Printf("        its own CPU by %.1f-day phase, the single trace before and after, then each copy:", every.Hours()/24/phases)
			for k := range phases {
				fmt.Printf(" |%s", spread([]float64{before.cpus[p.Name][k], after.cpus[p.Name][k], cpus[k], cpus[phases+k], cpus[2*phases+k]}, "%.1f"))
			}
			fmt.Println()
			// Its cost a decision, phase by phase likewise: the per-month
			// criterion, the same month of work a copy later.
			fmt.Printf("        its own CPU ms a decision by phase, likewise:")
			for k := range phases {
				fmt.Printf(" |%s", spread([]float64{before.perCycle(p.Name, k), after.perCycle(p.Name, k), spans.perCycle(p.Name, k), spans.perCycle(p.Name, phases+k), spans.perCycle(p.Name, 2*phases+k)}, "%.3f"))
			}
			fmt.Println()
			var months []float64
			for _, mo := range p.Timing.Months {
				if mo.Cycles >= 1000 { // fewer are too few to time
					months = append(months, mo.LoopMillis)
				}
			}
			fmt.Printf("        ms of replay a decision by month:%s\n", spread(months, "%.2f"))
		}
	}
}

// phases is how many spans of simulated time BenchmarkSimulateYear
// times in each copy of the trace.
const phases = 4

// byCopy sums the year's spans (phases to a copy) by copy.
func byCopy(spans []float64) []float64 {
	var out []float64
	for k := 0; k < len(spans); k += phases {
		out = append(out, sum(spans[k:k+phases]))
	}
	return out
}

func sum(xs []float64) float64 {
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t
}

// spanClock times each policy's replay over n spans of simulated time,
// every long from first (the last to the end), through Options.Progress:
// its wall time (the policy replayed beside it included), and its CPU
// time, its own alone: at its first report, the goroutine replaying the
// policy is locked to its thread, whose CPU time is then the policy's
// (with the collection work it assists; not the collector's own).
type spanClock struct {
	mu     sync.Mutex
	first  time.Time
	every  time.Duration
	n      int
	span   map[string]int        // each policy's current span
	began  map[string][2]float64 // when it began: wall and CPU seconds
	walls  map[string][]float64  // the wall seconds of each span (n)
	cpus   map[string][]float64  // the CPU seconds of each span (n)
	cycle  map[string]int        // the cycles decided when its span began
	cycles map[string][]int      // the cycles decided in each span (n)
}

func newSpanClock(first time.Time, every time.Duration, n int) *spanClock {
	return &spanClock{first: first, every: every, n: n, span: map[string]int{}, began: map[string][2]float64{},
		walls: map[string][]float64{}, cpus: map[string][]float64{}, cycle: map[string]int{}, cycles: map[string][]int{}}
}

func (c *spanClock) progress(p Progress) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := min(int(p.Now.Sub(c.first)/c.every), c.n-1)
	if _, ok := c.began[p.Policy]; !ok {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		c.span[p.Policy], c.began[p.Policy] = k, [2]float64{wallSeconds(), threadCPU()}
		c.walls[p.Policy], c.cpus[p.Policy], c.cycles[p.Policy] = make([]float64, c.n), make([]float64, c.n), make([]int, c.n)
		return
	}
	if k > c.span[p.Policy] || p.Finished {
		// Reports come every 2048 decisions: a span they skip over is
		// counted with the one before it, and stays 0.
		now, b, at := [2]float64{wallSeconds(), threadCPU()}, c.began[p.Policy], c.span[p.Policy]
		c.walls[p.Policy][at] += now[0] - b[0]
		c.cpus[p.Policy][at] += now[1] - b[1]
		c.cycles[p.Policy][at] += p.Decided - c.cycle[p.Policy]
		c.span[p.Policy], c.began[p.Policy], c.cycle[p.Policy] = k, now, p.Decided
	}
}

// perCycle is the CPU milliseconds a cycle decided in pol's span k took.
func (c *spanClock) perCycle(pol string, k int) float64 {
	return 1000 * c.cpus[pol][k] / float64(max(c.cycles[pol][k], 1))
}

// wallSeconds is the wall clock in seconds.
func wallSeconds() float64 { return float64(time.Now().UnixNano()) / 1e9 }

// threadCPU is the CPU seconds the calling thread has used (Linux's
// RUSAGE_THREAD), or 0.
func threadCPU() float64 {
	const rusageThread = 1
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// spread writes xs in format f, then the largest over the smallest.
func spread(xs []float64, f string) string {
	var out strings.Builder
	for _, x := range xs {
		fmt.Fprintf(&out, " "+f, x)
	}
	if len(xs) > 0 {
		fmt.Fprintf(&out, " (max/min %.2f)", slices.Max(xs)/slices.Min(xs))
	}
	return out.String()
}

// drawnTiers gives each job the tier the mapping draws for it in jobs, as
// the trace's own: the mapping draws each project's tiers over all its
// jobs, so copies of a trace drawn together would each be another draw,
// another workload (berth decided over 11% more workspaces a decision,
// the Philly trace three times against the trace alone), where copies of
// the trace with its tiers are its own work again.
func drawnTiers(b *testing.B, jobs []Job) []Job {
	wl, err := MapCluster(jobs, DefaultCluster(), DefaultMapping())
	if err != nil {
		b.Fatal(err)
	}
	tier := make(map[string]string, len(wl.Jobs))
	for _, j := range wl.Jobs {
		tier[j.ID] = j.Tier
	}
	out := slices.Clone(jobs)
	for i := range out {
		out[i].Tier = tier[out[i].ID]
	}
	return out
}

// tile is n copies of jobs end to end, each shifted by every after the
// one before, numbered in submit order as Read numbers a trace.
func tile(jobs []Job, n int, every time.Duration) []Job {
	out := make([]Job, 0, n*len(jobs))
	for k := range n {
		for _, j := range jobs {
			j.Submit = j.Submit.Add(time.Duration(k) * every)
			out = append(out, j)
		}
	}
	slices.SortStableFunc(out, func(a, b Job) int { return a.Submit.Compare(b.Submit) })
	number(out)
	return out
}

// replayTimed maps jobs onto the default cluster and replays them under
// pols (two at a time, as berth simulate does on 2 cores, is Parallel 2).
func replayTimed(b *testing.B, jobs []Job, pols []Policy, opt Options) (time.Duration, *Report) {
	start := time.Now()
	spec := DefaultCluster()
	m := DefaultMapping()
	wl, err := MapCluster(jobs, spec, m)
	if err != nil {
		b.Fatal(err)
	}
	rep, err := Run(wl, spec, m, pols, opt)
	if err != nil {
		b.Fatal(err)
	}
	return time.Since(start), rep
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakRSS is this process's peak resident memory (VmHWM), or "?".
func peakRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// TestShippedTrace: the trace in traces/ is the file its PROVENANCE.md
// describes, and it reads compressed as it is.
func TestShippedTrace(t *testing.T) {
	f, err := os.Open(fullTrace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, zr); err != nil {
		t.Fatal(err)
	}
	const want = "ebffb3dd1589bdf4e7bcd74496201c5ded1d557d498ee14f560463f37ec353da"
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		t.Errorf("decompressed sha256 %s, want %s (traces/PROVENANCE.md)", got, want)
	}
	jobs, err := ReadFile(fullTrace, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 82247 {
		t.Errorf("%d jobs, want 82,247", len(jobs))
	}
}
