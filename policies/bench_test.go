package policies

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
)

// benchSize is one size the issue names: pending workspaces, GPUs (8-GPU
// nodes with 2 NVLink domains and 2 NUMA nodes each) and projects, with
// half the GPUs already busy.
type benchSize struct {
	pending, gpus, projects int
	// heavy: no quotas and every running workspace in a low-tier project,
	// so once free GPUs run out the higher tiers preempt (the costly path).
	heavy bool
}

var benchSizes = []benchSize{
	{pending: 1_000, gpus: 512, projects: 16},
	{pending: 10_000, gpus: 4_096, projects: 64},
	{pending: 50_000, gpus: 16_384, projects: 1_000},
}

func (s benchSize) String() string {
	name := fmt.Sprintf("pending=%d/gpus=%d/projects=%d", s.pending, s.gpus, s.projects)
	if s.heavy {
		name += "/preempt-heavy"
	}
	return name
}

// allBenchSizes are the sizes, then the same in the
// preemption-heavy variant.
func allBenchSizes() []benchSize {
	out := append([]benchSize(nil), benchSizes...)
	for _, s := range benchSizes {
		s.heavy = true
		out = append(out, s)
	}
	return out
}

// benchInput generates a cluster and workload of size s from a fixed seed:
// four tiers, quotas that add up to the cluster, weights 1–3; running
// workspaces fill half the GPUs (1, 2, 4 or 8 GPUs each, packed node by
// node); pending ones mostly want 1–2 GPUs, some 4 or 8, a tenth require
// one NVLink domain, one in fifty is a 2-replica gang.
func benchInput(s benchSize) Input {
	r := rand.New(rand.NewPCG(uint64(s.pending), uint64(s.gpus)))
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	set := &schema.Set{Revision: "bench", Policy: schema.DefaultPolicy()}
	set.Policy.Spec.Preemption.MinRuntime = 10 * time.Minute
	for i, name := range []string{"low", "medium", "high", "highest"} {
		set.Tiers = append(set.Tiers, schema.PriorityTier{Meta: schema.Meta{Name: name}, Spec: schema.TierSpec{Value: 20 + 25*i, Preemptible: i < 3, CanPreempt: true}})
	}
	tierFor := func(p int) string {
		switch x := p % 10; {
		case x < 5:
			return "low"
		case x < 8:
			return "medium"
		case x < 9:
			return "high"
		}
		return "highest"
	}
	quota := s.gpus / s.projects
	if s.heavy {
		quota = 0
	}
	for p := range s.projects {
		set.Projects = append(set.Projects, schema.Project{Meta: schema.Meta{Name: fmt.Sprintf("p%04d", p)}, Spec: schema.ProjectSpec{
			Tier: tierFor(p), Quota: schema.Resources{GPUs: quota}, BorrowLimit: schema.BorrowLimit{GPUs: schema.Unlimited},
			FairShare: schema.FairShare{Weight: float64(1 + p%3)},
		}})
	}
	snap := &drivers.Snapshot{ObservedAt: now}
	nodes := s.gpus / 8
	for n := range nodes {
		node := drivers.Node{Name: fmt.Sprintf("node-%05d", n), Ready: true, Eligible: true}
		node.ID = node.Name
		for g := range 8 {
			node.GPUs = append(node.GPUs, drivers.GPU{ID: fmt.Sprintf("gpu-%d", g), Index: g, Model: "H100", Domain: g / 4, NUMA: g / 4, Healthy: true})
		}
		snap.Nodes = append(snap.Nodes, node)
	}
	hist := &drivers.History{UsageAt: now.Add(-time.Minute), Usage: map[string]float64{}, QueuedSince: map[schema.Ref]time.Time{}}
	for p := range s.projects {
		hist.Usage[fmt.Sprintf("p%04d", p)] = float64(r.IntN(10_000_000))
	}
	id := 0
	newWS := func(gpus, replicas int, nvlink schema.Constraint, running bool) schema.Ref {
		p := r.IntN(s.projects)
		if running && s.heavy {
			p = p/10*10 + r.IntN(5) // a low-tier project
			if p >= s.projects {
				p = r.IntN(5)
			}
		}
		w := schema.Workspace{Meta: schema.Meta{Name: fmt.Sprintf("w%06d", id), Project: fmt.Sprintf("p%04d", p)}, Spec: schema.WorkspaceSpec{
			State: schema.DesiredRunning, Replicas: replicas, Preemptible: true,
			Resources: schema.WorkResources{GPUs: gpus},
			Topology:  schema.Topology{NVLink: nvlink, NUMA: schema.ConstraintNone},
		}}
		id++
		set.Workspaces = append(set.Workspaces, w)
		return w.Ref()
	}
	// Running: half the GPUs, a random share of each node (0–8 GPUs,
	// about 4 on average) in workspaces of 1, 2, 4 or 8 GPUs.
	busy := s.gpus / 2
	for n := 0; busy > 0; n = (n + 1) % nodes {
		used := 0
		for _, a := range snap.Allocs {
			if a.Node == snap.Nodes[n].Name {
				used += len(a.GPUs)
			}
		}
		want := min(r.IntN(9)-used, busy)
		for want > 0 {
			g := min([]int{1, 2, 4, 8}[r.IntN(4)], want)
			ref := newWS(g, 1, schema.ConstraintPreferred, true)
			a := drivers.Alloc{Workspace: ref, Node: snap.Nodes[n].Name, Phase: drivers.AllocRunning, StartedAt: now.Add(-time.Duration(1+r.IntN(600)) * time.Minute)}
			for i := range g {
				a.GPUs = append(a.GPUs, fmt.Sprintf("gpu-%d", used+i))
			}
			if r.IntN(2) == 0 {
				a.LastCheckpoint = a.StartedAt.Add(now.Sub(a.StartedAt) / 2)
			}
			snap.Allocs = append(snap.Allocs, a)
			used += g
			want -= g
			busy -= g
		}
	}
	for range s.pending {
		g := []int{1, 1, 1, 2, 2, 4, 8}[r.IntN(7)]
		nv := schema.ConstraintPreferred
		if r.IntN(10) == 0 {
			nv = schema.ConstraintRequired
		}
		replicas := 1
		if r.IntN(50) == 0 {
			replicas = 2
		}
		ref := newWS(g, replicas, nv, false)
		hist.QueuedSince[ref] = now.Add(-time.Duration(r.IntN(300)) * time.Minute)
	}
	set.Sort()
	sortAllocs(snap.Allocs)
	return Input{Specs: set, Snapshot: snap, History: hist, Now: now}
}

