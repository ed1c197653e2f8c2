package replay

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/schema"
)

// Report is the outcome of one replay under several policies. Everything
// but each policy's Timing is a function of the trace, the cluster, the
// mapping and the seed.
type Report struct {
	Trace   TraceInfo   `json:"trace"`
	Cluster ClusterInfo `json:"cluster"`
	Mapping Mapping     `json:"mapping"`
	// Tick is how often policies could decide (0: at every event).
	Tick     time.Duration  `json:"tick"`
	Projects []ProjectInfo  `json:"projects"`
	Policies []PolicyResult `json:"policies"`
}

// TraceInfo describes the replayed jobs.
type TraceInfo struct {
	Name    string    `json:"name,omitempty"`
	Jobs    int       `json:"jobs"`
	Skipped int       `json:"skipped"`
	First   time.Time `json:"firstSubmit"`
	Last    time.Time `json:"lastSubmit"`
	// GPUHours is the work the jobs ask for.
	GPUHours float64 `json:"gpuHours"`
	// ProjectsGiven: the trace named its projects (a CSV's project
	// column) rather than Philly's virtual clusters; TiersGiven counts
	// the jobs whose tier the trace gave (the rest are drawn).
	ProjectsGiven bool `json:"projectsGiven"`
	TiersGiven    int  `json:"tiersGiven"`
	// KindsGiven counts the jobs whose GPU kind the trace gave (its
	// gpu_kind column).
	KindsGiven int `json:"kindsGiven,omitempty"`
}

// ClusterInfo describes the simulated cluster.
type ClusterInfo struct {
	Name  string `json:"name"`
	Nodes int    `json:"nodes"`
	GPUs  int    `json:"gpus"`
	// Kinds are its GPU kinds, where the report tells them apart (the
	// cluster has several, or the trace names one); KindsDeclared: the
	// cluster file declares them, else they are its models.
	Kinds         []KindInfo `json:"kinds,omitempty"`
	KindsDeclared bool       `json:"kindsDeclared,omitempty"`
}

// PolicyResult is how one policy did. Durations are in seconds.
type PolicyResult struct {
	Name       string `json:"name"`
	Rule       string `json:"rule"`
	Jobs       int    `json:"jobs"`
	Completed  int    `json:"completed"`
	Unfinished int    `json:"unfinished"`
	// LimitStopped are the jobs stopped at their time limit
	// (Mapping.MaxRuntime) before their work was done, and
	// LimitWorkHours the GPU-hours of their trace run beyond what they
	// ran.
	LimitStopped   int     `json:"limitStopped,omitempty"`
	LimitWorkHours float64 `json:"limitWorkHours,omitempty"`
	BusySeconds    float64 `json:"busySeconds"`
	// Utilization is GPU-time spent working (including work later lost)
	// over capacity × the busy period (first submit to last completion).
	Utilization float64 `json:"utilization"`
	// JCT is the job completion time, submit to completion.
	JCT Summary `json:"jct"`
	// Wait is the time a job held no GPUs between its submit and its
	// completion (first queueing and every wait after a preemption), by
	// tier, highest first.
	Wait        []TierWait `json:"wait"`
	MaxWait     float64    `json:"maxWait"`
	Preemptions int        `json:"preemptions"`
	// PreemptionsPerJob is Preemptions over Jobs.
	PreemptionsPerJob float64 `json:"preemptionsPerJob"`
	// OrderPreemptions counts the preemptions for attained-service
	// ordering (berth's policies.RightOrder), and OrderLost the GPU-hours
	// of work they lost (part of GPUHours.Lost).
	OrderPreemptions int     `json:"orderPreemptions,omitempty"`
	OrderLost        float64 `json:"orderLostGPUHours,omitempty"`
	// PeakQueue is the most jobs waiting at once.
	PeakQueue     int      `json:"peakQueue"`
	PreemptedJobs int      `json:"preemptedJobs"`
	GPUHours      GPUHours `json:"gpuHours"`
	// LostShare is GPU-hours lost to preemption over GPU-hours delivered.
	LostShare float64 `json:"lostShare"`
	// Fairness is Jain's index of each project's GPUs held over its
	// entitlement (min of quota and demand), averaged over the time some
	// job waits; 1 is perfectly fair.
	Fairness float64 `json:"fairness"`
	// MinEntitlement is the least EntitlementMet over the teams that had
	// demand and a quota: how well the promise of a quota was kept for
	// the team it was kept worst for.
	MinEntitlement float64 `json:"minEntitlement"`
	// QuotaDebt is the teams' QuotaDebt summed, in GPU-hours.
	QuotaDebt float64 `json:"quotaDebt"`
	// QuotaWait splits each tier's waits (highest first) into the jobs
	// inside their team's quota at their first start and those that
	// borrowed then (jobs that never started are in neither).
	QuotaWait []QuotaWait `json:"quotaWait"`
	// Teams is how each trace project fared, in Report.Projects' order.
	Teams          []TeamResult `json:"teams"`
	ContendedHours float64      `json:"contendedHours"`
	Series         Series       `json:"series"`
	Timing         Timing       `json:"timing"`
	// Kinds is how busy each GPU kind was, in Cluster.Kinds' order,
	// where the report tells kinds apart.
	Kinds []KindUse `json:"kinds,omitempty"`
}

