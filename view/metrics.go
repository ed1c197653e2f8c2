package view

import (
	"iter"
	"sync"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/policies"
	"github.com/berth-dev/berth/schema"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the loop's Prometheus figures, in their own registry.
type Metrics struct {
	Registry *prometheus.Registry

	decisions   *prometheus.CounterVec
	preemptions *prometheus.CounterVec
	failures    *prometheus.CounterVec
	pending     *prometheus.GaugeVec
	states      *prometheus.GaugeVec
	duration    prometheus.Histogram
	cycles      *prometheus.CounterVec
	revisions   *prometheus.GaugeVec

	// Per project (the specs bound their number) and per tier: what the
	// dashboard shows, for a Grafana board. The GPU series are per quota
	// account besides (label kind: "" for quota.gpus).
	quota, used, borrowed *prometheus.GaugeVec
	waiting, oldestWait   *prometheus.GaugeVec
	workLost              *prometheus.CounterVec
	// waits: how long each start waited, by tier (a histogram, so a
	// board graphs its p50 and p99); moves: workspaces moved off a
	// draining or lost node or a failing GPU, by tier.
	waits *prometheus.HistogramVec
	moves *prometheus.CounterVec
	// CPU (cores) and memory (bytes) against a quota that names them;
	// a project whose quota does not name one has no series for it.
	quotaCPU, usedCPU, borrowedCPU *prometheus.GaugeVec
	quotaMem, usedMem, borrowedMem *prometheus.GaugeVec

	// GPU utilization: per project, the mean over the GPUs read; per
	// workspace (use), the highest of its GPUs, built at scrape time.
	projectUse *prometheus.GaugeVec
	use        *useCollector

	mu      sync.Mutex // guards the revision series and the leader gauge
	refused string     // the revision of the refused series
	leader  prometheus.Collector
}

// NewMetrics makes the loop's metrics in a new registry (with the Go and
// process collectors).
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_decisions_total", Help: "Workspace verdicts made, by verdict.",
		}, []string{"verdict"}),
		preemptions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_preemptions_total", Help: "Workspaces preempted, by the victim's tier.",
		}, []string{"tier"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_workspace_failures_total", Help: "Runs that ended without berth stopping them and not cleanly, by class: task-failed (the task's own failure), node-fault (the node lost, drained or failed its start).",
		}, []string{"class"}),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_pending_workspaces", Help: "Workspaces waiting to run, by reason.",
		}, []string{"reason"}),
		states: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_workspaces", Help: "Workspaces by state.",
		}, []string{"state"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "berth_reconcile_duration_seconds", Help: "Time one reconcile cycle takes.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 8),
		}),
		cycles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_reconcile_cycles_total", Help: "Reconcile cycles, by result (ok, error).",
		}, []string{"result"}),
		revisions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_revision_info", Help: "The spec revision in force (state=in_force) and the last refused one (state=refused).",
		}, []string{"revision", "state"}),
		quota: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_project_quota_gpus", Help: "The GPUs a project's quota guarantees it, by quota account: kind=\"\" (no kind label) is quota.gpus, a GPU kind's name its quota.kinds.",
		}, []string{"project", "tier", "kind"}),
		used: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_project_used_gpus", Help: "The GPUs a project's workspaces hold, by quota account (kind: a GPU kind its quota names, or none).",
		}, []string{"project", "tier", "kind"}),
		borrowed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_project_borrowed_gpus", Help: "The GPUs a project holds beyond its quota, by quota account (kind: a GPU kind its quota names, or none).",
		}, []string{"project", "tier", "kind"}),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_project_waiting_workspaces", Help: "A project's workspaces waiting to run (Pending or Preempted).",
		}, []string{"project", "tier"}),
		oldestWait: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_project_oldest_wait_seconds", Help: "How long a project's longest-waiting workspace has waited (0: none waits).",
		}, []string{"project", "tier"}),
		quotaCPU: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_project_quota_cpu_cores", Help: "The CPU (cores) a project's quota guarantees it, where the quota names CPU.",
		}, []string{"project", "tier"}),
		usedCPU: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_project_used_cpu_cores", Help: "The CPU (cores, an exclusive core as 1) a project's workspaces hold, where its quota names CPU.",
		}, []string{"project", "tier"}),
		borrowedCPU: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_project_borrowed_cpu_cores", Help: "The CPU (cores) a project holds beyond its CPU quota.",
		}, []string{"project", "tier"}),
		quotaMem: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_project_quota_memory_bytes", Help: "The memory a project's quota guarantees it, where the quota names memory.",
		}, []string{"project", "tier"}),
		usedMem: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_project_used_memory_bytes", Help: "The memory a project's workspaces hold, where its quota names memory.",
		}, []string{"project", "tier"}),
		borrowedMem: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_project_borrowed_memory_bytes", Help: "The memory a project holds beyond its memory quota.",
		}, []string{"project", "tier"}),
		workLost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_work_lost_seconds_total", Help: "Progress lost by workspaces since their last checkpoint when preempted or failed, by the workspace's tier.",
		}, []string{"tier"}),
		waits: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "berth_wait_seconds", Help: "How long a workspace waited (Pending or Preempted) before it started, observed at each start, by the workspace's tier.",
			Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 2 * 3600, 6 * 3600, 12 * 3600, 24 * 3600, 72 * 3600, 7 * 24 * 3600},
		}, []string{"tier"}),
		moves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_moves_total", Help: "Workspaces moved off a draining or lost node or a failing GPU (Running to Moving), by the workspace's tier.",
		}, []string{"tier"}),
		projectUse: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_project_gpu_utilization_percent", Help: "The mean utilization of the GPUs a project's running workspaces hold, over those read (the last reading of each); no series while none is read.",
		}, []string{"project", "tier"}),
		use: &useCollector{desc: prometheus.NewDesc("berth_workspace_gpu_utilization_percent",
			"The utilization of a running workspace's busiest GPU, at the last reading (only workspaces with a reading have a series).",
			[]string{"project", "workspace"}, nil)},
	}
	for _, c := range []drivers.EndClass{drivers.EndTaskFailed, drivers.EndNodeFault} {
		m.failures.WithLabelValues(c.String()) // both series from the start, at 0
	}
	m.Registry.MustRegister(m.decisions, m.preemptions, m.failures, m.pending, m.states, m.duration, m.cycles, m.revisions,
		m.quota, m.used, m.borrowed, m.waiting, m.oldestWait, m.workLost, m.waits, m.moves,
		m.quotaCPU, m.usedCPU, m.borrowedCPU, m.quotaMem, m.usedMem, m.borrowedMem, m.projectUse, m.use)
	return m
}

