package policies

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
	"pgregory.net/rapid"
)

var propNow = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

// genOrdering biases genInput towards attained-service ordering: one
// tier for every project and workspace, every workspace checkpointing
// (TestPropOrdering sets it).
var genOrdering bool

// genTiers is how many of n tiers genInput's projects draw from.
func genTiers(n int) int {
	if genOrdering {
		return 1
	}
	return n
}

// verifying turns on Decide's index self-check for one test.
func verifying(t *testing.T) {
	verifyIndexes = true
	t.Cleanup(func() { verifyIndexes = false })
}

// genInput draws a small cluster and workload: nodes with NVLink domains,
// NUMA nodes, two GPU models and a MIG instance's, some unhealthy GPUs and unusable nodes;
// tiers, projects with quotas, borrow limits and weights; workspaces of
// every shape, some running (validly placed), some stopping, some
// orphaned; history with usage, queue times and preemptions.
func genInput(t *rapid.T) Input {
	// A MIG instance's model, as the NVIDIA device plugin names its group:
	// a node of it has slices of GPUs (the parents hidden), never whole ones.
	models := []string{"H100", "A100", "A100 MIG 1g.10gb"}
	var snap drivers.Snapshot
	snap.ObservedAt = propNow
	nNodes := rapid.IntRange(1, 5).Draw(t, "nodes")
	for i := range nNodes {
		n := drivers.Node{Name: fmt.Sprintf("n%d", i), Ready: rapid.IntRange(0, 9).Draw(t, "ready") > 0, Eligible: rapid.IntRange(0, 9).Draw(t, "eligible") > 0,
			CPUMHz:      rapid.SampledFrom([]int64{0, 16000, 32000, 64000}).Draw(t, "nodeCPU"),
			MemoryBytes: rapid.SampledFrom([]int64{0, 32 << 30, 256 << 30}).Draw(t, "nodeMem"),
			DiskBytes:   rapid.SampledFrom([]int64{0, 1 << 30, 100 << 30}).Draw(t, "nodeDisk")}
		n.ID = n.Name
		if !n.Ready {
			n.Status = rapid.SampledFrom([]string{"down", "disconnected", "initializing"}).Draw(t, "status")
		}
		if !n.Eligible {
			n.Draining = rapid.Bool().Draw(t, "draining")
		}
		if n.CPUMHz > 0 && rapid.Bool().Draw(t, "nodeCores") {
			n.Cores = int(n.CPUMHz / 2000)
			n.CPUPerCore = 2000
		}
		if rapid.Bool().Draw(t, "features") {
			n.Features = true
			n.Drivers = rapid.SampledFrom([][]string{{}, {"raw_exec"}, {"docker", "raw_exec"}}).Draw(t, "drivers")
			n.HostVolumes = rapid.SampledFrom([][]string{{}, {"data"}}).Draw(t, "hostVolumes")
		}
		count := rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(t, "gpus")
		doms := rapid.IntRange(1, 2).Draw(t, "domains")
		numas := rapid.IntRange(1, 2).Draw(t, "numas")
		model := rapid.SampledFrom(models).Draw(t, "model")
		for g := range count {
			n.GPUs = append(n.GPUs, drivers.GPU{ID: fmt.Sprintf("g%d", g), Index: g, Model: model, Domain: g * doms / count, NUMA: g * numas / count, Healthy: rapid.IntRange(0, 19).Draw(t, "healthy") > 0})
		}
		// Now and then a second device group of whole GPUs: another model.
		if also := rapid.IntRange(0, 3).Draw(t, "alsoGPUs"); also > 0 && rapid.IntRange(0, 2).Draw(t, "also") == 0 {
			other := "L40S"
			for g := count; g < count+also; g++ {
				n.GPUs = append(n.GPUs, drivers.GPU{ID: fmt.Sprintf("g%d", g), Index: g, Model: other, Healthy: rapid.IntRange(0, 19).Draw(t, "healthy") > 0})
			}
		}
		snap.Nodes = append(snap.Nodes, n)
	}
	set := &schema.Set{Revision: "r", Policy: schema.DefaultPolicy()}
	// Now and then declared kinds (their patterns never overlap), a
	// kind matching no GPU among them.
	if rapid.Bool().Draw(t, "kinds") {
		for _, k := range []schema.GPUKind{
			{Meta: schema.Meta{Name: "h100"}, Spec: schema.GPUKindSpec{Match: "H100"}},
			{Meta: schema.Meta{Name: "a100"}, Spec: schema.GPUKindSpec{Match: "a100"}},
			{Meta: schema.Meta{Name: "slice"}, Spec: schema.GPUKindSpec{Match: "* MIG 1g.10gb"}},
			{Meta: schema.Meta{Name: "l40s"}, Spec: schema.GPUKindSpec{Match: "L40*"}},
			{Meta: schema.Meta{Name: "b200"}, Spec: schema.GPUKindSpec{Match: "B200"}},
		} {
			if rapid.IntRange(0, 3).Draw(t, "declare") > 0 {
				set.Kinds = append(set.Kinds, k)
			}
		}
	}
	ps := &set.Policy.Spec
	ps.Preemption.MinRuntime = rapid.SampledFrom([]time.Duration{0, 0, 10 * time.Minute}).Draw(t, "minRuntime")
	ps.Preemption.MaxVictims = rapid.IntRange(1, 8).Draw(t, "maxVictims")
	ps.Preemption.Enabled = rapid.IntRange(0, 9).Draw(t, "preempt") > 0
	tierNames := []string{"low", "medium", "high"}
	for i, name := range tierNames {
		set.Tiers = append(set.Tiers, schema.PriorityTier{Meta: schema.Meta{Name: name}, Spec: schema.TierSpec{Value: 20 + 30*i, Preemptible: rapid.IntRange(0, 5).Draw(t, "tierPreemptible") > 0, CanPreempt: rapid.IntRange(0, 5).Draw(t, "tierCanPreempt") > 0}})
	}
	// The top tier's opt-in to take other teams' in-quota work, now and
	// then, below medium or below high.
	if rapid.IntRange(0, 3).Draw(t, "cohort") == 0 {
		set.Tiers[2].Spec.BorrowWithinCohort = &schema.BorrowWithinCohort{Below: rapid.SampledFrom([]string{"medium", "high"}).Draw(t, "cohortBelow")}
	}
	// Attained-service ordering: the default's steps, others, or off; a
	// tier's ordering on, all or off.
	ps.Service = rapid.SampledFrom([]schema.ServicePolicy{ps.Service, ps.Service, {Steps: []float64{0.5, 2}, Promote: 2}, {Steps: []float64{1}}, {}}).Draw(t, "service")
	for i := range set.Tiers {
		set.Tiers[i].Spec.Ordering = rapid.SampledFrom([]schema.Ordering{"", "", schema.OrderingOn, schema.OrderingAll, schema.OrderingOff}).Draw(t, "ordering")
	}
	nProj := rapid.IntRange(1, 4).Draw(t, "projects")
	for i := range nProj {
		borrow := rapid.IntRange(-1, 6).Draw(t, "borrow")
		set.Projects = append(set.Projects, schema.Project{Meta: schema.Meta{Name: fmt.Sprintf("p%d", i)}, Spec: schema.ProjectSpec{
			Tier:        rapid.SampledFrom(tierNames[:genTiers(len(tierNames))]).Draw(t, "tier"),
			Quota:       schema.Resources{GPUs: rapid.IntRange(0, 8).Draw(t, "quota")},
			BorrowLimit: schema.BorrowLimit{GPUs: borrow},
			FairShare:   schema.FairShare{Weight: float64(rapid.IntRange(1, 3).Draw(t, "weight"))},
		}})
		// CPU and memory quotas, often not named; their borrow limits
		// often unlimited.
		p := &set.Projects[len(set.Projects)-1].Spec
		p.Quota.CPUMHz = rapid.SampledFrom([]int64{0, 0, 8000, 32000}).Draw(t, "quotaCPU")
		p.Quota.MemoryBytes = rapid.SampledFrom([]int64{0, 0, 32 << 30, 128 << 30}).Draw(t, "quotaMem")
		p.BorrowLimit.CPUMHz = rapid.SampledFrom([]int64{schema.Unlimited, 0, 8000}).Draw(t, "borrowCPU")
		p.BorrowLimit.MemoryBytes = rapid.SampledFrom([]int64{schema.Unlimited, 0, 64 << 30}).Draw(t, "borrowMem")
		// Quotas per kind, each with a borrow limit or none; the loader
		// takes no CPU or memory quota beside them.
		for _, k := range set.Kinds {
			if rapid.IntRange(0, 2).Draw(t, "kindQuota") > 0 {
				continue
			}
			if p.Quota.Kinds == nil {
				p.Quota.Kinds, p.BorrowLimit.Kinds = map[string]int{}, map[string]int{}
				p.Quota.CPUMHz, p.Quota.MemoryBytes = 0, 0
			}
			p.Quota.Kinds[k.Meta.Name] = rapid.IntRange(0, 6).Draw(t, "quotaKind")
			if b := rapid.IntRange(-1, 4).Draw(t, "borrowKind"); b >= 0 {
				p.BorrowLimit.Kinds[k.Meta.Name] = b
			}
		}
	}
	constraints := []schema.Constraint{schema.ConstraintNone, schema.ConstraintPreferred, schema.ConstraintRequired}
	// owner of each GPU while placing running workspaces
	used := map[[2]string]bool{}
	cpuUsed := map[string]amount{}
	hist := &drivers.History{UsageAt: propNow.Add(-time.Hour), Usage: map[string]float64{}, QueuedSince: map[schema.Ref]time.Time{}, Preempted: map[schema.Ref]drivers.Preemption{}}
	nWS := rapid.IntRange(1, 12).Draw(t, "workspaces")
	for i := range nWS {
		proj := fmt.Sprintf("p%d", rapid.IntRange(0, nProj-1).Draw(t, "wsProject"))
		w := schema.Workspace{Meta: schema.Meta{Name: fmt.Sprintf("w%d", i), Project: proj}, Spec: schema.WorkspaceSpec{
			State:        schema.DesiredRunning,
			Replicas:     rapid.SampledFrom([]int{1, 1, 1, 2}).Draw(t, "replicas"),
			Preemptible:  rapid.IntRange(0, 5).Draw(t, "wsPreemptible") > 0,
			UnhealthyGPU: rapid.SampledFrom([]string{"", "", schema.GPUStay}).Draw(t, "unhealthyGPU"),
			Resources: schema.WorkResources{GPUs: rapid.SampledFrom([]int{0, 1, 1, 2, 4}).Draw(t, "wsGPUs"),
				CPUMHz:      rapid.SampledFrom([]int64{0, 0, 100, 4000, 8000, 16000}).Draw(t, "wsCPU"),
				MemoryBytes: rapid.SampledFrom([]int64{0, 300 << 20, 16 << 30, 64 << 30}).Draw(t, "wsMem"),
				DiskBytes:   rapid.SampledFrom([]int64{0, 300 << 20, 512 << 20}).Draw(t, "wsDisk")},
			Task:     schema.Task{Driver: rapid.SampledFrom([]string{"", "raw_exec", "docker"}).Draw(t, "wsDriver")},
			Topology: schema.Topology{NVLink: rapid.SampledFrom(constraints).Draw(t, "nvlink"), NUMA: rapid.SampledFrom(constraints).Draw(t, "numa")},
		}}
		if w.Spec.Resources.CPUMHz == 0 && rapid.IntRange(0, 3).Draw(t, "exclusive") == 0 {
			w.Spec.Resources.ExclusiveCores = rapid.IntRange(1, 4).Draw(t, "wsCores")
		}
		if rapid.IntRange(0, 3).Draw(t, "volume") == 0 {
			w.Spec.Volumes = []schema.VolumeMount{{Name: "data", MountPath: "/data"}}
		}
		if rapid.IntRange(0, 4).Draw(t, "hasModel") == 0 {
			w.Spec.Resources.GPUModel = rapid.SampledFrom(models).Draw(t, "wsModel")
		} else if len(set.Kinds) > 0 && rapid.Bool().Draw(t, "hasKind") {
			w.Spec.Resources.GPUKind = rapid.SampledFrom(set.Kinds).Draw(t, "wsKind").Meta.Name
			// Now and then kinds in order of preference instead.
			if second := rapid.SampledFrom(set.Kinds).Draw(t, "wsKind2").Meta.Name; second != w.Spec.Resources.GPUKind && rapid.Bool().Draw(t, "kindList") {
				w.Spec.Resources.GPUKinds = []string{w.Spec.Resources.GPUKind, second}
				w.Spec.Resources.GPUKind = ""
			}
		}
		if genOrdering {
			// Same-tier work that checkpoints and asks for GPUs alone:
			// ordering's own ground.
			w.Spec.Checkpoint = schema.Checkpoint{Signal: "SIGTERM", GracePeriod: 30 * time.Second}
			w.Spec.Resources = schema.WorkResources{GPUs: w.Spec.Resources.GPUs}
			w.Spec.Volumes, w.Spec.Task.Driver = nil, ""
		}
		if !genOrdering && rapid.IntRange(0, 2).Draw(t, "hasTier") == 0 {
			w.Spec.Tier = rapid.SampledFrom(tierNames).Draw(t, "wsTier") // its own tier
		}
		if rapid.IntRange(0, 6).Draw(t, "stopped") == 0 {
			w.Spec.State = schema.DesiredStopped
		}
		// A checkpoint (a signal with a grace, or an interval) or none,
		// and now and then a port (interactive).
		if !genOrdering {
			w.Spec.Checkpoint = rapid.SampledFrom([]schema.Checkpoint{{}, {Signal: "SIGTERM", GracePeriod: 30 * time.Second}, {Interval: 30 * time.Minute}}).Draw(t, "checkpoint")
		}
		if rapid.IntRange(0, 4).Draw(t, "interactive") == 0 {
			w.Spec.Ports = []schema.Port{{Label: "http"}}
		}
		set.Workspaces = append(set.Workspaces, w)
		ref := w.Ref()
		if rapid.IntRange(0, 2).Draw(t, "queued") > 0 {
			hist.QueuedSince[ref] = propNow.Add(-time.Duration(rapid.IntRange(0, 600).Draw(t, "waited")) * time.Minute)
		}
		// Run before: attained service, and now and then the preemption
		// that ended its last run.
		if rapid.IntRange(0, 2).Draw(t, "ranBefore") == 0 {
			if hist.Ran == nil {
				hist.Ran = map[schema.Ref]drivers.RunTime{}
			}
			hist.Ran[ref] = drivers.RunTime{Ran: time.Duration(rapid.IntRange(1, 600).Draw(t, "ran")) * time.Minute}
			if rapid.Bool().Draw(t, "ranPreempted") {
				hist.Preempted[ref] = drivers.Preemption{Victim: ref, By: schema.Ref{Project: "p0", Name: "w0"}, At: propNow.Add(-time.Duration(rapid.IntRange(1, 900).Draw(t, "preemptedAgo")) * time.Minute)}
			}
		}
		if rapid.IntRange(0, 1).Draw(t, "running") == 1 {
			phase := rapid.SampledFrom([]drivers.AllocPhase{drivers.AllocRunning, drivers.AllocRunning, drivers.AllocRunning, drivers.AllocStarting, drivers.AllocStopping}).Draw(t, "phase")
			started := propNow.Add(-time.Duration(rapid.IntRange(0, 600).Draw(t, "age")) * time.Minute)
			ckpt := time.Time{}
			if rapid.Bool().Draw(t, "ckpt") {
				ckpt = started.Add(time.Duration(rapid.IntRange(0, int(propNow.Sub(started)/time.Minute)).Draw(t, "ckptAt")) * time.Minute)
			}
			allocs := placeRunning(t, snap.Nodes, used, cpuUsed, ref, w.Spec.Replicas, w.Spec.Resources.GPUs, w.Spec.Resources)
			for _, a := range allocs {
				a.Phase, a.StartedAt, a.LastCheckpoint = phase, started, ckpt
				snap.Allocs = append(snap.Allocs, a)
			}
			if phase == drivers.AllocStopping && len(allocs) > 0 && rapid.Bool().Draw(t, "byRecord") {
				hist.Preempted[ref] = drivers.Preemption{Victim: ref, By: schema.Ref{Project: "p0", Name: "w0"}, At: propNow.Add(-time.Minute)}
			}
		}
	}
	// An orphan: holds GPUs, no longer in the specs.
	if rapid.IntRange(0, 3).Draw(t, "orphan") == 0 {
		ref := schema.Ref{Project: "p0", Name: "gone"}
		for _, a := range placeRunning(t, snap.Nodes, used, cpuUsed, ref, 1, 1, schema.WorkResources{}) {
			a.Phase, a.StartedAt = drivers.AllocRunning, propNow.Add(-time.Hour)
			snap.Allocs = append(snap.Allocs, a)
		}
	}
	for _, p := range set.Projects {
		hist.Usage[p.Meta.Name] = float64(rapid.IntRange(0, 100000).Draw(t, "usage"))
	}
	set.Sort()
	sortAllocs(snap.Allocs)
	return Input{Specs: set, Snapshot: &snap, History: hist, Now: propNow}
}