// KindUse is how busy one GPU kind's GPUs were under a policy, over the
// replay (the span of GPUHours.Capacity): the kinds' figures add up to
// the cluster's (busy: Capacity less Idle).
type KindUse struct {
	// Kind is its name ("": the GPUs of no kind the file declares).
	Kind string `json:"kind"`
	// BusyGPUHours are its GPUs held by jobs (starting, working or
	// stopping); AvailableGPUHours its GPUs over the replay; Utilization
	// the one over the other.
	BusyGPUHours      float64 `json:"busyGPUHours"`
	AvailableGPUHours float64 `json:"availableGPUHours"`
	Utilization       float64 `json:"utilization"`
	// The same in GPU-equivalents (KindInfo.Equivalents): each GPU
	// weighted by drivers.Weight.
	BusyEquivalentHours      float64 `json:"busyEquivalentHours"`
	AvailableEquivalentHours float64 `json:"availableEquivalentHours"`
}

// TeamResult is how one team (a trace project) fared under a policy.
type TeamResult struct {
	Project   string `json:"project"`
	Completed int    `json:"completed"`
	// JCTMean is the mean completion time of its completed jobs.
	JCTMean float64 `json:"jctMean"`
	// Share is its GPUs held over its entitlement (its quota, or its
	// demand when smaller), averaged over the time some job waited and it
	// held or wanted GPUs: its term in Fairness. 1 is what its quota
	// entitles it to; above 1 it borrowed, below it others held what it
	// was entitled to.
	Share float64 `json:"share"`
	// ShareHours is the time Share averages over (0: the team never held
	// or wanted GPUs while a job waited).
	ShareHours float64 `json:"shareHours"`
	// EntitlementMet is the time-average, while the team had demand and
	// a quota, of min(1, GPUs held ÷ min(demand, quota)): 1 when it
	// always held all its quota entitled it to.
	EntitlementMet float64 `json:"entitlementMet"`
	// EntitlementHours is the time EntitlementMet averages over.
	EntitlementHours float64 `json:"entitlementHours"`
	// QuotaDebt is the GPU-hours its in-quota demand (min(demand,
	// quota) less what it held) waited while other teams held borrowed
	// GPUs, counted once that had lasted longer than the reclaim grace.
	QuotaDebt float64 `json:"quotaDebt"`
}

// QuotaWait is one tier's waits split by the job's quota at its first
// start: inside its team's quota (its team's GPUs held then plus its own
// fitted the quota) or borrowing.
type QuotaWait struct {
	Tier     string      `json:"tier"`
	InQuota  WaitSummary `json:"inQuota"`
	Borrowed WaitSummary `json:"borrowed"`
}

