package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/replay"
	"github.com/berth-dev/berth/schema"
	"github.com/spf13/cobra"
)

func newSimulateCmd() *cobra.Command {
	var o simulateOptions
	cmd := &cobra.Command{
		Use:   "simulate --trace FILE [--trace FILE...]",
		Short: "Replay a job trace under FIFO, Nomad, a Kueue-like quota scheduler and berth, side by side",
		Long: `simulate replays a GPU job trace through the simulated cluster under several
scheduling policies, each on a fresh copy of the same cluster, and reports how
each did: utilization, job completion time, waiting per tier, starvation,
preemptions, GPU-hours lost, fairness and decision time.

Policies (--policies, in this order by default):
  fifo    one queue in submit order, first-fit, no priorities, no preemption
  nomad   Nomad's native scheduler: priority order, bin-packing, preemption
          of whole allocations at least 10 priority points lower; no quotas,
          no checkpoint awareness
  quota   Kueue-like: guaranteed quotas, borrowing, reclaim from borrowers,
          priority within a project; no fair share, no aging
  berth   berth's decision engine

Traces (--format, detected from each file's header when not given):
  philly  the Pollux extract of the Microsoft Philly trace
          (timestamp,duration,num_gpus,gpu_time,cluster)
  csv     berth's generic format, one job a line after a header:
            submit,duration,gpus,project[,tier][,checkpoint][,gpu_kind]
          submit: RFC 3339 time or seconds from the start; duration and
          checkpoint: seconds or a Go duration (90m); tier and checkpoint
          may be empty for the mapping to fill; gpu_kind names the GPU
          kind the job runs on (empty: any whole GPU)

A longer history kept in several files (a month an export) replays as one
trace: give --trace for each file, in any order (--trace jan.csv --trace
feb.csv; in bash, --trace=2024-{01..12}.csv repeats the flag for you, but
a glob does not: --trace *.csv leaves all but the first file as stray
arguments, which simulate refuses). The files' jobs are merged by submit
time (ties: the files' order, then line order) and numbered over the
whole; each file's format is detected from its own header unless
--format is given. A CSV submit in seconds counts from the same start in
every file: files that follow each other want RFC 3339 times.

Mapping from trace to specs (stated again in every report):
  - each trace project (a Philly virtual cluster, or the CSV's project
    column) becomes one berth project, a team; its guaranteed quota is
    proportional to its share of the trace's GPU-time, the quotas adding
    up to the cluster; borrowing is unlimited
  - each job's tier is its workspace's own (spec.tier): the CSV's tier
    column where it has one; else, of each project's jobs, a seeded draw
    (--seed) makes exactly 10% high (80), 30% medium (50), 60% low (20)
  - jobs over an hour save a checkpoint every 30 minutes, shorter ones
    never; a preempted job gets 30s of grace but does not checkpoint on the
    signal, so it loses the work since its last save
  - a job of more than 8 GPUs is a gang of 8-GPU replicas (rounded up)
  - jobs that can never fit the cluster are skipped and counted

The cluster (--cluster) is a simulated cluster file (kind: Cluster); the
default is 64 nodes of 8 GPUs in 2 NVLink domains each (512 GPUs).

GPU kinds: a node's GPUs may be of several models, MIG instances among
them, named as the NVIDIA plugin names their device groups ("NVIDIA
A100-SXM4-80GB MIG 1g.10gb"). The kinds a trace's gpu_kind names are the
cluster file's (spec.kinds: a name and a match each, as GPUKind documents
declare them, "*" standing for any run of characters), or, where it
declares none, one per model, named by the model. A job of a kind runs on
that kind's GPUs alone under every policy (berth's, as the workspace's
resources.gpuKind), a job of none on any whole GPU, never a MIG instance;
quotas stay in quota.gpus, over every kind. A kind the cluster has no GPU
of is an error naming the job and its line. Where the cluster has several
kinds, or the trace names one, the report adds each kind's utilization:
its GPUs, GPU-hours busy (held by jobs) over available, and its
GPU-equivalents where they differ (a 1g.10gb instance counts 1/7).

The replay is event-driven: the clock jumps to the next arrival, completion
or end of a preemption grace, and policies decide only then, and only when
some job waits (a policy that never preempts: only when a waiting job fits
the free GPUs). Where a policy's own rules make it exact, it decides on a
narrowed queue: strict FIFO on the first jobs only (no more can start than
GPUs are free), and any policy first on one waiting job per class (same
project, shape and checkpoint interval); when none of those can start or
preempt, neither can the rest, and no decision on the whole queue is
needed. --verify N checks every Nth narrowed decision against the whole
queue and reports how many differed (0 is the only right answer).
--tick makes policies decide at most once per tick, as a reconciler loop
would: faster on long traces, at the cost of up to a tick of extra wait
per start. --policies berth replays berth alone, and --policies quota,berth
berth beside the quota baseline, when the other baselines are not needed:
quicker on a long history. A progress bar goes to stderr when it is a terminal;
when it is not (a CI job's log), a line every minute says how far each
policy is, and a replay done within the first minute writes none. A
replay's cost grows with its jobs, not with its history: a year of the
Philly trace (the trace three times end to end, each copy in the
single trace's tiers) takes about 3 times the single trace (3.0 to 3.5
on a shared machine), 4 to 6 minutes on 2 cores. The JSON report's timing
has each policy's cost per decision by simulated month (timing.months),
so a slowdown over the simulated time shows, beside the workspaces its
decisions took (timing.workspaces, and each month's): the load that
cost follows.

--teams adds a table of who paid for each policy's figures: per team, its
mean completion time and its share, its GPUs held over what its quota (or
its demand, when smaller) entitles it to, averaged while jobs waited. The
Jain index is computed over those same shares at each moment. A second
table says how each policy kept the quotas' promise, team by team:
entitlement met, the time-average of min(1, GPUs held ÷ what its quota
entitles it to) while it is entitled to anything (its GPUs held plus its
waiting jobs that each fit in what its quota has left, at most the
quota), and quota debt, the GPU-hours its in-quota demand waited while
other teams held borrowed GPUs, beyond the reclaim grace. The main table
has the least entitlement met over the teams, the debt summed, and the
top tier's p99 wait split by whether a job was inside its team's quota
at its first start.`,
		Example: `  berth simulate --trace traces/philly-pollux/philly.csv.gz
  berth simulate --trace philly.csv --window 168h --output html --html report.html
  berth simulate --trace traces/philly-pollux/philly.csv.gz --limit 20000 --policies quota,berth --teams
  berth simulate --trace 2024-01.csv --trace 2024-02.csv --trace 2024-03.csv --policies berth
  berth simulate --trace mine.csv --cluster cluster.yaml --policies fifo,berth --output json`,
		Args: noStrayTraces,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSimulate(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.traces, "trace", nil, "a job trace `FILE` to replay (required); repeat the flag for several files, replayed as one trace (--trace jan.csv --trace feb.csv)")
	f.StringVar(&o.format, "format", "", "trace format of every file: philly or csv (default: detected from each file's header)")
	f.StringVar(&o.clusterPath, "cluster", "", "simulated cluster file (default: 64 nodes × 8 GPUs, 2 NVLink domains each)")
	f.StringVar(&o.policyList, "policies", "fifo,nomad,quota,berth", "policies to compare, comma-separated, in report order")
	f.Uint64Var(&o.seed, "seed", 1, "seed of the tier draw")
	f.DurationVar(&o.maxWait, "max-wait", schema.DefaultPolicy().Spec.Aging.MaxWait, "berth's wait bound in the replay: aging.maxWait (0: off)")
	f.DurationVar(&o.maxRuntime, "max-runtime", 0, "a time limit on every job, as each tier's maxRuntime (0: none): a job that has run it, over all its runs, is stopped with its grace and does not run again, under every policy")
	f.StringVar(&o.service, "service", "", "berth's attained-service ordering in place of the default policy's: steps in GPU-hours and the promotion knob, such as 2,8,32/8, or off")
	f.StringVar(&o.cohortBelow, "borrow-within-cohort", "", "let berth's highest tier take other teams' in-quota work of tiers below this one (its borrowWithinCohort opt-in; off by default)")
	f.StringVar(&o.output, "output", "table", "report format: table, json or html")
	f.StringVar(&o.htmlPath, "html", "", "also write the HTML report to this file")
	f.BoolVar(&o.teams, "teams", false, "after the table, each team's mean JCT and its GPUs held over what its quota entitles it to (the JSON and HTML reports always have them)")
	f.IntVar(&o.limit, "limit", 0, "replay only the first N jobs (by submit time)")
	f.DurationVar(&o.window, "window", 0, "replay only the jobs submitted within this long of the first (e.g. 168h)")
	f.DurationVar(&o.tick, "tick", 0, "let policies decide at most every TICK of simulated time, as a reconciler loop would (faster; 0: at every event)")
	f.IntVar(&o.verify, "verify", 0, "decide on the whole queue as well every Nth decision taken on a narrowed one, and count differences (0: never)")
	f.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the replay to this file (go tool pprof)")
	return cmd
}

// simulateOptions are berth simulate's flags.
type simulateOptions struct {
	// traces are the trace files, one per --trace, replayed as one.
	traces                                            []string
	format, clusterPath, policyList, output, htmlPath string
	cohortBelow, cpuProfile, service                  string
	seed                                              uint64
	limit, verify                                     int
	window, tick, maxWait, maxRuntime                 time.Duration
	teams                                             bool
	// progressEvery is how often a line of progress goes to a stderr
	// that is no terminal (0: every minute); tests set it short.
	progressEvery time.Duration
}

// noStrayTraces refuses arguments, as cobra.NoArgs does, but says how
// to give several trace files: a shell glob after --trace (--trace
// *.csv) leaves every file but the first as an argument.
func noStrayTraces(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected argument %q: simulate takes none; give each trace file its own --trace (--trace a.csv --trace b.csv)", args[0])
	}
	return nil
}