// placeRunning places replicas on random nodes with free GPUs (any GPUs,
// topology ignored, as a real cluster may have them); a replica that
// finds no room is left out.
func placeRunning(t *rapid.T, nodes []drivers.Node, used map[[2]string]bool, resUsed map[string]amount, ref schema.Ref, replicas, gpus int, res schema.WorkResources) []drivers.Alloc {
	var out []drivers.Alloc
	for r := range replicas {
		ni := rapid.IntRange(0, len(nodes)-1).Draw(t, "allocNode")
		n := nodes[ni]
		a := allocFor(n, res)
		u := resUsed[n.Name].add(allocAmount(&a))
		if (n.CPUMHz > 0 && u.cpu > n.CPUMHz) || (n.MemoryBytes > 0 && u.mem > n.MemoryBytes) ||
			(n.DiskBytes > 0 && u.disk > n.DiskBytes) || (n.CPUPerCore > 0 && u.cores > int64(n.Cores)) {
			continue
		}
		var ids []string
		for _, g := range n.GPUs {
			if len(ids) < gpus && !used[[2]string{n.Name, g.ID}] {
				ids = append(ids, g.ID)
			}
		}
		if len(ids) < gpus {
			continue
		}
		for _, id := range ids {
			used[[2]string{n.Name, id}] = true
		}
		resUsed[n.Name] = u
		sort.Strings(ids)
		a.Workspace, a.Replica, a.Node, a.GPUs = ref, r, n.Name, ids
		out = append(out, a)
	}
	return out
}

