package reconcile

import (
	"time"

	"github.com/berth-dev/berth/policies"
	"github.com/berth-dev/berth/schema"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the loop's Prometheus figures, in their own registry.
type Metrics struct {
	Registry *prometheus.Registry

	decisions   *prometheus.CounterVec
	preemptions *prometheus.CounterVec
	pending     *prometheus.GaugeVec
	states      *prometheus.GaugeVec
	duration    prometheus.Histogram
	cycles      *prometheus.CounterVec
	revisions   *prometheus.GaugeVec
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
	}
	m.Registry.MustRegister(m.decisions, m.preemptions, m.pending, m.states, m.duration, m.cycles, m.revisions)
	return m
}

func (m *Metrics) observeCycle(d time.Duration, err error) {
	m.duration.Observe(d.Seconds())
	if err != nil {
		m.cycles.WithLabelValues("error").Inc()
		return
	}
	m.cycles.WithLabelValues("ok").Inc()
}

func (m *Metrics) observeDecision(d policies.Decision) {
	for _, w := range d.Workspaces {
		m.decisions.WithLabelValues(w.Verdict.String()).Inc()
	}
}

func (m *Metrics) preempted(set *schema.Set, victim schema.Ref) {
	tier := "unknown"
	t := set.TierOf(victim.Project)
	if w := set.Workspace(victim); w != nil {
		t = set.TierFor(w)
	}
	if t != nil {
		tier = t.Meta.Name
	}
	m.preemptions.WithLabelValues(tier).Inc()
}

func (m *Metrics) revision(id string, valid bool) {
	if valid {
		m.revisions.Reset()
		m.revisions.WithLabelValues(id, "in_force").Set(1)
		return
	}
	m.revisions.WithLabelValues(id, "refused").Set(1)
}

// observeStatus sets the gauges from the loop's records (l.mu held).
func (m *Metrics) observeStatus(records map[schema.Ref]*record) {
	m.pending.Reset()
	m.states.Reset()
	for _, r := range records {
		m.states.WithLabelValues(string(r.status.State)).Inc()
		if r.status.State == StatePending {
			reason := r.status.ReasonKind
			if reason == "" {
				reason = "none"
			}
			m.pending.WithLabelValues(reason).Inc()
		}
	}
}