// BenchmarkDecide measures one decision at each of the sizes.
// make bench runs it; targets on the 2-core machine: ≤ 10 ms, ≤ 100 ms,
// ≤ 1 s per decision.
//
// After each size it logs the growth against the previous size next to
// the growth of n log n (n = pending + GPUs); the cost must grow no faster.
func BenchmarkDecide(b *testing.B) {
	var prev, prevAllocs, prevN float64
	for i, s := range allBenchSizes() {
		if i == len(benchSizes) {
			prev = 0
		}
		in := benchInput(s)
		var perOp, allocsPerOp float64
		b.Run(s.String(), func(b *testing.B) {
			b.ReportAllocs()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for b.Loop() {
				Decide(in)
			}
			runtime.ReadMemStats(&after)
			perOp = float64(b.Elapsed()) / float64(b.N)
			allocsPerOp = float64(after.Mallocs-before.Mallocs) / float64(b.N)
		})
		n := float64(s.pending + s.gpus)
		if prev > 0 && perOp > 0 {
			// Time is noisy on a shared machine; allocations count work
			// and do not depend on the neighbours.
			fmt.Printf("growth %s: ×%.1f time, ×%.1f allocations per decision, for ×%.1f n log n\n",
				s, perOp/prev, allocsPerOp/prevAllocs, n*math.Log2(n)/(prevN*math.Log2(prevN)))
		}
		prev, prevAllocs, prevN = perOp, allocsPerOp, n
	}
}