// allocFor is what one replica asking res holds on node n, as Nomad
// allocates it: its CPU share, or its exclusive cores and their shares.
func allocFor(n drivers.Node, res schema.WorkResources) drivers.Alloc {
	return drivers.Alloc{CPUMHz: res.CPUMHz + int64(res.ExclusiveCores)*n.CPUPerCore, Cores: res.ExclusiveCores,
		MemoryBytes: res.MemoryBytes, DiskBytes: res.DiskBytes}
}

func sortAllocs(a []drivers.Alloc) {
	sort.Slice(a, func(i, j int) bool {
		if a[i].Workspace != a[j].Workspace {
			return a[i].Workspace.Less(a[j].Workspace)
		}
		return a[i].Replica < a[j].Replica
	})
}

func mustJSON(t interface{ Fatal(...any) }, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkDecision asserts the invariants every decision keeps.
func checkDecision(t *rapid.T, in Input, d Decision) {
	set, snap := in.Specs, in.Snapshot
	byRef := map[schema.Ref]WorkspaceDecision{}
	for i, w := range d.Workspaces {
		if i > 0 && !d.Workspaces[i-1].Ref.Less(w.Ref) {
			t.Fatalf("not sorted by ref: %s before %s", d.Workspaces[i-1].Ref, w.Ref)
		}
		byRef[w.Ref] = w
	}
	acctOf := accounter(set, snap, d)
	// Every workspace in the specs and every holder has a verdict.
	for _, w := range set.Workspaces {
		if _, ok := byRef[w.Ref()]; !ok {
			t.Fatalf("%s: no verdict", w.Ref())
		}
	}
	holder := map[[2]string]schema.Ref{}
	for _, a := range snap.Allocs {
		if _, ok := byRef[a.Workspace]; !ok {
			t.Fatalf("%s holds GPUs but has no verdict", a.Workspace)
		}
		for _, g := range a.GPUs {
			holder[[2]string{a.Node, g}] = a.Workspace
		}
	}
	nodes := map[string]drivers.Node{}
	for _, n := range snap.Nodes {
		nodes[n.Name] = n
	}
	tierOf := func(r schema.Ref) *schema.PriorityTier {
		if w := set.Workspace(r); w != nil {
			return set.TierFor(w)
		}
		return set.TierOf(r.Project)
	}
	assigned := map[[2]string]schema.Ref{}
	held := map[string]int{} // by quota account
	for _, a := range snap.Allocs {
		if w := byRef[a.Workspace]; w.Verdict == VerdictRun || w.Verdict == VerdictPreempt {
			held[acctOf(a.Workspace)] += len(a.GPUs)
		}
	}
	for _, w := range d.Workspaces {
		if w.Verdict == VerdictStart {
			for _, p := range w.Placements {
				held[acctOf(w.Ref)] += len(p.GPUs)
			}
		}
	}
	for _, w := range d.Workspaces {
		switch w.Verdict {
		case VerdictWait:
			// Every waiting workspace has a reason.
			if w.Reason.Message == "" || w.Reason.Kind == ReasonNone {
				t.Fatalf("%s waits without a reason: %+v", w.Ref, w.Reason)
			}
		case VerdictRun, VerdictStart:
			spec := set.Workspace(w.Ref)
			if spec == nil || spec.Spec.State != schema.DesiredRunning {
				t.Fatalf("%s: %s but the specs do not want it running", w.Ref, w.Verdict)
			}
			for _, p := range w.Placements {
				for _, g := range p.GPUs {
					k := [2]string{p.Node, g}
					// No GPU assigned twice.
					if other, ok := assigned[k]; ok {
						t.Fatalf("GPU %s/%s assigned to %s and %s", p.Node, g, other, w.Ref)
					}
					assigned[k] = w.Ref
				}
			}
			if w.Verdict == VerdictRun {
				if len(w.Placements) == 0 {
					t.Fatalf("%s runs without placements (it holds nothing)", w.Ref)
				}
				// Nothing keeps running on a node that is gone, down,
				// disconnected or draining, or on a GPU that is gone, or
				// unhealthy unless its spec says stay: it moves.
				for _, p := range w.Placements {
					n, ok := nodes[p.Node]
					if !ok || (!n.Ready && (n.Status == "down" || n.Status == "disconnected")) || n.Draining {
						t.Fatalf("%s keeps running on node %s (%+v)", w.Ref, p.Node, n)
					}
					for _, id := range p.GPUs {
						i := slices.IndexFunc(n.GPUs, func(g drivers.GPU) bool { return g.ID == id })
						if i < 0 || (!n.GPUs[i].Healthy && spec.Spec.UnhealthyGPU != schema.GPUStay) {
							t.Fatalf("%s keeps running on GPU %s/%s, gone or unhealthy", w.Ref, p.Node, id)
						}
					}
				}
				continue
			}
			if len(w.Placements) != max(spec.Spec.Replicas, 1) {
				t.Fatalf("%s: %d placements for %d replicas (gangs are all or none)", w.Ref, len(w.Placements), spec.Spec.Replicas)
			}
			preempts := map[schema.Ref]bool{}
			for _, v := range w.Preempts {
				preempts[v] = true
				if vd := byRef[v]; vd.Verdict != VerdictPreempt && vd.Verdict != VerdictStop {
					t.Fatalf("%s waits for %s, whose verdict is %s", w.Ref, v, vd.Verdict)
				}
			}
			for _, p := range w.Placements {
				n, ok := nodes[p.Node]
				if !ok || !n.Ready || !n.Eligible || n.Draining {
					t.Fatalf("%s placed on unusable node %s", w.Ref, p.Node)
				}
				if len(p.GPUs) != spec.Spec.Resources.GPUs {
					t.Fatalf("%s: replica has %d GPUs, wants %d", w.Ref, len(p.GPUs), spec.Spec.Resources.GPUs)
				}
				doms, numas := map[int]bool{}, map[int]bool{}
				models := map[string]bool{}
				for _, id := range p.GPUs {
					var gpu *drivers.GPU
					for i := range n.GPUs {
						if n.GPUs[i].ID == id {
							gpu = &n.GPUs[i]
						}
					}
					// Never more than a node has; only healthy GPUs.
					if gpu == nil || !gpu.Healthy {
						t.Fatalf("%s placed on missing or unhealthy GPU %s/%s", w.Ref, p.Node, id)
					}
					if m := spec.Spec.Resources.GPUModel; m != "" && gpu.Model != m {
						t.Fatalf("%s wants %s, got %s", w.Ref, m, gpu.Model)
					}
					// A MIG instance is a slice of a GPU: only an ask that
					// names its model gets one.
					if ks := spec.Spec.Resources.Kinds(); len(ks) > 0 && !slices.ContainsFunc(ks, func(k string) bool { return set.Kind(k).Matches(gpu.Model) }) {
						t.Fatalf("%s wants kinds %v, got %s", w.Ref, ks, gpu.Model)
					}
					if spec.Spec.Resources.GPUModel == "" && len(spec.Spec.Resources.Kinds()) == 0 && gpu.IsMIG() {
						t.Fatalf("%s names no model, placed on MIG instance %s/%s (%s)", w.Ref, p.Node, id, gpu.Model)
					}
					// Nomad takes a request's devices from one group.
					if models[gpu.Model] = true; len(models) > 1 {
						t.Fatalf("%s: a replica on GPUs of two models %v (%s)", w.Ref, models, p.Node)
					}
					doms[gpu.Domain], numas[gpu.Domain*0+gpu.NUMA] = true, true
					// A held GPU is taken only from a workspace it waits for.
					if h, ok := holder[[2]string{p.Node, id}]; ok && !preempts[h] {
						t.Fatalf("%s takes %s/%s held by %s without waiting for it", w.Ref, p.Node, id, h)
					}
				}
				if spec.Spec.Topology.NVLink == schema.ConstraintRequired && len(doms) > 1 {
					t.Fatalf("%s requires one NVLink domain, got %v", w.Ref, doms)
				}
				if spec.Spec.Topology.NUMA == schema.ConstraintRequired && len(numas) > 1 {
					t.Fatalf("%s requires one NUMA node, got %v", w.Ref, numas)
				}
			}
		case VerdictPreempt:
			if w.PreemptedBy == nil || w.Right == RightNone {
				continue // stopping from before; nothing new
			}
			by := byRef[*w.PreemptedBy]
			if by.Verdict != VerdictStart {
				t.Fatalf("%s preempted by %s, whose verdict is %s", w.Ref, *w.PreemptedBy, by.Verdict)
			}
			vt, pt := tierOf(w.Ref), tierOf(*w.PreemptedBy)
			vs := set.Workspace(w.Ref)
			if !vt.Spec.Preemptible || !vs.Spec.Preemptible {
				t.Fatalf("%s is not preemptible but was preempted", w.Ref)
			}
			var started time.Time
			for _, a := range snap.Allocs {
				if a.Workspace == w.Ref && a.StartedAt.After(started) {
					started = a.StartedAt
				}
			}
			if in.Now.Sub(started) < set.Policy.Spec.Preemption.MinRuntime {
				t.Fatalf("%s preempted before its minimum runtime", w.Ref)
			}
			switch w.Right {
			case RightPriority:
				// Never preempt an equal or higher tier.
				if vt.Spec.Value >= pt.Spec.Value || !pt.Spec.CanPreempt {
					t.Fatalf("%s (tier %d) preempted by %s (tier %d) for priority", w.Ref, vt.Spec.Value, *w.PreemptedBy, pt.Spec.Value)
				}
			case RightReclaim:
				// Across quota accounts: another project's, or another
				// kind's of its own project.
				if acctOf(w.Ref) == acctOf(*w.PreemptedBy) {
					t.Fatalf("%s reclaimed by its own quota account", w.Ref)
				}
			case RightOrder:
				// Attained-service ordering takes only work of the
				// preemptor's own tier, in a tier with ordering on, that
				// checkpoints and is not interactive (unless its tier's
				// ordering is all).
				if len(set.Policy.Spec.Service.Steps) == 0 || vt.Spec.Value != pt.Spec.Value || vt.Spec.Ordering == schema.OrderingOff {
					t.Fatalf("%s (tier %d) preempted by %s (tier %d) for ordering, with steps %v and ordering %q", w.Ref, vt.Spec.Value, *w.PreemptedBy, pt.Spec.Value, set.Policy.Spec.Service.Steps, vt.Spec.Ordering)
				}
				if cp := vs.Spec.Checkpoint; cp.Interval <= 0 && (cp.Signal == "" || cp.GracePeriod <= 0) {
					t.Fatalf("%s preempted for ordering without a checkpoint", w.Ref)
				}
				if len(vs.Spec.Ports) > 0 && vt.Spec.Ordering != schema.OrderingAll {
					t.Fatalf("%s, interactive, preempted for ordering", w.Ref)
				}
				// Another team's work only over borrowed GPUs: the
				// preemptor borrows too.
				if acctOf(w.Ref) != acctOf(*w.PreemptedBy) && !by.Borrowed {
					t.Fatalf("%s, another team's, preempted for ordering by %s inside its quota", w.Ref, *w.PreemptedBy)
				}
				// The victim is in a later queue than the preemptor.
				if vb, pb := serviceBand(in, w.Ref), serviceBand(in, *w.PreemptedBy); pb >= vb {
					t.Fatalf("%s (queue %d) preempted for ordering by %s (queue %d)", w.Ref, vb, *w.PreemptedBy, pb)
				}
				orderPreemptions.Add(1)
			}
		}
	}
	// CPU shares, memory, disk and exclusive cores never overcommitted:
	// once everything the decision waits for is gone (runs and starts),
	// and right now (every allocation plus the starts that wait for
	// nobody). A node that did not have it before the decision (the
	// generator may overfill one) is left out.
	final, now := map[string]amount{}, map[string]amount{}
	for _, a := range snap.Allocs {
		now[a.Node] = now[a.Node].add(allocAmount(&a))
		if byRef[a.Workspace].Verdict == VerdictRun {
			final[a.Node] = final[a.Node].add(allocAmount(&a))
		}
	}
	before := maps.Clone(now)
	for _, w := range d.Workspaces {
		if w.Verdict != VerdictStart {
			continue
		}
		spec := set.Workspace(w.Ref)
		for _, p := range w.Placements {
			n := nodes[p.Node]
			a := allocFor(n, spec.Spec.Resources)
			final[p.Node] = final[p.Node].add(allocAmount(&a))
			if len(w.Preempts) == 0 {
				now[p.Node] = now[p.Node].add(allocAmount(&a))
			}
			// A start goes only where the node has its driver and volumes.
			if n.Features {
				if drv := spec.Spec.Task.Driver; drv != "" && !slices.Contains(n.Drivers, drv) {
					t.Fatalf("%s starts on %s, which lacks the %s driver\n%s", w.Ref, n.Name, drv, Render(d))
				}
				for _, v := range spec.Spec.Volumes {
					if !slices.Contains(n.HostVolumes, v.Name) {
						t.Fatalf("%s starts on %s, which lacks host volume %s\n%s", w.Ref, n.Name, v.Name, Render(d))
					}
				}
			}
		}
	}
	for name, n := range nodes {
		over := func(u amount) string {
			switch {
			case n.CPUMHz > 0 && u.cpu > n.CPUMHz && u.cpu > before[name].cpu:
				return fmt.Sprintf("%d MHz CPU of %d", u.cpu, n.CPUMHz)
			case n.MemoryBytes > 0 && u.mem > n.MemoryBytes && u.mem > before[name].mem:
				return fmt.Sprintf("%d bytes of memory of %d", u.mem, n.MemoryBytes)
			case n.DiskBytes > 0 && u.disk > n.DiskBytes && u.disk > before[name].disk:
				return fmt.Sprintf("%d bytes of disk of %d", u.disk, n.DiskBytes)
			case n.CPUPerCore > 0 && u.cores > int64(n.Cores) && u.cores > before[name].cores:
				return fmt.Sprintf("%d exclusive cores of %d", u.cores, n.Cores)
			}
			return ""
		}
		if o := over(final[name]); o != "" {
			t.Fatalf("node %s: %s once settled\n%s", name, o, Render(d))
		}
		if o := over(now[name]); o != "" {
			t.Fatalf("node %s: %s now\n%s", name, o, Render(d))
		}
	}
	// Across projects (quota accounts: a project's own, and one per kind
	// its quota names), preemption (reclaim, or priority over another
	// account while the quotas fit the cluster, in all and per kind)
	// only takes borrowed capacity: per account, what it takes leaves it
	// at or above its quota. That is the promise, per kind.
	usable, quotas := 0, 0
	usableKind, quotasKind := map[string]int{}, map[string]int{}
	for _, n := range snap.Nodes {
		for _, g := range n.GPUs {
			if n.Ready && n.Eligible && g.Healthy {
				usable++
				if k := set.KindOf(g.Model); k != nil {
					usableKind[k.Meta.Name]++
				}
			}
		}
	}
	for _, p := range set.Projects {
		for k, q := range p.Spec.Quota.Kinds {
			quotasKind[k] += q
			quotas += q
		}
	}
	// A quota that names CPU or memory counts them too: what is taken
	// leaves the project at or above its quota in GPUs, or in a named
	// dimension the taken work uses. CPU and memory quotas adding up to
	// more than the nodes have (every node tracking it) overcommit too.
	var quotaR, nodeR [2]int64
	tracked := [2]bool{len(snap.Nodes) > 0, len(snap.Nodes) > 0}
	for _, p := range set.Projects {
		quotas += p.Spec.Quota.GPUs
		quotaR[0] += p.Spec.Quota.CPUMHz
		quotaR[1] += p.Spec.Quota.MemoryBytes
	}
	for _, n := range snap.Nodes {
		nodeR[0] += n.CPUMHz
		nodeR[1] += n.MemoryBytes
		tracked[0] = tracked[0] && n.CPUMHz > 0
		tracked[1] = tracked[1] && n.MemoryBytes > 0
	}
	quotasFit := quotas <= usable && (!tracked[0] || quotaR[0] <= nodeR[0]) && (!tracked[1] || quotaR[1] <= nodeR[1])
	for k, q := range quotasKind {
		quotasFit = quotasFit && q <= usableKind[k]
	}
	perReplica := func(r schema.Ref) [2]int64 {
		if w := set.Workspace(r); w != nil {
			res := w.Spec.Resources
			return [2]int64{res.CPUMHz + int64(res.ExclusiveCores)*1000, res.MemoryBytes}
		}
		return [2]int64{}
	}
	heldR := map[string][2]int64{}
	for _, a := range snap.Allocs {
		if w := byRef[a.Workspace]; w.Verdict == VerdictRun || w.Verdict == VerdictPreempt {
			acct := acctOf(a.Workspace)
			h, r := heldR[acct], perReplica(a.Workspace)
			heldR[acct] = [2]int64{h[0] + r[0], h[1] + r[1]}
		}
	}
	taken := map[string]int{}
	takenR := map[string][2]int64{}
	for _, w := range d.Workspaces {
		// A tier that borrows within the cohort may take another team's
		// in-quota work below its threshold: that breaks the victim's
		// quota, by the opt-in.
		cohort := false
		if w.PreemptedBy != nil {
			if b := tierOf(*w.PreemptedBy).Spec.BorrowWithinCohort; b != nil && w.Right == RightPriority {
				cohort = tierOf(w.Ref).Spec.Value < set.Tier(b.Below).Spec.Value
			}
		}
		if w.Verdict == VerdictPreempt && w.PreemptedBy != nil && acctOf(w.Ref) != acctOf(*w.PreemptedBy) && !cohort && (w.Right == RightReclaim || (w.Right == RightPriority && quotasFit)) {
			acct := acctOf(w.Ref)
			for _, p := range w.Placements {
				taken[acct] += len(p.GPUs)
				tr, r := takenR[acct], perReplica(w.Ref)
				takenR[acct] = [2]int64{tr[0] + r[0], tr[1] + r[1]}
			}
		}
	}
	for acct, n := range taken {
		q, _ := accountQuota(set, acct)
		var qr [2]int64
		if proj, kind, _ := strings.Cut(acct, "/"); kind == "" {
			pq := set.Project(proj).Spec.Quota
			qr = [2]int64{pq.CPUMHz, pq.MemoryBytes}
		}
		atQuotaR := false
		for i := range 2 {
			atQuotaR = atQuotaR || (qr[i] > 0 && takenR[acct][i] > 0 && heldR[acct][i]-takenR[acct][i] >= qr[i])
		}
		if held[acct]-n < q && !atQuotaR {
			t.Fatalf("other accounts took %d GPUs from %s, which held %d with quota %d\n%s", n, acct, held[acct], q, Render(d))
		}
	}
}

// accounter returns the quota account a workspace counts against, as
// the decision keeps them: "PROJECT/" (its quota.gpus), or
// "PROJECT/KIND" where the project's quota names the kind it asks for,
// or, asking for several, the kind of the first GPU it holds that its
// node lists (its allocations in the snapshot's order), else of the
// first it starts on
// in d, else its first kind.
func accounter(set *schema.Set, snap *drivers.Snapshot, d Decision) func(r schema.Ref) string {
	model := map[[2]string]string{}
	for _, n := range snap.Nodes {
		for _, g := range n.GPUs {
			model[[2]string{n.Name, g.ID}] = g.Model
		}
	}
	at := map[schema.Ref]string{} // the model of the GPU that decides
	for _, a := range snap.Allocs {
		for _, id := range a.GPUs {
			if m, known := model[[2]string{a.Node, id}]; known {
				if _, ok := at[a.Workspace]; !ok {
					at[a.Workspace] = m
				}
				break
			}
		}
	}
	for _, w := range d.Workspaces {
		if _, ok := at[w.Ref]; !ok && w.Verdict == VerdictStart && len(w.Placements) > 0 && len(w.Placements[0].GPUs) > 0 {
			at[w.Ref] = model[[2]string{w.Placements[0].Node, w.Placements[0].GPUs[0]}]
		}
	}
	return func(r schema.Ref) string {
		return r.Project + "/" + set.QuotaAccount(r, at[r])
	}
}

// accountQuota returns account acct's GPU quota and borrow limit (< 0:
// none).
func accountQuota(set *schema.Set, acct string) (quota, borrow int) {
	proj, kind, _ := strings.Cut(acct, "/")
	p := set.Project(proj)
	if kind == "" {
		return p.Spec.Quota.GPUs, p.Spec.BorrowLimit.GPUs
	}
	borrow, ok := p.Spec.BorrowLimit.Kinds[kind]
	if !ok {
		borrow = schema.Unlimited
	}
	return p.Spec.Quota.Kinds[kind], borrow
}

// checkQuotaLimits checks that no project goes beyond its quota plus
// borrow limit in a dimension its quota counts (GPUs; CPU and memory
// where named) through what the decision starts: a project with a start
// that needs a dimension holds no more of it, once settled (runs and
// starts), than quota plus borrow limit. (Running work may exceed it
// already, a quota having been lowered: then nothing needing it starts.)
// CPU counts resources.cpu with an exclusive core as 1000, memory as
// written, per replica.
func checkQuotaLimits(t *rapid.T, in Input, d Decision) {
	set, snap := in.Specs, in.Snapshot
	acctOf := accounter(set, snap, d)
	type dims [3]int64 // GPUs, CPU, memory
	perReplica := func(r schema.Ref) dims {
		w := set.Workspace(r)
		if w == nil {
			return dims{}
		}
		res := w.Spec.Resources
		return dims{0, res.CPUMHz + int64(res.ExclusiveCores)*1000, res.MemoryBytes}
	}
	total, started := map[string]dims{}, map[string]dims{}
	verdict := map[schema.Ref]Verdict{}
	for _, w := range d.Workspaces {
		verdict[w.Ref] = w.Verdict
	}
	for _, a := range snap.Allocs {
		if verdict[a.Workspace] != VerdictRun {
			continue
		}
		acct := acctOf(a.Workspace)
		t, r := total[acct], perReplica(a.Workspace)
		total[acct] = dims{t[0] + int64(len(a.GPUs)), t[1] + r[1], t[2] + r[2]}
	}
	for _, w := range d.Workspaces {
		if w.Verdict != VerdictStart {
			continue
		}
		acct := acctOf(w.Ref)
		for _, p := range w.Placements {
			t, s, r := total[acct], started[acct], perReplica(w.Ref)
			total[acct] = dims{t[0] + int64(len(p.GPUs)), t[1] + r[1], t[2] + r[2]}
			started[acct] = dims{s[0] + int64(len(p.GPUs)), s[1] + r[1], s[2] + r[2]}
		}
	}
	names := [3]string{"GPUs", "CPU", "memory"}
	// By quota account: a kind's counts GPUs only (the loader takes no
	// CPU or memory quota beside kinds).
	for proj, s := range started {
		gq, gb := accountQuota(set, proj)
		quota, borrow := dims{int64(gq)}, dims{int64(gb)}
		if name, kind, _ := strings.Cut(proj, "/"); kind == "" {
			q, b := set.Project(name).Spec.Quota, set.Project(name).Spec.BorrowLimit
			quota[1], quota[2], borrow[1], borrow[2] = q.CPUMHz, q.MemoryBytes, b.CPUMHz, b.MemoryBytes
		}
		for i := range 3 {
			named := i == 0 || quota[i] > 0
			if !named || borrow[i] < 0 || s[i] == 0 {
				continue
			}
			if total[proj][i] > quota[i]+borrow[i] {
				t.Fatalf("project %s holds %d %s once settled, beyond its quota %d + borrow limit %d\n%s", proj, total[proj][i], names[i], quota[i], borrow[i], Render(d))
			}
		}
	}
}

// apply makes the cluster match a decision, as a reconciler that waited
// for every victim would: Run keeps its allocations, Start gets new ones
// (started at now), Preempt and Stop are gone; history records it.
func apply(in Input, d Decision, now time.Time) Input {
	return applyGrace(in, d, now, false)
}

// applyGrace is apply where, with grace, a victim that ran before this
// decision keeps its GPUs, stopping, until the next one (its checkpoint
// grace), and a start waiting for it waits too, as on a cluster; one
// started by the decision before leaves at once.
func applyGrace(in Input, d Decision, now time.Time, grace bool) Input {
	snap := drivers.Snapshot{ObservedAt: now, Nodes: in.Snapshot.Nodes}
	preempt := map[schema.Ref]bool{}
	for _, w := range d.Workspaces {
		if w.Verdict == VerdictPreempt {
			preempt[w.Ref] = true
		}
	}
	stays := map[schema.Ref]bool{} // victims still stopping after this decision
	for _, a := range in.Snapshot.Allocs {
		if grace && preempt[a.Workspace] && a.Phase != drivers.AllocStopping && a.StartedAt.Before(in.Now) {
			stays[a.Workspace] = true
		}
	}
	keep := map[schema.Ref]bool{}
	for _, w := range d.Workspaces {
		switch w.Verdict {
		case VerdictRun:
			keep[w.Ref] = true
		case VerdictStart:
			if slices.ContainsFunc(w.Preempts, func(v schema.Ref) bool { return stays[v] }) {
				continue // its victims are still leaving
			}
			for _, p := range w.Placements {
				a := allocFor(in.Snapshot.Nodes[nodeIndex(in.Snapshot.Nodes, p.Node)], in.Specs.Workspace(w.Ref).Spec.Resources)
				a.Workspace, a.Replica, a.Node, a.GPUs, a.Phase, a.StartedAt = w.Ref, p.Replica, p.Node, append([]string(nil), p.GPUs...), drivers.AllocRunning, now
				snap.Allocs = append(snap.Allocs, a)
			}
		}
	}
	for _, a := range in.Snapshot.Allocs {
		switch {
		case keep[a.Workspace]:
			a.Phase = drivers.AllocRunning
			snap.Allocs = append(snap.Allocs, a)
		case stays[a.Workspace]:
			a.Phase = drivers.AllocStopping
			snap.Allocs = append(snap.Allocs, a)
		}
	}
	sortAllocs(snap.Allocs)
	h := RecordDecision(AdvanceHistory(*in.History, in.Specs, in.Snapshot, now), in.Specs, d)
	return Input{Specs: in.Specs, Snapshot: &snap, History: &h, Now: now}
}

// orderPreemptions counts the preemptions for ordering checkDecision
// saw, so that TestPropInvariants can tell its checks of RightOrder ran.
var orderPreemptions atomic.Int64

func TestPropInvariants(t *testing.T) {
	verifying(t)
	rapid.Check(t, func(t *rapid.T) {
		in := genInput(t)
		before := mustJSON(t, in)
		d := Decide(in)
		// Input unchanged.
		if after := mustJSON(t, in); after != before {
			t.Fatalf("Decide changed its input")
		}
		// Determinism, byte for byte.
		if again := Decide(in); mustJSON(t, again) != mustJSON(t, d) || Render(again) != Render(d) {
			t.Fatalf("two decisions over the same input differ")
		}
		checkDecision(t, in, d)
	})
}

// TestPropOrdering: TestPropInvariants on ordering's own ground (one
// tier, every workspace checkpointing, long runs): every invariant holds,
// and every preemption for ordering takes only what may yield.
func TestPropOrdering(t *testing.T) {
	verifying(t)
	genOrdering = true
	t.Cleanup(func() { genOrdering = false })
	before := orderPreemptions.Load()
	// About one input in a hundred preempts for ordering: check until
	// some have, so the checks of RightOrder are never vacuous.
	for i := 0; i < 50 && orderPreemptions.Load()-before < 5 && !t.Failed(); i++ {
		rapid.Check(t, func(t *rapid.T) {
			in := genInput(t)
			checkDecision(t, in, Decide(in))
		})
	}
	if n := orderPreemptions.Load() - before; n < 5 {
		t.Errorf("%d decisions preempted for ordering: the checks of RightOrder barely ran", n)
	} else {
		t.Logf("%d preemptions for ordering checked", n)
	}
}

// TestPropQuotaLimits: no project goes beyond quota plus borrow limit in
// any dimension its quota names, over a decision and the ones after it.
func TestPropQuotaLimits(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genInput(t)
		for range 3 {
			d := Decide(in)
			checkQuotaLimits(t, in, d)
			in = apply(in, d, in.Now.Add(time.Hour))
		}
	})
}

