package replay

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/policies"
	"github.com/berth-dev/berth/schema"
)

// kindsWorkload maps testdata/kinds.csv (jobs of h100, a100, the a100-1g
// MIG kind and of none) onto testdata/cluster-kinds.yaml (two models and
// a MIG group, one node mixing all three).
func kindsWorkload(t *testing.T) (*Workload, sim.Spec, Mapping) {
	t.Helper()
	jobs, err := ReadFile("testdata/kinds.csv", "")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := sim.ReadFile("testdata/cluster-kinds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := DefaultMapping()
	wl, err := MapCluster(jobs, *spec, m)
	if err != nil {
		t.Fatal(err)
	}
	return wl, *spec, m
}

// onItsKind wraps p's decisions with a check that each start puts every
// replica on GPUs of one model, of the workspace's kind (of no kind: a
// whole GPU, never a MIG instance).
func onItsKind(t *testing.T, p Policy, spec sim.Spec, starts *int, mu *sync.Mutex) Policy {
	model := map[string]string{}
	for _, n := range spec.Nodes {
		for _, g := range n.GPUs {
			model[n.Name+"/"+g.ID] = g.Model
		}
	}
	decide := p.Decide
	p.Decide = func(in policies.Input) policies.Decision {
		d := decide(in)
		for _, w := range d.Workspaces {
			if w.Verdict != policies.VerdictStart {
				continue
			}
			i, ok := slices.BinarySearchFunc(in.Specs.Workspaces, w.Ref, func(ws schema.Workspace, r schema.Ref) int { return ws.Ref().Compare(r) })
			if !ok {
				t.Errorf("%s: starts %s, which its specs lack", p.Name, w.Ref)
				continue
			}
			kind := in.Specs.Workspaces[i].Spec.Resources.GPUKind
			for _, pl := range w.Placements {
				for _, id := range pl.GPUs {
					m := model[pl.Node+"/"+id]
					if m != model[pl.Node+"/"+pl.GPUs[0]] {
						t.Errorf("%s: %s replica %d takes GPUs of two models, %q and %q", p.Name, w.Ref, pl.Replica, m, model[pl.Node+"/"+pl.GPUs[0]])
					}
					_, mig := drivers.ParseMIG(m)
					switch k := in.Specs.Kind(kind); {
					case kind == "" && mig:
						t.Errorf("%s: %s asks for no kind and starts on MIG instance %s (%s)", p.Name, w.Ref, id, m)
					case kind != "" && (k == nil || !k.Matches(m)):
						t.Errorf("%s: %s asks for kind %s and starts on a %s", p.Name, w.Ref, kind, m)
					}
				}
			}
			mu.Lock()
			*starts++
			mu.Unlock()
		}
		return d
	}
	return p
}

// TestKindsReplay: under every policy, every job runs on GPUs of its kind
// only (of no kind: whole GPUs), and the kinds' utilization adds up to
// the cluster's.
func TestKindsReplay(t *testing.T) {
	wl, spec, m := kindsWorkload(t)
	if wl.KindsGiven != 40 || len(wl.Kinds) != 3 || !wl.KindsDeclared || len(wl.Base.Kinds) != 3 {
		t.Fatalf("%d jobs of a kind, kinds %+v (declared %t), specs' kinds %d; want 40 jobs of the file's 3 kinds, declared in the specs", wl.KindsGiven, wl.Kinds, wl.KindsDeclared, len(wl.Base.Kinds))
	}
	for _, j := range wl.Jobs {
		if ws := j.Workspace(); ws.Spec.Resources.GPUKind != j.Kind {
			t.Errorf("%s: its workspace asks for kind %q, the trace for %q", j.ID, ws.Spec.Resources.GPUKind, j.Kind)
		}
	}
	var mu sync.Mutex
	starts := 0
	var pols []Policy
	for _, p := range Policies() {
		pols = append(pols, onItsKind(t, p, spec, &starts, &mu))
	}
	rep, err := Run(wl, spec, m, pols, Options{Parallel: 2, Verify: 1})
	if err != nil {
		t.Fatal(err)
	}
	if starts < 4*len(wl.Jobs) {
		t.Errorf("%d starts checked, want every job's under each policy (%d)", starts, 4*len(wl.Jobs))
	}
	// What each kind's jobs asked, GPU-hours.
	asked := map[string]float64{}
	for _, j := range wl.Jobs {
		asked[j.Kind] += j.Duration.Hours() * float64(j.PerGPUs*j.Replicas)
	}
	for _, p := range rep.Policies {
		if p.Completed != len(wl.Jobs) {
			t.Errorf("%s: %d of %d jobs completed", p.Name, p.Completed, len(wl.Jobs))
		}
		if p.Timing.Differed > 0 {
			t.Errorf("%s: %d of %d narrowed decisions differ from the whole queue's", p.Name, p.Timing.Differed, p.Timing.Verified)
		}
		if len(p.Kinds) != 3 {
			t.Fatalf("%s: kinds %+v, want 3", p.Name, p.Kinds)
		}
		var busy, avail, availEq float64
		for i, u := range p.Kinds {
			k := rep.Cluster.Kinds[i]
			busy += u.BusyGPUHours
			avail += u.AvailableGPUHours
			availEq += u.AvailableEquivalentHours
			// Its jobs ran on it alone: it was busy at least what they asked.
			if u.Kind != k.Name || u.BusyGPUHours < asked[k.Name]-1e-9 || u.BusyGPUHours > u.AvailableGPUHours {
				t.Errorf("%s: kind %s busy %.3f of %.3f GPU-hours; its jobs asked %.3f", p.Name, u.Kind, u.BusyGPUHours, u.AvailableGPUHours, asked[k.Name])
			}
			if math.Abs(u.Utilization*u.AvailableGPUHours-u.BusyGPUHours) > 1e-9 {
				t.Errorf("%s: kind %s utilization %.4f is not busy over available", p.Name, u.Kind, u.Utilization)
			}
			if w := k.Equivalents / float64(k.GPUs); math.Abs(u.BusyEquivalentHours-w*u.BusyGPUHours) > 1e-9 {
				t.Errorf("%s: kind %s busy %.3f GPU-equivalent-hours, want %.3f (weight %.3f)", p.Name, u.Kind, u.BusyEquivalentHours, w*u.BusyGPUHours, w)
			}
		}
		// The MIG kind holds only its own jobs: never one of no kind.
		if mig := p.Kinds[1]; mig.Kind != "a100-1g" || mig.BusyGPUHours > asked["a100-1g"]*1.05 {
			t.Errorf("%s: the MIG kind busy %.3f GPU-hours, its jobs asked %.3f: others ran on it", p.Name, mig.BusyGPUHours, asked["a100-1g"])
		}
		g := p.GPUHours
		if held := g.Capacity - g.Idle; math.Abs(busy-held) > 1e-6*g.Capacity || math.Abs(avail-g.Capacity) > 1e-6*g.Capacity {
			t.Errorf("%s: the kinds were busy %.3f of %.3f GPU-hours; the cluster %.3f of %.3f", p.Name, busy, avail, held, g.Capacity)
		}
		if span := g.Capacity / float64(rep.Cluster.GPUs); math.Abs(availEq-24*span) > 1e-6*g.Capacity {
			t.Errorf("%s: %.3f GPU-equivalent-hours available, want 24 GPU-equivalents over %.3f hours", p.Name, availEq, span)
		}
	}
	var table, js, html bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"\nper GPU kind: GPU-hours busy",
		`kinds: 3 GPU kinds, the cluster file's: a100 = "NVIDIA A100-SXM4-80GB" (4 GPUs), a100-1g = "NVIDIA A100* MIG 1g.10gb" (14 GPUs), h100 = "NVIDIA H100*" (18 GPUs); a job of the trace's gpu_kind column (40 jobs) runs on its kind's GPUs alone`,
		"kind  GPUs  GPU-equivalents", "a100-1g    14              2.0", "all, GPU-equivalents    36             24.0",
	} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, table.String())
		}
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Cluster.Kinds) != 3 || len(back.Policies[3].Kinds) != 3 || back.Trace.KindsGiven != 40 {
		t.Errorf("the JSON report's kinds: %v, %+v", err, back.Cluster.Kinds)
	}
	if err := rep.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	if h := html.String(); !strings.Contains(h, "<h2>Per GPU kind</h2>") || strings.Count(h, "per GPU kind: GPU-hours busy") != 1 {
		t.Errorf("the HTML report has no per-kind section, or two")
	}
}