// useCollector serves berth_workspace_gpu_utilization_percent from the
// values of the last cycle: one series per running workspace with a
// reading (at most one per GPU the cluster has: 10,000 series at 10,000
// one-GPU workspaces), built when scraped rather than set in a GaugeVec
// each cycle.
type useCollector struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	rows []useRow
}

type useRow struct {
	project, workspace string
	percent            float64
}

func (c *useCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *useCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	rows := c.rows
	c.mu.Unlock()
	for _, r := range rows {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, r.percent, r.project, r.workspace)
	}
}

// Leader exports whether this replica leads (berth_leader, 1 or 0), as
// leading says when scraped; a loop without an election leads always.
// The last loop made on these metrics is the one they say.
func (m *Metrics) Leader(leading func() bool) {
	g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "berth_leader", Help: "1 while this replica holds the leader lease and writes, 0 while it follows.",
	}, func() float64 {
		if leading() {
			return 1
		}
		return 0
	})
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.leader != nil {
		m.Registry.Unregister(m.leader)
	}
	m.leader = g
	m.Registry.MustRegister(g)
}

// ObserveCycle counts a cycle that took d and failed with err (nil: it
// succeeded).
func (m *Metrics) ObserveCycle(d time.Duration, err error) {
	m.duration.Observe(d.Seconds())
	if err != nil {
		m.cycles.WithLabelValues("error").Inc()
		return
	}
	m.cycles.WithLabelValues("ok").Inc()
}

// ObserveDecision counts the verdicts of d.
func (m *Metrics) ObserveDecision(d policies.Decision) {
	for _, w := range d.Workspaces {
		m.decisions.WithLabelValues(w.Verdict.String()).Inc()
	}
}

// Ended counts a run that ended on its own, when it failed.
func (m *Metrics) Ended(c drivers.EndClass) {
	if c == drivers.EndTaskFailed || c == drivers.EndNodeFault {
		m.failures.WithLabelValues(c.String()).Inc()
	}
}

// Preempted counts a preemption of victim, by its tier in set.
func (m *Metrics) Preempted(set *schema.Set, victim schema.Ref) {
	m.preemptions.WithLabelValues(tierName(set, victim)).Inc()
}

// Transition counts what transition t of ref says: a start after a wait
// (from Pending or Preempted, entered at waitedSince) observes the wait;
// a move counts one.
func (m *Metrics) Transition(set *schema.Set, ref schema.Ref, t *Transition, waitedSince time.Time) {
	switch {
	case t.To == StateStarting && (t.From == StatePending || t.From == StatePreempted) && !waitedSince.IsZero():
		m.waits.WithLabelValues(tierName(set, ref)).Observe(max(0, t.At.Sub(waitedSince).Seconds()))
	case t.To == StateMoving:
		m.moves.WithLabelValues(tierName(set, ref)).Inc()
	}
}

// Lost counts work a workspace lost (its progress since the last
// checkpoint, when it resumed after a preemption or a failure).
func (m *Metrics) Lost(set *schema.Set, ref schema.Ref, d time.Duration) {
	if d > 0 {
		m.workLost.WithLabelValues(tierName(set, ref)).Add(d.Seconds())
	}
}

// tierName is the name of ref's tier (its own, else its project's),
// "unknown" when the specs do not say.
func tierName(set *schema.Set, ref schema.Ref) string {
	t := set.TierOf(ref.Project)
	if w := set.Workspace(ref); w != nil {
		t = set.TierFor(w)
	}
	if t != nil {
		return t.Meta.Name
	}
	return "unknown"
}