// TestPropApplyThenDecide: applying a decision and deciding again keeps
// everything the first decision admitted where it is, unless a valid
// preemption takes it; repeating converges within a few cycles to a
// decision that changes nothing, and stays there (no ping-pong).
func TestPropApplyThenDecide(t *testing.T) {
	verifying(t)
	rapid.Check(t, func(t *rapid.T) {
		in := genInput(t)
		d := Decide(in)
		next := apply(in, d, in.Now)
		d2 := Decide(next)
		checkDecision(t, next, d2)
		second := map[schema.Ref]WorkspaceDecision{}
		for _, w := range d2.Workspaces {
			second[w.Ref] = w
		}
		for _, w := range d.Workspaces {
			w2 := second[w.Ref]
			if w.Verdict != VerdictRun && w.Verdict != VerdictStart {
				continue
			}
			if w2.Verdict == VerdictPreempt && w2.PreemptedBy != nil {
				// A right the first decision's order could not see yet: a
				// victim of it preempting in turn (a cascade, one tier
				// down each time), or a project that started borrowing
				// later in the same pass. checkDecision vouches for it.
				continue
			}
			if w2.Verdict != VerdictRun || mustJSON(t, w2.Placements) != mustJSON(t, w.Placements) {
				t.Fatalf("%s: %s %v, then %s %v after applying\nfirst:\n%s\nsecond:\n%s", w.Ref, w.Verdict, w.Placements, w2.Verdict, w2.Placements, Render(d), Render(d2))
			}
		}
		// Converge.
		cur, dec := next, d2
		for cycle := 0; ; cycle++ {
			if quiet(dec) {
				break
			}
			if cycle > 20 {
				t.Fatalf("no fixpoint after 20 cycles:\n%s", Render(dec))
			}
			cur = apply(cur, dec, cur.Now)
			dec = Decide(cur)
			checkDecision(t, cur, dec)
		}
		again := Decide(apply(cur, dec, cur.Now))
		if Render(again) != Render(dec) {
			t.Fatalf("a quiet decision applied changes:\n%s\nthen\n%s", Render(dec), Render(again))
		}
	})
}