// TestDecideGrowth prints the time per decision at each size and how it
// grows against n log n (n = pending + GPUs), and fails if it grows more
// than twice as fast. It runs only with BERTH_GROWTH=1 (make bench sets
// it): timing on a shared machine does not belong in every test run.
func TestDecideGrowth(t *testing.T) {
	if os.Getenv("BERTH_GROWTH") == "" {
		t.Skip("set BERTH_GROWTH=1 to measure growth")
	}
	var prev time.Duration
	var prevN float64
	for i, s := range allBenchSizes() {
		if i == len(benchSizes) {
			prev = 0 // the heavy variant starts its own ratios
		}
		in := benchInput(s)
		counts := map[Verdict]int{}
		for _, w := range Decide(in).Workspaces {
			counts[w.Verdict]++
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		best := time.Duration(math.MaxInt64)
		const runs = 3
		for range runs {
			start := time.Now()
			Decide(in)
			best = min(best, time.Since(start))
		}
		runtime.ReadMemStats(&ms)
		n := float64(s.pending + s.gpus)
		nlogn := n * math.Log2(n)
		line := fmt.Sprintf("%-40s %12v per decision, %6.1f MB allocated (run %d, start %d, preempt %d, wait %d)", s, best, float64(ms.TotalAlloc-before)/runs/1e6,
			counts[VerdictRun], counts[VerdictStart], counts[VerdictPreempt], counts[VerdictWait])
		if prev > 0 {
			ratio := float64(best) / float64(prev)
			bound := nlogn / (prevN * math.Log2(prevN))
			line += fmt.Sprintf("; ×%.1f time for ×%.1f n log n", ratio, bound)
			if ratio > 2*bound {
				t.Errorf("%s: time grew ×%.1f, more than twice n log n (×%.1f)", s, ratio, bound)
			}
		}
		t.Log(line)
		prev, prevN = best, n
	}
}

// withCPUMemQuotas turns a benchInput into one where every quota names
// CPU and memory too (8 CPUs and 64Gi per guaranteed GPU, borrowing the
// same again at most), every workspace asks 4, 8 or 16 CPUs and 32, 64
// or 128Gi per GPU (so CPU and memory, not GPUs, often decide who is in
// quota), and every node offers 128 CPUs and 1Ti. Running allocations
// hold what their spec asks (nodes may end up overcommitted: the
// decision then places nothing more there).
func withCPUMemQuotas(in Input) Input {
	r := rand.New(rand.NewPCG(7, uint64(len(in.Specs.Workspaces))))
	for i := range in.Specs.Projects {
		p := &in.Specs.Projects[i].Spec
		p.Quota.CPUMHz, p.Quota.MemoryBytes = int64(p.Quota.GPUs)*8000, int64(p.Quota.GPUs)*64<<30
		p.BorrowLimit.CPUMHz, p.BorrowLimit.MemoryBytes = p.Quota.CPUMHz, p.Quota.MemoryBytes
	}
	for i := range in.Specs.Workspaces {
		res := &in.Specs.Workspaces[i].Spec.Resources
		g := int64(max(res.GPUs, 1))
		res.CPUMHz = g * []int64{4000, 8000, 16000}[r.IntN(3)]
		res.MemoryBytes = g * []int64{32 << 30, 64 << 30, 128 << 30}[r.IntN(3)]
	}
	for i := range in.Snapshot.Nodes {
		in.Snapshot.Nodes[i].CPUMHz, in.Snapshot.Nodes[i].MemoryBytes = 128_000, 1<<40
	}
	for i := range in.Snapshot.Allocs {
		a := &in.Snapshot.Allocs[i]
		res := in.Specs.Workspace(a.Workspace).Spec.Resources
		a.CPUMHz, a.MemoryBytes = res.CPUMHz, res.MemoryBytes
	}
	return in
}

// BenchmarkDecideCPUQuota is BenchmarkDecide's sizes (without the
// preemption-heavy variant, which has no quotas) with CPU and memory
// quotas named (withCPUMemQuotas): the same targets hold.
func BenchmarkDecideCPUQuota(b *testing.B) {
	for _, s := range benchSizes {
		in := withCPUMemQuotas(benchInput(s))
		b.Run(s.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Decide(in)
			}
		})
	}
}