// WaitSummary is a wait distribution in seconds.
type WaitSummary struct {
	Jobs int     `json:"jobs"`
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

// TierWait is the wait distribution of one tier; CDF holds the 0th…100th
// percentiles.
type TierWait struct {
	Tier string    `json:"tier"`
	Jobs int       `json:"jobs"`
	Mean float64   `json:"mean"`
	P50  float64   `json:"p50"`
	P99  float64   `json:"p99"`
	Max  float64   `json:"max"`
	CDF  []float64 `json:"cdf,omitempty"`
}

// GPUHours accounts for the capacity over the replay: Delivered (useful
// work kept) + Lost (work thrown away by preemption) + Overhead (GPUs held
// while starting or stopping) + Idle = Capacity.
type GPUHours struct {
	Capacity  float64 `json:"capacity"`
	Delivered float64 `json:"delivered"`
	Lost      float64 `json:"lost"`
	Overhead  float64 `json:"overhead"`
	Idle      float64 `json:"idle"`
	// Worked is the replay's own integral of working GPU-time; it equals
	// Delivered + Lost as the simulator counts them.
	Worked float64 `json:"worked"`
}

// Series is utilization over time, one point per bucket from the first
// submit.
type Series struct {
	BucketSeconds float64   `json:"bucketSeconds"`
	Utilization   []float64 `json:"utilization"`
}

// Timing is how long each cycle's decision took on this machine (the only
// part of a report that differs between runs). Decisions counts the
// cycles decided on the whole queue, Narrowed those decided on a narrowed
// one (narrow.go); Verified of those were checked against the whole queue
// (not timed), Differed of them came out differently.
type Timing struct {
	Decisions    int     `json:"decisions"`
	Narrowed     int     `json:"narrowed"`
	Verified     int     `json:"verified"`
	Differed     int     `json:"differed"`
	P50Millis    float64 `json:"p50Millis"`
	P99Millis    float64 `json:"p99Millis"`
	TotalSeconds float64 `json:"totalSeconds"`
	// Workspaces sums the workspaces the cycles' decisions took, every
	// try on a window and on the whole queue: the load decided over, which
	// the cost of a decision follows.
	Workspaces int64 `json:"workspaces"`
	// Months splits the replay's cost by simulated month, so a cost that
	// grows with the simulated time (with the history) shows.
	Months []MonthTiming `json:"months,omitempty"`
}

// MonthTiming is one simulated month of a policy's replay: Cycles decided
// in it (on the whole queue or a narrowed one), the Workspaces their
// decisions took (as Timing's), the mean time of their
// decisions (DecideMillis), and the replay's whole time in the month (its
// wall time: deciding, the simulator, the accounting, the garbage
// collector, and whatever the policies replayed beside it took from it)
// per decision (LoopMillis).
type MonthTiming struct {
	Month        string  `json:"month"` // 2017-10
	Cycles       int     `json:"cycles"`
	Workspaces   int64   `json:"workspaces"`
	DecideMillis float64 `json:"decideMillis"`
	LoopMillis   float64 `json:"loopMillis"`
}

// Cycles counts the cycles that decided, on the whole queue or not.
func (t Timing) Cycles() int { return t.Decisions + t.Narrowed }

func newReport(wl *Workload, cluster sim.Spec, m Mapping) *Report {
	rep := &Report{Mapping: m, Projects: wl.Projects}
	rep.Trace = TraceInfo{Jobs: len(wl.Jobs), Skipped: wl.Skipped, ProjectsGiven: wl.ProjectsGiven, TiersGiven: wl.TiersGiven, KindsGiven: wl.KindsGiven}
	if len(wl.Jobs) > 0 {
		rep.Trace.First, rep.Trace.Last = wl.Jobs[0].Submit, wl.Jobs[len(wl.Jobs)-1].Submit
	}
	for _, j := range wl.Jobs {
		rep.Trace.GPUHours += j.Duration.Hours() * float64(j.PerGPUs*j.Replicas)
	}
	rep.Cluster = ClusterInfo{Name: cluster.Name, Nodes: len(cluster.Nodes), GPUs: wl.Capacity}
	if wl.kindsReported() {
		rep.Cluster.Kinds, rep.Cluster.KindsDeclared = wl.Kinds, wl.KindsDeclared
	}
	return rep
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Mapping sentences, for the table and the HTML report.
func (r *Report) mappingLines() []string {
	m := r.Mapping
	var tiers []string
	for _, t := range m.Tiers {
		tiers = append(tiers, fmt.Sprintf("%s (%d) %.0f%%", t.Name, t.Value, t.Share*100))
	}
	quota := "its quota proportional to its share of GPU-time, the quotas adding up to the cluster"
	if m.Quotas != nil {
		quota = "quotas as given"
	}
	from := "Philly VCs"
	if r.Trace.ProjectsGiven {
		from = "the trace's project column"
	}
	draw := fmt.Sprintf("of each project's jobs, a seeded draw (seed %d) makes exactly %s", m.Seed, strings.Join(tiers, ", "))
	var tierLine string
	switch t := r.Trace.TiersGiven; {
	case t == 0:
		tierLine = "tiers: per job (the workspace's own tier); " + draw
	case t >= r.Trace.Jobs:
		tierLine = "tiers: per job (the workspace's own tier), from the trace's tier column"
	default:
		tierLine = fmt.Sprintf("tiers: per job (the workspace's own tier); %s jobs from the trace's tier column; of each project's other jobs, a seeded draw (seed %d) makes exactly %s", thousands(t), m.Seed, strings.Join(tiers, ", "))
	}
	lines := []string{
		fmt.Sprintf("projects: %d trace projects (%s), one berth project (a team) each; %s; borrowing unlimited", len(r.Projects), from, quota),
		tierLine,
	}
	if len(r.Cluster.Kinds) > 0 {
		lines = append(lines, r.kindsLine())
	}
	lines = append(lines,
		fmt.Sprintf("checkpoints: jobs over %s save every %s; shorter ones never; no checkpoint on the preemption signal, so a victim loses its work since its last save (grace %s)", short(m.CheckpointOver.Seconds()), short(m.CheckpointEvery.Seconds()), short(m.Grace.Seconds())),
		fmt.Sprintf("gangs: a job of more than %d GPUs runs as a gang of %d-GPU replicas (GPUs rounded up to a multiple of %d)", m.GangSize, m.GangSize, m.GangSize),
	)
	bound := "the default"
	if def := schema.DefaultPolicy().Spec.Aging.MaxWait; m.MaxWait != def {
		bound = "the default is " + text.Duration(def)
	}
	if m.MaxRuntime > 0 {
		lines = append(lines, fmt.Sprintf("time limit: every job stops when it has run %s over its runs (each tier's maxRuntime), under every policy, and does not run again", text.Duration(m.MaxRuntime)))
	}
	if m.Service != nil {
		lines = append(lines, "ordering: berth's attained-service ordering "+serviceText(*m.Service)+" (the default is "+serviceText(schema.DefaultPolicy().Spec.Service)+")")
	}
	if m.CohortBelow != "" {
		lines = append(lines, fmt.Sprintf("opt-in: berth's highest tier borrows within the cohort below tier %s (borrowWithinCohort: it may take other teams' in-quota work of lower tiers)", m.CohortBelow))
	}
	if m.MaxWait > 0 {
		lines = append(lines, fmt.Sprintf("policy: berth's default, with its wait bound aging.maxWait %s (%s)", text.Duration(m.MaxWait), bound))
	} else {
		lines = append(lines, fmt.Sprintf("policy: berth's default, with its wait bound off (aging.maxWait 0; %s)", bound))
	}
	return lines
}

// kindsLine states the kinds: where they come from, their GPUs, and how
// jobs use them.
func (r *Report) kindsLine() string {
	var ks []string
	for _, k := range r.Cluster.Kinds {
		switch {
		case k.Name == "":
			ks = append(ks, fmt.Sprintf("%s (%d GPUs)", k.label(), k.GPUs))
		case r.Cluster.KindsDeclared:
			ks = append(ks, fmt.Sprintf("%s = %q (%d GPUs)", k.Name, k.Match, k.GPUs))
		default:
			ks = append(ks, fmt.Sprintf("%q (%d GPUs)", k.Name, k.GPUs))
		}
	}
	from := "the cluster file's"
	if !r.Cluster.KindsDeclared {
		from = "one per model of the cluster, named by it"
	}
	return fmt.Sprintf("kinds: %s, %s: %s; a job of the trace's gpu_kind column (%s) runs on its kind's GPUs alone (its workspace's resources.gpuKind), any other on any whole GPU, never a MIG instance, under every policy; quotas count every kind in quota.gpus",
		plural(len(r.Cluster.Kinds)-r.noKind(), "GPU kind"), from, strings.Join(ks, ", "), plural(r.Trace.KindsGiven, "job"))
}

// plural writes n things: "1 job", "2,500 jobs".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return thousands(n) + " " + thing + "s"
}

// noKind is 1 where the cluster has GPUs of no kind (their row of
// Cluster.Kinds), else 0.
func (r *Report) noKind() int {
	if n := len(r.Cluster.Kinds); n > 0 && r.Cluster.Kinds[n-1].Name == "" {
		return 1
	}
	return 0
}

// WriteTable writes the comparison as an aligned table, and each GPU
// kind's utilization where the report tells kinds apart (WriteKinds).
func (r *Report) WriteTable(w io.Writer) error {
	if err := r.writeTable(w); err != nil || len(r.Cluster.Kinds) == 0 {
		return err
	}
	fmt.Fprintln(w)
	return r.WriteKinds(w)
}

// writeTable writes the comparison as an aligned table.
func (r *Report) writeTable(w io.Writer) error {
	larger := "larger than the cluster"
	if len(r.Cluster.Kinds) > 0 {
		larger = "larger than the GPUs they may use"
	}
	fmt.Fprintf(w, "trace: %s jobs (%d skipped: %s), %s → %s, %s GPU-hours asked\n",
		thousands(r.Trace.Jobs), r.Trace.Skipped, larger, r.Trace.First.Format("2006-01-02"), r.Trace.Last.Format("2006-01-02"), thousands(int(r.Trace.GPUHours+0.5)))
	fmt.Fprintf(w, "cluster: %s, %d nodes, %d GPUs\n", r.Cluster.Name, r.Cluster.Nodes, r.Cluster.GPUs)
	for _, l := range r.mappingLines() {
		fmt.Fprintln(w, l)
	}
	if r.Tick > 0 {
		fmt.Fprintf(w, "decisions: every %s of simulated time at most (--tick)\n", r.Tick)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(label string, f func(p PolicyResult) string) {
		fmt.Fprint(tw, label+"\t")
		for _, p := range r.Policies {
			fmt.Fprint(tw, f(p)+"\t")
		}
		fmt.Fprintln(tw)
	}
	row("", func(p PolicyResult) string { return p.Name })
	row("jobs completed", func(p PolicyResult) string { return thousands(p.Completed) })
	if slices.ContainsFunc(r.Policies, func(p PolicyResult) bool { return p.LimitStopped > 0 }) {
		row("stopped at time limit", func(p PolicyResult) string {
			return fmt.Sprintf("%s (%s GPU-h undone)", thousands(p.LimitStopped), thousands(int(math.Round(p.LimitWorkHours))))
		})
	}
	row("utilization (busy period)", func(p PolicyResult) string { return pct(p.Utilization) })
	row("busy period", func(p PolicyResult) string { return short(p.BusySeconds) })
	row("JCT mean", func(p PolicyResult) string { return short(p.JCT.Mean) })
	row("JCT p50", func(p PolicyResult) string { return short(p.JCT.P50) })
	row("JCT p90", func(p PolicyResult) string { return short(p.JCT.P90) })
	row("JCT p99", func(p PolicyResult) string { return short(p.JCT.P99) })
	if len(r.Policies) > 0 {
		for i, tw := range r.Policies[0].Wait {
			tier := tw.Tier
			row("wait p50 "+tier, func(p PolicyResult) string { return short(p.Wait[i].P50) })
			row("wait p99 "+tier, func(p PolicyResult) string { return short(p.Wait[i].P99) })
		}
	}
	row("max wait", func(p PolicyResult) string { return short(p.MaxWait) })
	row("peak queue (jobs)", func(p PolicyResult) string { return thousands(p.PeakQueue) })
	row("preemptions (per job)", func(p PolicyResult) string {
		return fmt.Sprintf("%s (%.2f)", thousands(p.Preemptions), p.PreemptionsPerJob)
	})
	if slices.ContainsFunc(r.Policies, func(p PolicyResult) bool { return p.OrderPreemptions > 0 }) {
		row("of them for ordering (GPU-h lost)", func(p PolicyResult) string {
			return fmt.Sprintf("%s (%s)", thousands(p.OrderPreemptions), thousands(int(p.OrderLost+0.5)))
		})
	}
	row("GPU-hours lost", func(p PolicyResult) string {
		return fmt.Sprintf("%s (%s)", thousands(int(p.GPUHours.Lost+0.5)), pct(p.LostShare))
	})
	row("fairness (Jain)", func(p PolicyResult) string { return fmt.Sprintf("%.3f", p.Fairness) })
	row("entitlement met (least team)", func(p PolicyResult) string { return fmt.Sprintf("%.3f", p.MinEntitlement) })
	row("quota debt (GPU-hours)", func(p PolicyResult) string { return thousands(int(p.QuotaDebt + 0.5)) })
	if len(r.Policies) > 0 && len(r.Policies[0].QuotaWait) > 0 {
		tier := r.Policies[0].QuotaWait[0].Tier
		row("wait p99 "+tier+", in quota", func(p PolicyResult) string { return waitP99(p.QuotaWait[0].InQuota) })
		row("wait p99 "+tier+", borrowing", func(p PolicyResult) string { return waitP99(p.QuotaWait[0].Borrowed) })
	}
	row("decision p50 / p99", func(p PolicyResult) string {
		return fmt.Sprintf("%s / %s", millis(p.Timing.P50Millis), millis(p.Timing.P99Millis))
	})
	row("decisions whole / narrowed", func(p PolicyResult) string {
		return fmt.Sprintf("%s / %s", thousands(p.Timing.Decisions), thousands(p.Timing.Narrowed))
	})
	if slices.ContainsFunc(r.Policies, func(p PolicyResult) bool { return p.Timing.Verified > 0 }) {
		row("narrowed verified / differed", func(p PolicyResult) string {
			return fmt.Sprintf("%s / %s", thousands(p.Timing.Verified), thousands(p.Timing.Differed))
		})
	}
	return tw.Flush()
}

// WriteKinds writes each GPU kind's utilization under each policy: its
// GPUs, busy GPU-hours (held by jobs) over available ones (its GPUs over
// the replay), and, where a kind's GPU-equivalents differ from its GPUs
// (MIG instances, weights), its GPU-equivalents and a row of the whole
// cluster in them. It writes nothing where the report does not tell
// kinds apart.
func (r *Report) WriteKinds(w io.Writer) error {
	if len(r.Cluster.Kinds) == 0 {
		return nil
	}
	weighted := false
	var gpus int
	var eqs float64
	for _, k := range r.Cluster.Kinds {
		weighted = weighted || math.Abs(k.Equivalents-float64(k.GPUs)) > 1e-9
		gpus += k.GPUs
		eqs += k.Equivalents
	}
	fmt.Fprintln(w, "per GPU kind: GPU-hours busy (held by jobs: starting, working or stopping) / available (its GPUs over the replay) (utilization)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "kind\tGPUs\t")
	if weighted {
		fmt.Fprint(tw, "GPU-equivalents\t")
	}
	for _, p := range r.Policies {
		fmt.Fprint(tw, p.Name+"\t")
	}
	fmt.Fprintln(tw)
	use := func(busy, avail float64) string {
		u := 0.0
		if avail > 0 {
			u = busy / avail
		}
		return fmt.Sprintf("%s / %s (%s)", hours(busy), hours(avail), pct(u))
	}
	row := func(label string, n int, eq float64, f func(p PolicyResult) string) {
		fmt.Fprintf(tw, "%s\t%d\t", label, n)
		if weighted {
			fmt.Fprintf(tw, "%s\t", hours(eq))
		}
		for _, p := range r.Policies {
			fmt.Fprint(tw, f(p)+"\t")
		}
		fmt.Fprintln(tw)
	}
	for i, k := range r.Cluster.Kinds {
		row(k.label(), k.GPUs, k.Equivalents, func(p PolicyResult) string {
			if i >= len(p.Kinds) {
				return "-"
			}
			return use(p.Kinds[i].BusyGPUHours, p.Kinds[i].AvailableGPUHours)
		})
	}
	row("all", gpus, eqs, func(p PolicyResult) string {
		var busy, avail float64
		for _, u := range p.Kinds {
			busy += u.BusyGPUHours
			avail += u.AvailableGPUHours
		}
		return use(busy, avail)
	})
	if weighted {
		row("all, GPU-equivalents", gpus, eqs, func(p PolicyResult) string {
			var busy, avail float64
			for _, u := range p.Kinds {
				busy += u.BusyEquivalentHours
				avail += u.AvailableEquivalentHours
			}
			return use(busy, avail)
		})
	}
	return tw.Flush()
}

// hours writes GPU-hours: one decimal below 100, else whole with
// thousands separators.
func hours(h float64) string {
	if h < 99.95 {
		return fmt.Sprintf("%.1f", h)
	}
	return thousands(int(h + 0.5))
}

// WriteTeams writes how each team fared under each policy, largest quota
// first: its mean completion time and its share (GPUs held over its
// entitlement while jobs waited, the terms of the Jain index).
func (r *Report) WriteTeams(w io.Writer) error {
	fmt.Fprintln(w, "per team: mean JCT · share, its GPUs held over what its quota (or its demand, when smaller) entitles it to, averaged while jobs waited")
	fmt.Fprintln(w, "(share 1.00: its due; above: it borrowed; below: others held part of its due; -: no quota, or it held and wanted none)")
	order := make([]int, len(r.Projects))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return r.Projects[b].Quota - r.Projects[a].Quota })
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "team\tquota\tjobs\tGPU-hours\t")
	for _, p := range r.Policies {
		fmt.Fprint(tw, p.Name+"\t")
	}
	fmt.Fprintln(tw)
	for _, ti := range order {
		pi := r.Projects[ti]
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t", pi.Name, pi.Quota, thousands(pi.Jobs), thousands(int(pi.GPUTime+0.5)))
		for _, p := range r.Policies {
			jct, share := "-", "-"
			if ti < len(p.Teams) {
				if t := p.Teams[ti]; t.Completed > 0 {
					jct = short(t.JCTMean)
				}
				if t := p.Teams[ti]; t.ShareHours > 0 {
					share = fmt.Sprintf("%.2f", t.Share)
				}
			}
			fmt.Fprintf(tw, "%s · %s\t", jct, share)
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "per team: the promise of its quota · entitlement met, the time-average of min(1, GPUs held ÷ what its quota entitles it to: held plus its waiting jobs that fit in what the quota has left) while that is above 0 · quota debt, GPU-hours its in-quota demand waited while other teams held borrowed GPUs, beyond the reclaim grace")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "team\tquota\t")
	for _, p := range r.Policies {
		fmt.Fprint(tw, p.Name+"\t")
	}
	fmt.Fprintln(tw)
	for _, ti := range order {
		pi := r.Projects[ti]
		fmt.Fprintf(tw, "%s\t%d\t", pi.Name, pi.Quota)
		for _, p := range r.Policies {
			met, debt := "-", "-"
			if ti < len(p.Teams) {
				if t := p.Teams[ti]; t.EntitlementHours > 0 {
					met = fmt.Sprintf("%.3f", t.EntitlementMet)
					debt = thousands(int(t.QuotaDebt + 0.5))
				}
			}
			fmt.Fprintf(tw, "%s · %s\t", met, debt)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// waitP99 writes a wait summary's p99, or "-" with no job in it.
func waitP99(s WaitSummary) string {
	if s.Jobs == 0 {
		return "-"
	}
	return short(s.P99)
}

func pct(x float64) string { return fmt.Sprintf("%.1f%%", x*100) }

func millis(ms float64) string {
	if ms < 1 {
		return fmt.Sprintf("%.0fµs", ms*1000)
	}
	return fmt.Sprintf("%.1fms", ms)
}

// short writes seconds compactly: 45s, 12.5m, 3.2h, 4.1d.
func short(s float64) string {
	switch {
	case s < 60:
		return fmt.Sprintf("%.0fs", s)
	case s < 3600:
		return fmt.Sprintf("%.1fm", s/60)
	case s < 48*3600:
		return fmt.Sprintf("%.1fh", s/3600)
	}
	return fmt.Sprintf("%.1fd", s/86400)
}

// thousands writes n with thousands separators.
func thousands(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// serviceText states an attained-service ordering for the report.
func serviceText(sp schema.ServicePolicy) string {
	if len(sp.Steps) == 0 {
		return "off"
	}
	steps := make([]string, len(sp.Steps))
	for i, st := range sp.Steps {
		steps[i] = strconv.FormatFloat(st, 'g', -1, 64)
	}
	promote := "never promoted"
	if sp.Promote > 0 {
		promote = "promoted after waiting " + strconv.FormatFloat(sp.Promote, 'g', -1, 64) + "× its run"
	}
	return "steps " + strings.Join(steps, ", ") + " GPU-h, " + promote
}