// runSimulate is berth simulate's body: check the command line, read the
// cluster and the trace, map the trace's jobs to workspaces, replay them
// under each policy, and write the report.
func runSimulate(cmd *cobra.Command, o simulateOptions) error {
	// 1. The command line.
	pols, err := o.check()
	if err != nil {
		return err
	}

	// 2. The cluster and the jobs, mapped to berth's specs.
	spec, err := o.readCluster()
	if err != nil {
		return err
	}
	jobs, err := o.readJobs()
	if err != nil {
		return err
	}
	m := replay.DefaultMapping()
	m.Seed = o.seed
	m.MaxWait = o.maxWait
	m.CohortBelow = o.cohortBelow
	m.MaxRuntime = o.maxRuntime
	if o.service != "" {
		sp, err := schema.ParseServicePolicy(o.service)
		if err != nil {
			return &exitError{Code: exitUsage, Err: err}
		}
		m.Service = &sp
	}
	wl, err := replay.MapCluster(jobs, spec, m)
	if err != nil {
		return &exitError{Code: exitFailure, Err: err}
	}

	// 3. The replay, with the garbage collector set for it.
	defer replay.LimitGC()()
	if o.cpuProfile != "" {
		stop, err := startCPUProfile(o.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	rep, err := o.replay(cmd.ErrOrStderr(), wl, spec, m, pols)
	if err != nil {
		return err
	}
	rep.Trace.Name = o.traceName()

	// 4. The report.
	return o.writeReport(cmd.OutOrStdout(), rep)
}

// check reports a wrong command line as a usage error; it returns the
// policies --policies names, in its order.
func (o *simulateOptions) check() ([]replay.Policy, error) {
	if len(o.traces) == 0 {
		return nil, usagef("--trace is required")
	}
	if slices.Contains(o.traces, "") {
		return nil, usagef("--trace: an empty file name")
	}
	switch o.output {
	case "table", "json", "html":
	default:
		return nil, usagef("--output %q: want table, json or html", o.output)
	}
	switch o.format {
	case "", "philly", "csv":
	default:
		return nil, usagef("--format %q: want philly or csv", o.format)
	}
	var pols []replay.Policy
	for _, name := range strings.Split(o.policyList, ",") {
		p, ok := replay.PolicyByName(strings.TrimSpace(name))
		if !ok {
			return nil, usagef("--policies: unknown policy %q: want fifo, nomad, quota or berth", name)
		}
		pols = append(pols, p)
	}
	if o.limit < 0 || o.window < 0 || o.tick < 0 || o.verify < 0 || o.maxWait < 0 {
		return nil, usagef("--limit, --window, --tick, --verify and --max-wait must not be negative")
	}
	return pols, nil
}

// readCluster reads --cluster; without it, the default cluster.
func (o *simulateOptions) readCluster() (sim.Spec, error) {
	spec := replay.DefaultCluster()
	if o.clusterPath != "" {
		s, err := sim.ReadFile(o.clusterPath)
		if err != nil {
			return sim.Spec{}, &exitError{Code: exitFailure, Err: err}
		}
		spec = *s
	}
	return spec, nil
}

// traceName names the replayed trace in the report: its file, or its
// files joined with ", " in the order given.
func (o *simulateOptions) traceName() string {
	return strings.Join(o.traces, ", ")
}

// readJobs reads the trace's jobs, its files' merged, cut to --window and
// --limit; none left is an error.
func (o *simulateOptions) readJobs() ([]replay.Job, error) {
	jobs, err := replay.ReadFiles(o.traces, replay.Format(o.format))
	if err != nil {
		return nil, &exitError{Code: exitFailure, Err: err}
	}
	if o.window > 0 && len(jobs) > 0 {
		end := jobs[0].Submit.Add(o.window)
		k := 0
		for k < len(jobs) && jobs[k].Submit.Before(end) {
			k++
		}
		jobs = jobs[:k]
	}
	if o.limit > 0 && o.limit < len(jobs) {
		jobs = jobs[:o.limit]
	}
	if len(jobs) == 0 {
		return nil, &exitError{Code: exitFailure, Err: fmt.Errorf("%s: no jobs to replay", o.traceName())}
	}
	return jobs, nil
}

// replay runs the workload under each policy, with a progress bar on
// stderr when it is a terminal, else a line of progress every
// progressEvery (a minute).
func (o *simulateOptions) replay(stderr io.Writer, wl *replay.Workload, spec sim.Spec, m replay.Mapping, pols []replay.Policy) (*replay.Report, error) {
	opt := replay.Options{Parallel: runtime.GOMAXPROCS(0), Tick: o.tick, Verify: o.verify}
	var bar *progressBar
	if isTerminal(stderr) {
		bar = newProgressBar(stderr, pols, wl)
		opt.Progress = bar.update
	} else {
		every := o.progressEvery
		if every <= 0 {
			every = time.Minute
		}
		pl := newProgressLog(stderr, pols, time.Now())
		opt.Progress = pl.update
		t := time.NewTicker(every)
		stop := pl.start(t.C)
		defer func() { t.Stop(); stop() }()
	}
	rep, err := replay.Run(wl, spec, m, pols, opt)
	if bar != nil {
		bar.finish()
	}
	if err != nil {
		return nil, &exitError{Code: exitFailure, Err: err}
	}
	return rep, nil
}

// writeReport writes the HTML report to --html when given, then the
// report as --output asks (with --teams, the teams' table after the
// policies').
func (o *simulateOptions) writeReport(out io.Writer, rep *replay.Report) error {
	if o.htmlPath != "" {
		f, err := os.Create(o.htmlPath)
		if err != nil {
			return &exitError{Code: exitFailure, Err: err}
		}
		if err := rep.WriteHTML(f); err != nil {
			f.Close()
			return &exitError{Code: exitFailure, Err: err}
		}
		if err := f.Close(); err != nil {
			return &exitError{Code: exitFailure, Err: err}
		}
	}
	switch o.output {
	case "json":
		return rep.WriteJSON(out)
	case "html":
		if o.htmlPath != "" {
			fmt.Fprintf(out, "wrote %s\n", o.htmlPath)
			return nil
		}
		return rep.WriteHTML(out)
	}
	if err := rep.WriteTable(out); err != nil || !o.teams {
		return err
	}
	fmt.Fprintln(out)
	return rep.WriteTeams(out)
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progressBar draws one line per policy on a terminal: simulated time and
// jobs done.
type progressBar struct {
	mu     sync.Mutex
	w      io.Writer
	names  []string
	state  map[string]string
	total  int
	start  time.Time
	end    time.Time
	drawn  bool
	lastAt time.Time
}

func newProgressBar(w io.Writer, pols []replay.Policy, wl *replay.Workload) *progressBar {
	b := &progressBar{w: w, state: map[string]string{}, total: len(wl.Jobs)}
	for _, p := range pols {
		b.names = append(b.names, p.Name)
		b.state[p.Name] = "waiting"
	}
	if len(wl.Jobs) > 0 {
		b.start, b.end = wl.Jobs[0].Submit, wl.Jobs[len(wl.Jobs)-1].Submit
	}
	return b
}

func (b *progressBar) update(p replay.Progress) {
	b.mu.Lock()
	defer b.mu.Unlock()
	frac := float64(p.Done) / float64(max(p.Total, 1))
	const width = 24
	n := int(frac * width)
	b.state[p.Policy] = fmt.Sprintf("[%s%s] %3.0f%%  %s  %d/%d jobs", strings.Repeat("#", n), strings.Repeat(".", width-n), frac*100, p.Now.UTC().Format("2006-01-02 15:04"), p.Done, p.Total)
	if p.Finished {
		b.state[p.Policy] += "  done"
	}
	if time.Since(b.lastAt) < 100*time.Millisecond && !p.Finished {
		return
	}
	b.lastAt = time.Now()
	b.draw()
}

func (b *progressBar) draw() {
	if b.drawn {
		fmt.Fprintf(b.w, "\x1b[%dA", len(b.names))
	}
	for _, name := range b.names {
		fmt.Fprintf(b.w, "\x1b[2K%-6s %s\n", name, b.state[name])
	}
	b.drawn = true
}

func (b *progressBar) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.draw()
}

// progressLog writes a line of progress to a stderr that is no terminal
// (a CI job's log) at each tick: the wall time since the replay began,
// then each policy's share of its jobs done, with the simulated day and
// the jobs done of all:
//
//	simulate: 3m00s: fifo 41% (2017-11-20, 101,234/246,741 jobs), nomad done, quota waiting, berth 12% (…)
type progressLog struct {
	mu    sync.Mutex
	w     io.Writer
	names []string
	state map[string]replay.Progress // each policy's last report
	began time.Time
}

// newProgressLog returns a progressLog for pols, replayed from began
// (wall clock).
func newProgressLog(w io.Writer, pols []replay.Policy, began time.Time) *progressLog {
	l := &progressLog{w: w, state: map[string]replay.Progress{}, began: began}
	for _, p := range pols {
		l.names = append(l.names, p.Name)
	}
	return l
}

// update is the replay's Progress: it keeps the policy's last report
// for the next line.
func (l *progressLog) update(p replay.Progress) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.state[p.Policy] = p
}

// line is the line of progress at the wall time at.
func (l *progressLog) line(at time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	parts := make([]string, len(l.names))
	for i, name := range l.names {
		p, ok := l.state[name]
		switch {
		case !ok: // not started: the policies replay a few at a time
			parts[i] = name + " waiting"
		case p.Finished:
			parts[i] = name + " done"
		default:
			parts[i] = fmt.Sprintf("%s %d%% (%s, %s/%s jobs)", name, p.Done*100/max(p.Total, 1), p.Now.UTC().Format("2006-01-02"), thousands(int64(p.Done)), thousands(int64(p.Total)))
		}
	}
	return fmt.Sprintf("simulate: %s: %s", elapsed(at.Sub(l.began)), strings.Join(parts, ", "))
}

// start writes a line at each tick until the returned stop is called,
// which waits for a line being written. The ticks are a time.Ticker's,
// whose first comes an interval in: a replay done sooner writes none.
func (l *progressLog) start(ticks <-chan time.Time) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-done:
				return
			case at := <-ticks:
				fmt.Fprintln(l.w, l.line(at))
			}
		}
	}()
	return func() { close(done); <-finished }
}

// elapsed writes a wall-clock duration to the second, minutes and
// seconds always: 3m00s, 1h02m05s.
func elapsed(d time.Duration) string {
	d = max(d.Round(time.Second), 0)
	h, m, s := d/time.Hour, d%time.Hour/time.Minute, d%time.Minute/time.Second
	if h > 0 {
		return fmt.Sprintf("%dh%02dm%02ds", h, m, s)
	}
	return fmt.Sprintf("%dm%02ds", m, s)
}
