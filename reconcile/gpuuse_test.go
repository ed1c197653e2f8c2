package reconcile

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/schema"
	"github.com/prometheus/client_golang/prometheus"
)

// workspaceGauge reads a per-workspace series of reg.
func workspaceGauge(t *testing.T, reg *prometheus.Registry, name, project, workspace string) (float64, bool) {
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
			if labels["project"] == project && labels["workspace"] == workspace {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// TestGPUUseShown: the GPU utilization the cluster reports for a running
// workspace (the sim's SetUse) is in its status (the busiest GPU, the
// mean, when read), its explanation and /metrics (per workspace, and
// per project the mean over its GPUs); a workspace without a reading
// has none, and its series goes when its reading does.
func TestGPUUseShown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		set := withWorkspaces(workspace("med", "a", schema.DesiredRunning), workspace("med", "b", schema.DesiredRunning))
		h := newHarness(t, testSets{"r1": set}, "r1")
		if _, err := h.loop.Once(t.Context()); err != nil {
			t.Fatal(err)
		}
		h.sleep(sim.DefaultStartDelay + time.Second)
		a, b := schema.Ref{Project: "med", Name: "a"}, schema.Ref{Project: "med", Name: "b"}
		if err := h.cluster.SetUse(a, 0); err != nil {
			t.Fatal(err)
		}
		if err := h.cluster.SetUse(b, 85); err != nil {
			t.Fatal(err)
		}
		if _, err := h.loop.Once(t.Context()); err != nil {
			t.Fatal(err)
		}
		now := h.clock.Now()
		for ref, want := range map[schema.Ref]float64{a: 0, b: 85} {
			st := h.status(t, ref)
			if u := st.GPUUse; u == nil || u.MaxPercent != want || u.MeanPercent != want || u.GPUs != 1 || !u.At.Equal(now) {
				t.Errorf("%s: GPUUse %+v, want %v%% over 1 GPU at %s", ref, u, want, now)
			}
			reg := h.loop.Metrics().Registry
			if got, ok := workspaceGauge(t, reg, "berth_workspace_gpu_utilization_percent", ref.Project, ref.Name); !ok || got != want {
				t.Errorf("%s: berth_workspace_gpu_utilization_percent %v (present %v), want %v", ref, got, ok, want)
			}
		}
		if got, ok := projectGauge(t, h.loop.Metrics().Registry, "berth_project_gpu_utilization_percent", "med", set.Project("med").Spec.Tier); !ok || got != 42.5 {
			t.Errorf("berth_project_gpu_utilization_percent{med} %v (present %v), want the mean 42.5", got, ok)
		}
		d, ok := h.loop.Model().Workspace(b)
		if !ok || !strings.Contains(strings.Join(d.Explanation, " "), "GPU utilization: 85%, read at "+now.UTC().Format("15:04:05")+".") {
			t.Errorf("b's explanation does not say its utilization: %q", d.Explanation)
		}

		if err := h.cluster.SetUse(b); err != nil { // no reading any more
			t.Fatal(err)
		}
		if _, err := h.loop.Once(t.Context()); err != nil {
			t.Fatal(err)
		}
		if u := h.status(t, b).GPUUse; u != nil {
			t.Errorf("b has no reading, its status has %+v", u)
		}
		if _, ok := workspaceGauge(t, h.loop.Metrics().Registry, "berth_workspace_gpu_utilization_percent", "med", "b"); ok {
			t.Errorf("b has no reading, its series stayed")
		}
	})
}