// Revision records the revision in force or the last refused one: at
// most one series of each, so that a run of refused revisions (one per
// commit of a broken branch) does not grow the metric without bound.
func (m *Metrics) Revision(id string, valid bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if valid {
		m.revisions.Reset()
		m.refused = ""
		m.revisions.WithLabelValues(id, "in_force").Set(1)
		return
	}
	if m.refused != "" {
		m.revisions.DeleteLabelValues(m.refused, "refused")
	}
	m.refused = id
	m.revisions.WithLabelValues(id, "refused").Set(1)
}

// ObserveStatus sets the gauges from the workspaces berth knows (each
// once, in any order) and the projects' statuses at now. Projects the
// specs no longer list leave the per-project series.
func (m *Metrics) ObserveStatus(workspaces iter.Seq[*WorkspaceStatus], projects []ProjectStatus, now time.Time) {
	m.pending.Reset()
	m.states.Reset()
	for _, g := range []*prometheus.GaugeVec{m.quota, m.used, m.borrowed, m.waiting, m.oldestWait, m.quotaCPU, m.usedCPU, m.borrowedCPU, m.quotaMem, m.usedMem, m.borrowedMem, m.projectUse} {
		g.Reset()
	}
	tiers := make(map[string]string, len(projects))
	for _, p := range projects {
		tiers[p.Name] = p.Tier
		// The gpus account with kind "", which Prometheus stores as no
		// kind label: queries written before kinds match it as before.
		m.quota.WithLabelValues(p.Name, p.Tier, "").Set(float64(p.QuotaGPUs))
		m.used.WithLabelValues(p.Name, p.Tier, "").Set(float64(p.UsedGPUs))
		m.borrowed.WithLabelValues(p.Name, p.Tier, "").Set(float64(p.BorrowedGPUs))
		for _, k := range p.Kinds {
			m.quota.WithLabelValues(p.Name, p.Tier, k.Kind).Set(float64(k.QuotaGPUs))
			m.used.WithLabelValues(p.Name, p.Tier, k.Kind).Set(float64(k.UsedGPUs))
			m.borrowed.WithLabelValues(p.Name, p.Tier, k.Kind).Set(float64(k.BorrowedGPUs))
		}
		if p.QuotaCPUMHz > 0 {
			m.quotaCPU.WithLabelValues(p.Name, p.Tier).Set(float64(p.QuotaCPUMHz) / 1000)
			m.usedCPU.WithLabelValues(p.Name, p.Tier).Set(float64(p.UsedCPUMHz) / 1000)
			m.borrowedCPU.WithLabelValues(p.Name, p.Tier).Set(float64(p.BorrowedCPUMHz) / 1000)
		}
		if p.QuotaMemoryBytes > 0 {
			m.quotaMem.WithLabelValues(p.Name, p.Tier).Set(float64(p.QuotaMemoryBytes))
			m.usedMem.WithLabelValues(p.Name, p.Tier).Set(float64(p.UsedMemoryBytes))
			m.borrowedMem.WithLabelValues(p.Name, p.Tier).Set(float64(p.BorrowedMemoryBytes))
		}
		m.waiting.WithLabelValues(p.Name, p.Tier).Set(0)
		m.oldestWait.WithLabelValues(p.Name, p.Tier).Set(0)
		// Each project's tier has its per-tier series from the start, at
		// 0, so a board's rate() and an alert see them before the first
		// event.
		m.preemptions.WithLabelValues(p.Tier)
		m.moves.WithLabelValues(p.Tier)
		m.workLost.WithLabelValues(p.Tier)
		m.waits.WithLabelValues(p.Tier)
	}
	oldest := map[string]time.Duration{}
	var rows []useRow
	type sum struct {
		percent float64
		gpus    int
	}
	projectUse := map[string]sum{}
	for w := range workspaces {
		m.states.WithLabelValues(string(w.State)).Inc()
		if u := w.GPUUse; u != nil && w.State == StateRunning {
			rows = append(rows, useRow{project: w.Project, workspace: w.Name, percent: u.MaxPercent})
			s := projectUse[w.Project]
			s.percent += u.MeanPercent * float64(u.GPUs)
			s.gpus += u.GPUs
			projectUse[w.Project] = s
		}
		if w.State == StatePending {
			reason := w.ReasonKind
			if reason == "" {
				reason = "none"
			}
			m.pending.WithLabelValues(reason).Inc()
		}
		tier, ok := tiers[w.Project]
		if !ok || (w.State != StatePending && w.State != StatePreempted) {
			continue
		}
		m.waiting.WithLabelValues(w.Project, tier).Inc()
		if d := now.Sub(w.Since); d > oldest[w.Project] {
			oldest[w.Project] = d
			m.oldestWait.WithLabelValues(w.Project, tier).Set(d.Seconds())
		}
	}
	for p, s := range projectUse {
		if tier, ok := tiers[p]; ok && s.gpus > 0 {
			m.projectUse.WithLabelValues(p, tier).Set(s.percent / float64(s.gpus))
		}
	}
	m.use.mu.Lock()
	m.use.rows = rows
	m.use.mu.Unlock()
}
