package reconcile

import (
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

// TestProjectMetrics: /metrics shows per project what the dashboard does
// (quota, used, borrowed, waiting, oldest wait), and a project the specs
// drop leaves the series.
func TestProjectMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Three 1-GPU workspaces of one project on two GPUs: two run, one waits.
		set := withWorkspaces(workspace("med", "a", schema.DesiredRunning), workspace("med", "b", schema.DesiredRunning), workspace("med", "c", schema.DesiredRunning))
		dropped := withWorkspaces()
		dropped.Projects = dropped.Projects[:1] // hi only
		h := newHarness(t, testSets{"r1": set, "r2": dropped}, "r1")
		if _, err := h.loop.Once(t.Context()); err != nil {
			t.Fatal(err)
		}
		h.sleep(sim.DefaultStartDelay + time.Minute)
		if _, err := h.loop.Once(t.Context()); err != nil {
			t.Fatal(err)
		}
		reg := h.loop.Metrics().Registry
		p := set.Project("med")
		tier := p.Spec.Tier
		for name, want := range map[string]float64{
			"berth_project_quota_gpus":         float64(p.Spec.Quota.GPUs),
			"berth_project_used_gpus":          2,
			"berth_project_borrowed_gpus":      float64(max(0, 2-p.Spec.Quota.GPUs)),
			"berth_project_waiting_workspaces": 1,
		} {
			if got, ok := projectGauge(t, reg, name, "med", tier); !ok || got != want {
				t.Errorf("%s{project=med,tier=%s} = %v (present %v), want %v", name, tier, got, ok, want)
			}
		}
		if got, _ := projectGauge(t, reg, "berth_project_oldest_wait_seconds", "med", tier); got < 60 {
			t.Errorf("oldest wait %vs, want at least the minute waited", got)
		}

		h.source.set("r2")
		if _, err := h.loop.Once(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, ok := projectGauge(t, reg, "berth_project_quota_gpus", "med", tier); ok {
			t.Errorf("project med left the specs, its series stayed")
		}
		if _, ok := projectGauge(t, reg, "berth_project_quota_gpus", "hi", "high"); !ok {
			t.Errorf("project hi has no series")
		}
	})
}

// TestProjectMetricsCPUMemory: a project whose quota names CPU and
// memory has series for them (CPU in cores, memory in bytes); one whose
// quota names only GPUs has none.
func TestProjectMetricsCPUMemory(t *testing.T) {
	m := view.NewMetrics()
	m.ObserveStatus(slices.Values([]*view.WorkspaceStatus(nil)), []view.ProjectStatus{
		{Name: "gpu-only", Tier: "low", QuotaGPUs: 2, UsedGPUs: 1},
		{Name: "ml", Tier: "high", QuotaGPUs: 4, UsedGPUs: 3, QuotaCPUMHz: 8000, UsedCPUMHz: 16500, BorrowedCPUMHz: 8500,
			QuotaMemoryBytes: 64 << 30, UsedMemoryBytes: 32 << 30},
	}, time.Time{})
	for name, want := range map[string]float64{
		"berth_project_quota_cpu_cores":       8,
		"berth_project_used_cpu_cores":        16.5,
		"berth_project_borrowed_cpu_cores":    8.5,
		"berth_project_quota_memory_bytes":    64 << 30,
		"berth_project_used_memory_bytes":     32 << 30,
		"berth_project_borrowed_memory_bytes": 0,
	} {
		if got, ok := projectGauge(t, m.Registry, name, "ml", "high"); !ok || got != want {
			t.Errorf("%s{project=ml} = %v (present %v), want %v", name, got, ok, want)
		}
		if _, ok := projectGauge(t, m.Registry, name, "gpu-only", "low"); ok {
			t.Errorf("%s{project=gpu-only} present; its quota names no CPU or memory", name)
		}
	}
}

// projectGauge returns the value of metric name with the labels project and
// tier in reg, and whether it is there.
func projectGauge(t *testing.T, reg *prometheus.Registry, name, project, tier string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["project"] == project && labels["tier"] == tier {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// TestWorkLostByTier: lost work adds up per the workspace's tier.
func TestWorkLostByTier(t *testing.T) {
	m := view.NewMetrics()
	set := withWorkspaces()
	m.Lost(set, schema.Ref{Project: "med", Name: "a"}, 90*time.Second)
	m.Lost(set, schema.Ref{Project: "med", Name: "b"}, 30*time.Second)
	m.Lost(set, schema.Ref{Project: "gone", Name: "c"}, 0)
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() == "berth_work_lost_seconds_total" {
			for _, s := range mf.GetMetric() {
				got[s.GetLabel()[0].GetValue()] = s.GetCounter().GetValue()
			}
		}
	}
	if want := map[string]float64{"medium": 120}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("work lost by tier %v, want %v", got, want)
	}
}

// A run of refused revisions keeps one series for the last refused one,
// beside the one in force.
func TestRevisionSeriesBounded(t *testing.T) {
	m := view.NewMetrics()
	series := func() map[string]string {
		mfs, err := m.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, mf := range mfs {
			if mf.GetName() != "berth_revision_info" {
				continue
			}
			for _, mt := range mf.GetMetric() {
				l := map[string]string{}
				for _, lp := range mt.GetLabel() {
					l[lp.GetName()] = lp.GetValue()
				}
				out[l["state"]+" "+l["revision"]] = fmt.Sprint(mt.GetGauge().GetValue())
			}
		}
		return out
	}
	m.Revision("good0000", true)
	for i := range 100 {
		m.Revision(fmt.Sprintf("bad%05d", i), false)
	}
	if diff := cmp.Diff(map[string]string{"in_force good0000": "1", "refused bad00099": "1"}, series()); diff != "" {
		t.Errorf("after 100 refused revisions (-want +got):\n%s", diff)
	}
	m.Revision("good0001", true)
	if diff := cmp.Diff(map[string]string{"in_force good0001": "1"}, series()); diff != "" {
		t.Errorf("after a good one (-want +got):\n%s", diff)
	}
}