// serviceBand is ref's queue of attained service in in (the policy's
// Service): the steps its GPU-time with its spec has reached, and the
// first for one that waits and has waited promote times its run since it
// last ran.
func serviceBand(in Input, ref schema.Ref) int {
	sp := in.Specs.Policy.Spec.Service
	ws := in.Specs.Workspace(ref)
	var allocs []*drivers.Alloc
	for i, a := range in.Snapshot.Allocs {
		if a.Workspace == ref {
			allocs = append(allocs, &in.Snapshot.Allocs[i])
		}
	}
	ran := ranFor(ref, ws, allocs, in.History, in.Now)
	band := bandOf(sp.Steps, ran.Hours()*float64(ws.Spec.Resources.GPUs*max(ws.Spec.Replicas, 1)))
	if len(allocs) == 0 {
		since := in.History.QueuedSince[ref]
		if p, ok := in.History.Preempted[ref]; ok && p.At.After(since) {
			since = p.At
		}
		if at := PromotedAt(sp, ran, since); !at.IsZero() && !in.Now.Before(at) {
			band = 0
		}
	}
	return band
}

// quiet reports whether a decision asks for no start and no preemption.
func quiet(d Decision) bool {
	for _, w := range d.Workspaces {
		if w.Verdict == VerdictStart || w.Verdict == VerdictPreempt {
			return false
		}
	}
	return true
}