// TestCPUQuotaBenchDecides: the CPU-quota benchmark's input exercises
// what it is meant to: some workspaces start beyond their quota and some
// wait for their CPU or memory quota.
func TestCPUQuotaBenchDecides(t *testing.T) {
	in := withCPUMemQuotas(benchInput(benchSizes[0]))
	borrowed, quotaWaits := 0, 0
	for _, w := range Decide(in).Workspaces {
		if w.Verdict == VerdictStart && w.Borrowed {
			borrowed++
		}
		if w.Verdict == VerdictWait && (strings.Contains(w.Reason.Message, "CPU quota") || strings.Contains(w.Reason.Message, "memory quota")) {
			quotaWaits++
		}
	}
	if borrowed == 0 || quotaWaits == 0 {
		t.Errorf("%d starts borrow, %d wait for a CPU or memory quota; want some of each", borrowed, quotaWaits)
	}
}

// kindsInput is benchInput(s) on a fleet of three declared kinds: a
// third of the nodes hold H100s (kind h100), a third L40S (l40s) and a
// third 1g.10gb MIG instances (slice); each project's quota is split
// among the three kinds, each running workspace asks for the kind it
// runs on, each pending one for a kind at random.
func kindsInput(s benchSize) Input {
	in := benchInput(s)
	r := rand.New(rand.NewPCG(uint64(s.pending)+1, uint64(s.gpus)))
	set := in.Specs
	set.Kinds = []schema.GPUKind{
		{Meta: schema.Meta{Name: "h100"}, Spec: schema.GPUKindSpec{Match: "H100"}},
		{Meta: schema.Meta{Name: "l40s"}, Spec: schema.GPUKindSpec{Match: "L40S"}},
		{Meta: schema.Meta{Name: "slice"}, Spec: schema.GPUKindSpec{Match: "* MIG 1g.10gb"}},
	}
	models := []string{"H100", "L40S", "H100 MIG 1g.10gb"}
	kindOn := map[string]string{} // node → kind
	for i := range in.Snapshot.Nodes {
		n := &in.Snapshot.Nodes[i]
		for g := range n.GPUs {
			n.GPUs[g].Model = models[i%3]
		}
		kindOn[n.Name] = set.Kinds[i%3].Meta.Name
	}
	for i := range set.Projects {
		q := &set.Projects[i].Spec.Quota
		q.Kinds = map[string]int{"h100": q.GPUs / 3, "l40s": q.GPUs / 3, "slice": q.GPUs / 3}
		q.GPUs = 0
	}
	running := map[schema.Ref]string{}
	for _, a := range in.Snapshot.Allocs {
		running[a.Workspace] = kindOn[a.Node]
	}
	for i := range set.Workspaces {
		w := &set.Workspaces[i]
		k, ok := running[w.Ref()]
		if !ok {
			k = set.Kinds[r.IntN(3)].Meta.Name
		}
		w.Spec.Resources.GPUKind = k
	}
	return in
}

// BenchmarkDecideKinds measures one decision over three kinds with
// quotas per kind, 10,000 pending on 4,096 GPUs: the target is
// ≤ 100 ms on the 2-core machine, as for one kind.
func BenchmarkDecideKinds(b *testing.B) {
	in := kindsInput(benchSizes[1])
	b.ReportAllocs()
	for b.Loop() {
		Decide(in)
	}
}

// BenchmarkDecideLimits is BenchmarkDecide's 10,000 with every tier
// limited to 72h, an idle rule in the policy, and every running
// workspace with a run time and a reading in the history: what the
// limits (limits.go) cost where they are all on.
func BenchmarkDecideLimits(b *testing.B) {
	in := benchInput(benchSizes[1])
	set := in.Specs
	limit := 72 * time.Hour
	for i := range set.Tiers {
		set.Tiers[i].Spec.MaxRuntime = &limit
	}
	set.Policy.Spec.Idle = schema.IdleRule{After: 4 * time.Hour}
	hist := *in.History
	hist.Ran = map[schema.Ref]drivers.RunTime{}
	hist.Idle = map[schema.Ref]drivers.IdleSpan{}
	for i, a := range in.Snapshot.Allocs {
		hist.Ran[a.Workspace] = drivers.RunTime{Ran: time.Duration(i%80) * time.Hour}
		hist.Idle[a.Workspace] = drivers.IdleSpan{Since: in.Now.Add(-time.Duration(i%6) * time.Hour), Last: in.Now}
	}
	in.History = &hist
	b.ReportAllocs()
	for b.Loop() {
		Decide(in)
	}
}
