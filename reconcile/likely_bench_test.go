package reconcile

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/policies"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
)

// BenchmarkPredictAll measures what run times and likely starts add to
// each cycle's status at scale: 50,000 workspaces in 1,000 projects,
// 4,096 of them running on 2,048 nodes of 8 GPUs (16,384 GPUs, all
// busy), the other 45,904 waiting; 32 past runs per project and size.
func BenchmarkPredictAll(b *testing.B) {
	const n, running, nodes = 50_000, 4_096, 2_048
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	set := tiersAndProjects()
	set.Projects = nil
	hist := drivers.History{RunTimes: map[string][]time.Duration{}}
	for p := range 1000 {
		name := fmt.Sprintf("team-%03d", p)
		set.Projects = append(set.Projects, schema.Project{Meta: schema.Meta{Name: name}, Spec: schema.ProjectSpec{Tier: "medium"}})
		for _, g := range []int{1, 2, 4, 8} {
			k := fmt.Sprintf("%s//%d", name, g)
			for i := range 32 {
				hist.RunTimes[k] = append(hist.RunTimes[k], time.Duration(i+1)*time.Duration(g)*time.Hour/4)
			}
		}
	}
	snap := &drivers.Snapshot{ObservedAt: now}
	for i := range nodes {
		node := drivers.Node{Name: fmt.Sprintf("n%04d", i), Ready: true, Eligible: true}
		for g := range 8 {
			node.GPUs = append(node.GPUs, drivers.GPU{ID: fmt.Sprintf("n%04d-g%d", i, g), Index: g, Healthy: true})
		}
		snap.Nodes = append(snap.Nodes, node)
	}
	d := policies.Decision{Now: now}
	l := &Loop{records: map[schema.Ref]*record{}}
	slot := 0
	for i := range n {
		w := workspace(fmt.Sprintf("team-%03d", i%1000), fmt.Sprintf("ws-%05d", i), schema.DesiredRunning)
		w.Spec.Resources.GPUs = []int{1, 2, 4, 8}[i%4]
		if i%7 == 0 {
			w.Spec.ExpectedDuration = 6 * time.Hour
		}
		set.Workspaces = append(set.Workspaces, w)
		wd := policies.WorkspaceDecision{Ref: w.Ref(), Verdict: policies.VerdictWait, Queue: i + 1}
		st := view.StatePending
		if i < running {
			wd.Verdict, wd.Queue, st = policies.VerdictRun, 0, view.StateRunning
			gpus := []string{}
			for range w.Spec.Resources.GPUs {
				gpus = append(gpus, fmt.Sprintf("n%04d-g%d", slot/8, slot%8))
				slot++
			}
			snap.Allocs = append(snap.Allocs, drivers.Alloc{Workspace: w.Ref(), Node: fmt.Sprintf("n%04d", (slot-1)/8), GPUs: gpus,
				Phase: drivers.AllocRunning, StartedAt: now.Add(-time.Hour)})
		}
		d.Workspaces = append(d.Workspaces, wd)
		l.records[w.Ref()] = &record{status: view.WorkspaceStatus{Project: w.Meta.Project, Name: w.Meta.Name, State: st}}
	}
	set.Sort()
	slices.SortFunc(d.Workspaces, func(a, b policies.WorkspaceDecision) int { return a.Ref.Compare(b.Ref) }) // as Decide returns them
	b.ResetTimer()
	for b.Loop() {
		l.predictAll(set, snap, d, &hist, now)
	}
	known := 0
	for _, r := range l.records {
		if r.status.LikelyStart != nil && r.status.LikelyStart.Known {
			known++
		}
	}
	b.ReportMetric(float64(known), "known")
}
