package baseline

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/policies"
	"github.com/berth-dev/berth/schema"
	"github.com/google/go-cmp/cmp"
)

const (
	h100 = "NVIDIA H100 80GB HBM3"
	a100 = "NVIDIA A100-SXM4-80GB"
	mig  = "NVIDIA A100-SXM4-80GB MIG 1g.10gb"
)

// kindsFixture: node-1 mixes models, 2 H100s (g0, g1), an A100 (g2) and
// 7 of another A100's 1g.10gb MIG instances (g3–g9); node-2 has 4 H100s.
// Kinds: h100, a100 (whole A100s) and a100-1g (the MIG instances).
func kindsFixture() *fixture {
	f := newFixture(2, map[string]int{"a-low": 8, "b-high": 8})
	f.snap.Nodes[0].GPUs = nil
	for i := range 10 {
		model := mig
		switch {
		case i < 2:
			model = h100
		case i == 2:
			model = a100
		}
		f.snap.Nodes[0].GPUs = append(f.snap.Nodes[0].GPUs, drivers.GPU{ID: fmt.Sprintf("n1-g%d", i), Index: i, Model: model, Healthy: true})
	}
	for i := range f.snap.Nodes[1].GPUs {
		f.snap.Nodes[1].GPUs[i].Model = h100
	}
	f.set.Kinds = []schema.GPUKind{
		{Meta: schema.Meta{Name: "a100"}, Spec: schema.GPUKindSpec{Match: "NVIDIA A100*"}},
		{Meta: schema.Meta{Name: "a100-1g"}, Spec: schema.GPUKindSpec{Match: "* MIG 1g.10gb"}},
		{Meta: schema.Meta{Name: "h100"}, Spec: schema.GPUKindSpec{Match: "NVIDIA H100*"}},
	}
	return f
}

// of sets ref's kind.
func (f *fixture) of(ref schema.Ref, kind string) {
	for i := range f.set.Workspaces {
		if f.set.Workspaces[i].Ref() == ref {
			f.set.Workspaces[i].Spec.Resources.GPUKind = kind
		}
	}
}

// models returns, for each workspace d starts, the models of its GPUs per
// replica ("a100-1g+a100-1g"), checked to be one model a replica.
func models(t *testing.T, f *fixture, d policies.Decision) map[string]string {
	t.Helper()
	model := map[string]string{}
	for _, n := range f.snap.Nodes {
		for _, g := range n.GPUs {
			model[n.Name+"/"+g.ID] = g.Model
		}
	}
	out := map[string]string{}
	for _, w := range d.Workspaces {
		if w.Verdict != policies.VerdictStart {
			continue
		}
		var reps []string
		for _, p := range w.Placements {
			var ms []string
			for _, id := range p.GPUs {
				ms = append(ms, model[p.Node+"/"+id])
			}
			if len(slices.Compact(slices.Clone(ms))) != 1 {
				t.Errorf("%s: replica %d takes GPUs of several models %q: Nomad takes a request's devices from one group", w.Ref, p.Replica, ms)
			}
			reps = append(reps, fmt.Sprintf("%s %d×%s", p.Node, len(ms), ms[0]))
		}
		out[w.Ref.String()] = strings.Join(reps, ", ")
	}
	return out
}

// TestKinds: each baseline places a workspace only on GPUs of its kind
// (one model a replica), one of no kind on whole GPUs only, never a MIG
// instance; a kind of no free GPU waits while other GPUs are free.
func TestKinds(t *testing.T) {
	for name, decide := range map[string]func(policies.Input) policies.Decision{"fifo": FIFO, "nomad": Nomad, "quota": Quota} {
		t.Run(name, func(t *testing.T) {
			f := kindsFixture()
			f.of(f.ws("a-low/mig", 3, 1, 1), "a100-1g")
			f.of(f.ws("a-low/a100", 1, 1, 2), "a100")
			// 3 whole GPUs: node-1 has 3, of two models, so node-2.
			f.ws("a-low/any", 3, 1, 3)
			f.of(f.ws("a-low/h100", 1, 1, 4), "h100")
			pref := f.ws("a-low/pref", 1, 1, 5) // a100 first, then h100: the a100 is taken, so it waits
			for i := range f.set.Workspaces {
				if f.set.Workspaces[i].Ref() == pref {
					f.set.Workspaces[i].Spec.Resources.GPUKinds = []string{"a100", "h100"}
				}
			}
			f.set.Sort()
			d := decide(policies.Input{Specs: f.set, Snapshot: f.snap, History: f.hist, Now: t0})
			want := map[string]string{
				"a-low/mig":  "node-1 3×" + mig,
				"a-low/a100": "node-1 1×" + a100,
				"a-low/any":  "node-2 3×" + h100,
				"a-low/h100": map[string]string{"fifo": "node-1 1×" + h100}[name],
			}
			if name != "fifo" { // bin-packing: the tightest group, node-2's last H100
				want["a-low/h100"] = "node-2 1×" + h100
			}
			if diff := cmp.Diff(want, models(t, f, d)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// TestKindWaits: a workspace whose kind has no free GPU waits, though
// others are free; under FIFO one whose kind the cluster lacks never
// blocks the queue, and no whole-GPU workspace lands on a MIG instance.
func TestKindWaits(t *testing.T) {
	for name, decide := range map[string]func(policies.Input) policies.Decision{"fifo": FIFO, "nomad": Nomad, "quota": Quota} {
		t.Run(name, func(t *testing.T) {
			f := kindsFixture()
			f.run("a-low/r", 1, []int{2}, 10)           // the A100
			f.of(f.ws("a-low/l40s", 1, 1, -50), "l40s") // no such kind: never blocks
			f.ws("a-low/big", 4, 1, -40)                // node-2's 4 H100s
			f.ws("a-low/more", 2, 1, -30)               // node-1's 2 H100s; never its MIG instances
			f.ws("a-low/none", 1, 1, -20)               // only MIG instances are left
			f.of(f.ws("a-low/a100", 1, 1, -10), "a100") // its GPU is held
			got := f.decide(decide)
			want := map[string]string{
				"a-low/r": "run node-1", "a-low/l40s": "wait (capacity)",
				"a-low/big": "start node-2", "a-low/more": "start node-1", "a-low/none": "wait (capacity)", "a-low/a100": "wait (capacity)",
			}
			if name == "fifo" {
				want["a-low/a100"] = "wait (queue)" // behind a head that could fit, once GPUs are free
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// TestKindPreempts: a high workspace of a kind preempts the low one on
// its kind's GPU, not the one on another kind's.
func TestKindPreempts(t *testing.T) {
	f := kindsFixture()
	f.run("a-low/on-a100", 1, []int{2}, 10)
	f.run("a-low/on-h100", 1, []int{0}, 5)
	f.run("a-low/fill", 2, []int{0, 1, 2, 3}, 10)
	f.run("a-low/fill2", 1, []int{1}, 10)
	f.of(f.ws("b-high/a100", 1, 1, 1), "a100")
	got := f.decide(Nomad)
	if got["b-high/a100"] != "start node-1" || !strings.HasPrefix(got["a-low/on-a100"], "preempt") || got["a-low/on-h100"] != "run node-1" {
		t.Errorf("a high A100 workspace on a full cluster: %v; want it to preempt a-low/on-a100 alone", got)
	}
}
