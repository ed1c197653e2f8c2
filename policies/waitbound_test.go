package policies

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
	"pgregory.net/rapid"
)

// TestPropWaitBound: the wait bounds (Aging.MaxWait; doc.go states
// them) over generated workloads. A small cluster; projects with quotas
// from none to more than the cluster and past usage that fair share
// would hold against them; jobs of one tier, every shape that fits the
// cluster (gangs included), arriving over six hours and running up to
// L; a decision every step, applied as a reconciler would. Every job
// starts by
//
//	queued + maxWait + (n+1)·(L+step)
//
// where n counts the jobs queued before it that had not started when it
// became overdue, and the starts inside a quota once it is overdue
// (borrowing, it waits for those); and a job inside its team's quota,
// when the quotas fit the cluster and every replica's GPUs divide a
// node's, by the same with n counting its own team's work only
// (quotaBound). Half the jobs checkpoint, so attained-service ordering,
// when the draw turns it on, preempts them for less-served work of their
// team or on borrowed GPUs: the bounds hold with it (each preemption
// counts in n, as any other).
func TestPropWaitBound(t *testing.T) {
	const (
		step    = 5 * time.Minute
		maxWait = time.Hour
		longest = 2 * time.Hour // L: the longest a job runs
	)
	rapid.Check(t, func(t *rapid.T) {
		start := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
		var snap drivers.Snapshot
		nNodes := rapid.IntRange(1, 3).Draw(t, "nodes")
		perNode := rapid.SampledFrom([]int{2, 4, 8}).Draw(t, "gpusPerNode")
		for i := range nNodes {
			n := drivers.Node{Name: fmt.Sprintf("n%d", i), ID: fmt.Sprintf("n%d", i), Ready: true, Eligible: true}
			for g := range perNode {
				n.GPUs = append(n.GPUs, drivers.GPU{ID: fmt.Sprintf("g%d", g), Index: g, Model: "H100", Domain: g * 2 / perNode, Healthy: true})
			}
			snap.Nodes = append(snap.Nodes, n)
		}
		set := schema.Set{Revision: "bound", Policy: schema.DefaultPolicy()}
		set.Policy.Spec.Aging.MaxWait = maxWait
		set.Policy.Spec.FairShare.HalfLife = 24 * time.Hour
		// Attained-service ordering: the default, steps these runs pass
		// often, or off; jobs that checkpoint yield to less-served work.
		set.Policy.Spec.Service = rapid.SampledFrom([]schema.ServicePolicy{set.Policy.Spec.Service, {Steps: []float64{0.25, 1}, Promote: 2}, {}}).Draw(t, "service")
		set.Tiers = []schema.PriorityTier{{Meta: schema.Meta{Name: "medium"}, Spec: schema.TierSpec{Value: 50, Preemptible: true, CanPreempt: true}}}
		hist := drivers.History{UsageAt: start, Usage: map[string]float64{}}
		nProj := rapid.IntRange(1, 3).Draw(t, "projects")
		for i := range nProj {
			name := fmt.Sprintf("p%d", i)
			set.Projects = append(set.Projects, schema.Project{Meta: schema.Meta{Name: name}, Spec: schema.ProjectSpec{
				Tier:        "medium",
				Quota:       schema.Resources{GPUs: rapid.IntRange(0, nNodes*perNode).Draw(t, "quota")},
				BorrowLimit: schema.BorrowLimit{GPUs: schema.Unlimited},
				FairShare:   schema.FairShare{Weight: float64(rapid.IntRange(1, 3).Draw(t, "weight"))},
			}})
			hist.Usage[name] = float64(rapid.IntRange(0, 50).Draw(t, "usageGPUHours")) * 3600
		}
		type job struct {
			ws       schema.Workspace
			arrive   time.Time
			run      time.Duration
			started  time.Time // first start
			runStart time.Time // current run; zero: not running
			done     bool
			doneAt   time.Time
			// preempted: when it was preempted, each time.
			preempted []time.Time
			// inQuota: when it started inside its project's quota, each
			// time.
			inQuota []time.Time
		}
		var jobs []*job
		nJobs := rapid.IntRange(1, 24).Draw(t, "jobs")
		for i := range nJobs {
			replicas := 1
			if nNodes > 1 && rapid.IntRange(0, 3).Draw(t, "gang") == 0 {
				replicas = rapid.IntRange(2, nNodes).Draw(t, "replicas")
			}
			jobs = append(jobs, &job{
				ws: schema.Workspace{Meta: schema.Meta{Name: fmt.Sprintf("j%02d", i), Project: fmt.Sprintf("p%d", rapid.IntRange(0, nProj-1).Draw(t, "project"))}, Spec: schema.WorkspaceSpec{
					State: schema.DesiredRunning, Replicas: replicas, Preemptible: true,
					Resources:  schema.WorkResources{GPUs: rapid.IntRange(1, perNode).Draw(t, "gpus")},
					Checkpoint: rapid.SampledFrom([]schema.Checkpoint{{}, {Signal: "SIGTERM", GracePeriod: time.Minute}}).Draw(t, "checkpoint"),
				}},
				arrive: start.Add(time.Duration(rapid.IntRange(0, 72).Draw(t, "arrive")) * step),
				run:    time.Duration(rapid.IntRange(1, int(longest/step)).Draw(t, "run")) * step,
			})
		}
		byRef := map[schema.Ref]*job{}
		for _, j := range jobs {
			byRef[j.ws.Ref()] = j
		}
		// queuedBefore: j queued before k, in the queue's order of ties.
		queuedBefore := func(j, k *job) bool {
			return j.arrive.Before(k.arrive) || (j.arrive.Equal(k.arrive) && j.ws.Ref().Less(k.ws.Ref()))
		}
		// bound: a job that waits past maxWait starts by then. The jobs
		// queued before it that were still there when it became overdue
		// may go first, each once, and again each time it is preempted
		// after that.
		bound := func(j *job) time.Time {
			overdue := j.arrive.Add(maxWait)
			n := 0
			for _, k := range jobs {
				if !queuedBefore(k, j) || (k.done && !k.doneAt.After(overdue)) {
					continue
				}
				n++
				for _, at := range k.preempted {
					if !at.Before(overdue) {
						n++
					}
				}
			}
			// Work inside its team's quota is not borrowable capacity:
			// another team's is never bound by the overdue, and j's own
			// team's is not bound by another team's overdue pick ahead
			// of j. Each such start once j is overdue may go first.
			for _, k := range jobs {
				if k == j {
					continue
				}
				for _, at := range k.inQuota {
					if !at.Before(overdue) {
						n++
					}
				}
			}
			return overdue.Add(time.Duration(n+1) * (longest + step))
		}
		// quotaBound: the per-team bound. When the quotas add up to no
		// more than the cluster and the shapes tile its nodes, a job
		// that fits its project's quota together with its team's work
		// queued before it (still there when it became overdue) starts,
		// whatever other teams do, within maxWait of queueing plus
		// (n+1)·(L+step), n counting only its own team's work: those
		// jobs queued before it (and
		// again each time one is preempted after that), and those
		// queued after it that started before it. Where there is no such
		// bound for j, it returns a century.
		sumQuota := 0
		for _, p := range set.Projects {
			sumQuota += p.Spec.Quota.GPUs
		}
		quotaOf := map[string]int{}
		for _, p := range set.Projects {
			quotaOf[p.Meta.Name] = p.Spec.Quota.GPUs
		}
		// tiles: every replica's GPUs divide a node's, so no work leaves
		// GPUs that another's replica could not use.
		tiles := true
		for _, j := range jobs {
			tiles = tiles && perNode%j.ws.Spec.Resources.GPUs == 0
		}
		quotaBound := func(j *job) time.Time {
			if !tiles || sumQuota > nNodes*perNode || j.ws.Spec.Replicas*j.ws.Spec.Resources.GPUs > quotaOf[j.ws.Meta.Project] {
				return j.arrive.Add(100 * 365 * 24 * time.Hour) // none
			}
			overdue := j.arrive.Add(maxWait)
			n, need := 0, j.ws.Spec.Replicas*j.ws.Spec.Resources.GPUs
			for _, k := range jobs {
				if k == j || k.ws.Meta.Project != j.ws.Meta.Project {
					continue
				}
				if queuedBefore(k, j) {
					if k.done && !k.doneAt.After(overdue) {
						continue
					}
					n++
					need += k.ws.Spec.Replicas * k.ws.Spec.Resources.GPUs
					for _, at := range k.preempted {
						if !at.Before(overdue) {
							n++
						}
					}
				} else if !k.started.IsZero() {
					n++
				}
			}
			if need > quotaOf[j.ws.Meta.Project] {
				// Its team's earlier work borrows: an overdue borrower
				// goes before its own team's work, and its wait is over
				// borrowable capacity (bound above).
				return j.arrive.Add(100 * 365 * 24 * time.Hour)
			}
			return overdue.Add(time.Duration(n+1) * (longest + step))
		}
		in := Input{Snapshot: &snap, History: &hist}
		for now := start; ; now = now.Add(step) {
			// Jobs whose run ended leave the specs and the cluster.
			var allocs []drivers.Alloc
			for _, a := range in.Snapshot.Allocs {
				if j := byRef[a.Workspace]; now.Sub(j.runStart) >= j.run {
					j.done, j.doneAt = true, now
					continue
				}
				allocs = append(allocs, a)
			}
			cur := *in.Snapshot
			cur.Allocs, cur.ObservedAt = allocs, now
			specs := set
			specs.Workspaces = nil
			left := 0
			for _, j := range jobs {
				if !j.done && !now.Before(j.arrive) {
					specs.Workspaces = append(specs.Workspaces, j.ws)
				}
				if !j.done {
					left++
				}
			}
			if left == 0 {
				break
			}
			specs.Sort()
			in = Input{Specs: &specs, Snapshot: &cur, History: in.History, Now: now}
			d := Decide(in)
			for _, w := range d.Workspaces {
				j := byRef[w.Ref]
				switch w.Verdict {
				case VerdictStart:
					if j.started.IsZero() {
						j.started = now
					}
					j.runStart = now
					if !w.Borrowed {
						j.inQuota = append(j.inQuota, now)
					}
				case VerdictPreempt:
					j.runStart = time.Time{} // runs again from the start
					j.preempted = append(j.preempted, now)
				case VerdictWait:
					if b := quotaBound(j); j.started.IsZero() && now.After(b) {
						t.Fatalf("%s (%d×%d GPUs, queued %s, inside its quota) still waits at %s, past its team's bound %s:\n%s", w.Ref, j.ws.Spec.Replicas, j.ws.Spec.Resources.GPUs, j.arrive.Format("15:04"), now.Format("15:04"), b.Format("15:04"), Render(d))
					}
					if b := bound(j); j.started.IsZero() && now.After(b) {
						t.Fatalf("%s (%d×%d GPUs, queued %s) still waits at %s, past its bound %s:\n%s", w.Ref, j.ws.Spec.Replicas, j.ws.Spec.Resources.GPUs, j.arrive.Format("15:04"), now.Format("15:04"), b.Format("15:04"), Render(d))
					}
				}
			}
			in = apply(in, d, now)
			if now.Sub(start) > 7*24*time.Hour {
				var waiting []string
				for _, j := range jobs {
					if !j.done {
						waiting = append(waiting, j.ws.Ref().String())
					}
				}
				slices.Sort(waiting)
				t.Fatalf("jobs still not done after a week: %v", waiting)
			}
		}
	})
}