// TestKindMissing: a job naming a kind the cluster has no GPU of is an
// error before the replay, naming the job, its line and the kinds there
// are, for declared kinds and for kinds named by the models.
func TestKindMissing(t *testing.T) {
	spec, err := sim.ReadFile("testdata/cluster-kinds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	trace := "submit,duration,gpus,project,gpu_kind\n0,1h,1,a,h100\n60,1h,1,a,l40s\n"
	jobs, err := Read(strings.NewReader(trace), "")
	if err != nil {
		t.Fatal(err)
	}
	jobs[1].File = "mine.csv"
	_, err = MapCluster(jobs, *spec, DefaultMapping())
	want := `job j000002 (mine.csv line 3): GPU kind "l40s": cluster "kinds-sample" has no GPU of that kind; the kinds its file declares (spec.kinds) with GPUs are "a100", "a100-1g", "h100"`
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
	// A declared kind without a GPU is missing too (kinds out of order,
	// as a Spec built by hand may have them, are sorted).
	spec.Kinds = append([]schema.GPUKind{{Meta: schema.Meta{Name: "l40s"}, Spec: schema.GPUKindSpec{Match: "NVIDIA L40S"}}}, spec.Kinds...)
	if _, err := MapCluster(jobs, *spec, DefaultMapping()); err == nil || !strings.Contains(err.Error(), `job j000002 (mine.csv line 3): GPU kind "l40s": cluster "kinds-sample" has no GPU of that kind`) {
		t.Errorf("a kind declared and matching no GPU: error %v", err)
	}
	// Kinds named by the models: the default cluster's is "H100".
	_, err = MapCluster(jobs[:1], DefaultCluster(), DefaultMapping())
	want = `job j000001 (line 2): GPU kind "h100": cluster "philly-512" has no GPU of that kind; its kinds are its models, "H100" (a cluster file may declare kinds of its own: spec.kinds)`
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
	// Map knows no kinds.
	if _, err := Map(jobs, 8, 8, DefaultMapping()); err == nil || !strings.Contains(err.Error(), `job j000001 (line 2): GPU kind "h100": the cluster has no GPU kinds`) {
		t.Errorf("Map of a job of a kind: error %v", err)
	}
}

// TestKindsByModel: a cluster file that declares no kinds has one per
// model, named by it, so a trace names models; a job too large for its
// kind's GPUs is skipped, not left waiting forever.
func TestKindsByModel(t *testing.T) {
	const two = `apiVersion: berth.dev/v1
kind: Cluster
metadata: {name: two}
spec:
  nodes:
  - name: n
    gpus:
    - {model: NVIDIA H100 80GB HBM3, count: 4}
    - {model: NVIDIA A100-SXM4-80GB MIG 3g.40gb, count: 2}
  - name: m
    gpus:
    - {model: NVIDIA H100 80GB HBM3, count: 2}
`
	trace := "submit,duration,gpus,project,gpu_kind\n" +
		"0,1h,2,a,NVIDIA A100-SXM4-80GB MIG 3g.40gb\n" +
		"0,1h,3,a,NVIDIA A100-SXM4-80GB MIG 3g.40gb\n" + // only 2 instances: skipped
		"0,1h,4,a,\n" + // n's 4 H100s, never the MIG instances
		"60,1h,2,a,NVIDIA H100 80GB HBM3\n"
	rep := replayText(t, trace, two, DefaultMapping())
	if rep.Trace.Jobs != 3 || rep.Trace.Skipped != 1 || rep.Cluster.KindsDeclared || len(rep.Cluster.Kinds) != 2 {
		t.Fatalf("%d jobs, %d skipped, kinds %+v; want 3 and 1, the 2 models", rep.Trace.Jobs, rep.Trace.Skipped, rep.Cluster.Kinds)
	}
	if k := rep.Cluster.Kinds[0]; k.Name != "NVIDIA A100-SXM4-80GB MIG 3g.40gb" || k.GPUs != 2 || math.Abs(k.Equivalents-6.0/7) > 1e-9 {
		t.Errorf("the MIG kind: %+v, want 2 instances of 3/7 each", k)
	}
	for _, p := range rep.Policies {
		if p.Completed != 3 {
			t.Errorf("%s: %d of 3 jobs completed", p.Name, p.Completed)
		}
		// The MIG kind held its job's 2 instances for 1h and a start.
		if u := p.Kinds[0]; u.BusyGPUHours < 2 || u.BusyGPUHours > 2.01 {
			t.Errorf("%s: the MIG kind busy %.3f GPU-hours, want its one job's 2", p.Name, u.BusyGPUHours)
		}
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if want := `kinds: 2 GPU kinds, one per model of the cluster, named by it: "NVIDIA A100-SXM4-80GB MIG 3g.40gb" (2 GPUs), "NVIDIA H100 80GB HBM3" (6 GPUs)`; !strings.Contains(table.String(), want) {
		t.Errorf("the table lacks %q:\n%s", want, table.String())
	}
}

// TestOneKindReportsAsBefore: a replay on a cluster of one model, whose
// trace names no kind, tells no kinds apart: no kinds line, table or
// JSON field, and its specs declare no kind.
func TestOneKindReportsAsBefore(t *testing.T) {
	rep := replayText(t, handTrace, oneNode, DefaultMapping(), Policies()[0])
	var table, js bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if s := table.String() + js.String(); strings.Contains(s, "kind") {
		t.Errorf("a replay of one kind mentions kinds:\n%s", s)
	}
}