// TestPropNoPingPong runs many cycles over the same specs, applying each
// decision and advancing the clock a minute, and fails if a workspace A
// ever preempts B after B preempted A, or if a workspace flips between
// running and preempted more than a cascade allows. With grace, victims
// that ran keep their GPUs, stopping, for a cycle: a victim that left at
// once must not take back what it gave up while its preemptor waits for
// the others (and be preempted again, round and round).
//
// Attained-service ordering shares GPUs over time by design, and is left
// out of both counts: B takes back from A by ordering once A has run past
// a step or B has waited into the first queue (Tiresias' promotion), and
// checkDecision vouches for every ordering preemption that the preemptor
// is in an earlier queue than its victim.
func TestPropNoPingPong(t *testing.T) {
	verifying(t)
	rapid.Check(t, func(t *rapid.T) {
		cur := genInput(t)
		grace := rapid.Bool().Draw(t, "grace")
		preempted := map[[2]schema.Ref]bool{}
		flips := map[schema.Ref]int{}
		for cycle := range 40 {
			d := Decide(cur)
			checkDecision(t, cur, d)
			for _, w := range d.Workspaces {
				if w.Verdict != VerdictPreempt || w.PreemptedBy == nil || w.Right == RightNone || w.Right == RightOrder {
					continue
				}
				if preempted[[2]schema.Ref{w.Ref, *w.PreemptedBy}] {
					t.Fatalf("cycle %d: %s preempts %s, which preempted it before", cycle, *w.PreemptedBy, w.Ref)
				}
				preempted[[2]schema.Ref{*w.PreemptedBy, w.Ref}] = true
				flips[w.Ref]++
				// Each preemption of the same workspace needs a preemptor of
				// a tier it has not met; three tiers bound it.
				if flips[w.Ref] > 3 {
					t.Fatalf("cycle %d: %s preempted %d times", cycle, w.Ref, flips[w.Ref])
				}
			}
			cur = applyGrace(cur, d, cur.Now.Add(time.Minute), grace)
		}
	})
}

// TestPropScratch: a decision built on a Scratch that earlier decisions,
// over other inputs, were built on is the decision built fresh, byte for
// byte: nothing of the earlier ones shows through.
func TestPropScratch(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var s Scratch
		for range 3 {
			in := genInput(t)
			for range 2 {
				fresh := Decide(in)
				lent := in
				lent.Scratch = &s
				if got, want := mustJSON(t, Decide(lent)), mustJSON(t, fresh); got != want {
					t.Fatalf("decided on a used Scratch:\n%s\nfresh:\n%s", got, want)
				}
				in = apply(in, fresh, in.Now.Add(time.Hour))
			}
		}
	})
}
