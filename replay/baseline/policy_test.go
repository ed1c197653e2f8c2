package baseline

import (
	"fmt"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/policies"
	"github.com/berth-dev/berth/schema"
	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

// world builds an input: nodes of 4 GPUs, tiers low 20, mid 45, med 50,
// high 80, projects with quotas, workspaces queued in the order given.
type fixture struct {
	set  *schema.Set
	snap *drivers.Snapshot
	hist *drivers.History
}

func newFixture(nodes int, quotas map[string]int) *fixture {
	f := &fixture{set: &schema.Set{Policy: schema.DefaultPolicy()}, snap: &drivers.Snapshot{ObservedAt: t0}, hist: &drivers.History{QueuedSince: map[schema.Ref]time.Time{}}}
	for name, v := range map[string]int{"low": 20, "mid": 45, "med": 50, "high": 80} {
		f.set.Tiers = append(f.set.Tiers, schema.PriorityTier{Meta: schema.Meta{Name: name}, Spec: schema.TierSpec{Value: v, Preemptible: true, CanPreempt: true}})
	}
	for name, q := range quotas {
		// Project names are "<anything>-<tier>".
		tier := name[len(name)-3:]
		if tier == "igh" {
			tier = "high"
		}
		if tier == "low" || tier == "med" || tier == "mid" || tier == "high" {
		} else {
			tier = "low"
		}
		f.set.Projects = append(f.set.Projects, schema.Project{Meta: schema.Meta{Name: name}, Spec: schema.ProjectSpec{Tier: tier, Quota: schema.Resources{GPUs: q}, BorrowLimit: schema.BorrowLimit{GPUs: schema.Unlimited}}})
	}
	for n := 1; n <= nodes; n++ {
		node := drivers.Node{Name: fmt.Sprintf("node-%d", n), Ready: true, Eligible: true}
		node.ID = node.Name
		for g := range 4 {
			node.GPUs = append(node.GPUs, drivers.GPU{ID: fmt.Sprintf("n%d-g%d", n, g), Index: g, Model: "H100", Domain: g / 2, Healthy: true})
		}
		f.snap.Nodes = append(f.snap.Nodes, node)
	}
	return f
}

// ws adds a workspace of gpus×replicas queued at t0+queued minutes.
func (f *fixture) ws(ref string, gpus, replicas int, queued int) schema.Ref {
	var r schema.Ref
	if err := r.UnmarshalText([]byte(ref)); err != nil {
		panic(err)
	}
	w := schema.Workspace{Meta: schema.Meta{Name: r.Name, Project: r.Project}}
	w.Spec.State = schema.DesiredRunning
	w.Spec.Resources.GPUs = gpus
	w.Spec.Replicas = replicas
	w.Spec.Preemptible = true
	f.set.Workspaces = append(f.set.Workspaces, w)
	f.hist.QueuedSince[r] = t0.Add(time.Duration(queued) * time.Minute)
	return r
}

// run makes ref hold GPUs on node (indices), started at t0-minutes.
func (f *fixture) run(ref string, node int, idx []int, startedAgo int) {
	r := f.ws(ref, len(idx), 1, -100)
	a := drivers.Alloc{Workspace: r, Node: fmt.Sprintf("node-%d", node), Phase: drivers.AllocRunning, StartedAt: t0.Add(-time.Duration(startedAgo) * time.Minute)}
	for _, i := range idx {
		a.GPUs = append(a.GPUs, fmt.Sprintf("n%d-g%d", node, i))
	}
	f.snap.Allocs = append(f.snap.Allocs, a)
}

func (f *fixture) decide(fn func(policies.Input) policies.Decision) map[string]string {
	f.set.Sort()
	d := fn(policies.Input{Specs: f.set, Snapshot: f.snap, History: f.hist, Now: t0})
	out := map[string]string{}
	for _, w := range d.Workspaces {
		s := w.Verdict.String()
		for _, p := range w.Placements {
			s += " " + p.Node
		}
		if w.PreemptedBy != nil {
			s += " by " + w.PreemptedBy.String()
		}
		if w.Verdict == policies.VerdictWait {
			s += " (" + w.Reason.Kind.String() + ")"
		}
		out[w.Ref.String()] = s
	}
	return out
}

func TestFIFO(t *testing.T) {
	tests := map[string]struct {
		build func(f *fixture)
		want  map[string]string
	}{
		"the head blocks everyone behind it, whatever their tier": {
			build: func(f *fixture) {
				f.run("a-low/r", 1, []int{0, 1}, 10)
				f.run("a-low/r2", 2, []int{0}, 10)
				f.ws("a-low/big", 4, 1, 1)
				f.ws("b-high/small", 1, 1, 2)
			},
			want: map[string]string{"a-low/r": "run node-1", "a-low/r2": "run node-2", "a-low/big": "wait (capacity)", "b-high/small": "wait (queue)"},
		},
		"first fit: the first node with room, not the tightest": {
			build: func(f *fixture) {
				f.run("a-low/r", 2, []int{0, 1, 2}, 10)
				f.ws("a-low/one", 1, 1, 1)
			},
			want: map[string]string{"a-low/r": "run node-2", "a-low/one": "start node-1"},
		},
		"never preempts, in submit order": {
			build: func(f *fixture) {
				f.run("a-low/r1", 1, []int{0, 1, 2, 3}, 10)
				f.run("a-low/r2", 2, []int{0, 1, 2}, 10)
				f.ws("b-high/late", 1, 1, 5)
				f.ws("a-low/early", 1, 1, 1)
			},
			want: map[string]string{"a-low/r1": "run node-1", "a-low/r2": "run node-2", "a-low/early": "start node-2", "b-high/late": "wait (capacity)"},
		},
		"a gang starts whole or not at all": {
			build: func(f *fixture) {
				f.run("a-low/r", 2, []int{0}, 10)
				f.ws("a-low/gang", 4, 2, 1)
			},
			want: map[string]string{"a-low/r": "run node-2", "a-low/gang": "wait (capacity)"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(2, map[string]int{"a-low": 4, "b-high": 4})
			tt.build(f)
			if diff := cmp.Diff(tt.want, f.decide(FIFO)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestNomad(t *testing.T) {
	tests := map[string]struct {
		build func(f *fixture)
		want  map[string]string
	}{
		"bin-packs: the tightest node": {
			build: func(f *fixture) {
				f.run("a-low/r", 2, []int{0, 1, 2}, 10)
				f.ws("a-low/one", 1, 1, 1)
			},
			want: map[string]string{"a-low/r": "run node-2", "a-low/one": "start node-2"},
		},
		"priority order, no blocking, no quotas": {
			build: func(f *fixture) {
				f.run("a-low/r", 1, []int{0, 1}, 10)
				f.ws("a-low/big", 4, 1, 1)   // fits node-2 but comes after high
				f.ws("b-high/over", 4, 1, 5) // beyond its quota of 0: Nomad has none
			},
			want: map[string]string{"a-low/r": "run node-1", "b-high/over": "start node-2", "a-low/big": "wait (capacity)"},
		},
		"preempts at least 10 points lower, whole workspaces, lowest first": {
			build: func(f *fixture) {
				f.run("a-low/r1", 1, []int{0, 1, 2, 3}, 10)
				f.run("c-med/r2", 2, []int{0, 1, 2, 3}, 10)
				f.ws("b-high/x", 2, 1, 1)
			},
			want: map[string]string{"a-low/r1": "preempt node-1 by b-high/x", "c-med/r2": "run node-2", "b-high/x": "start node-1"},
		},
		"5 points lower is not enough": {
			build: func(f *fixture) {
				f.run("d-mid/r1", 1, []int{0, 1, 2, 3}, 10)
				f.run("d-mid/r2", 2, []int{0, 1, 2, 3}, 10)
				f.ws("c-med/x", 2, 1, 1)
			},
			want: map[string]string{"d-mid/r1": "run node-1", "d-mid/r2": "run node-2", "c-med/x": "wait (capacity)"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(2, map[string]int{"a-low": 4, "b-high": 0, "c-med": 4, "d-mid": 4})
			tt.build(f)
			if diff := cmp.Diff(tt.want, f.decide(Nomad)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestQuota(t *testing.T) {
	tests := map[string]struct {
		build func(f *fixture)
		want  map[string]string
	}{
		"borrows idle capacity beyond its quota": {
			build: func(f *fixture) {
				f.ws("a-low/x", 4, 1, 1)
				f.ws("a-low/y", 4, 1, 2)
			},
			want: map[string]string{"a-low/x": "start node-1", "a-low/y": "start node-2"},
		},
		"inside its quota it reclaims from a borrower, most recently started first": {
			build: func(f *fixture) {
				f.run("a-low/old", 1, []int{0, 1, 2, 3}, 60)
				f.run("a-low/new", 2, []int{0, 1, 2, 3}, 5)
				f.ws("c-low/x", 4, 1, 1)
			},
			want: map[string]string{"a-low/old": "run node-1", "a-low/new": "preempt node-2 by c-low/x", "c-low/x": "start node-2"},
		},
		"a higher tier beyond its quota does not preempt another project": {
			build: func(f *fixture) {
				f.run("a-low/r1", 1, []int{0, 1, 2, 3}, 10)
				f.run("c-low/r2", 2, []int{0, 1, 2, 3}, 10)
				f.ws("b-high/x", 1, 1, 1)
			},
			want: map[string]string{"a-low/r1": "run node-1", "c-low/r2": "run node-2", "b-high/x": "wait (capacity)"},
		},
		"in-quota work is never reclaimed": {
			build: func(f *fixture) {
				f.run("a-low/r1", 1, []int{0, 1, 2, 3}, 10)
				f.run("c-low/r2", 2, []int{0, 1, 2, 3}, 10)
				f.ws("c-low/x", 1, 1, 1)
			},
			want: map[string]string{"a-low/r1": "run node-1", "c-low/r2": "run node-2", "c-low/x": "wait (capacity)"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(2, map[string]int{"a-low": 4, "b-high": 0, "c-low": 4})
			tt.build(f)
			if diff := cmp.Diff(tt.want, f.decide(Quota)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// Priority within a project: one project whose workspaces carry different
// priorities cannot be written in berth's specs (the tier is the
// project's), so the rule is tested on the world directly.
func TestQuotaPriorityWithinProject(t *testing.T) {
	f := newFixture(1, map[string]int{"a-low": 4})
	f.run("a-low/r", 1, []int{0, 1, 2, 3}, 10)
	f.ws("a-low/x", 4, 1, 1)
	f.set.Sort()
	wd := newWorld(policies.Input{Specs: f.set, Snapshot: f.snap, History: f.hist, Now: t0})
	queue := wd.settle()
	queue[0].prio = 50
	if !wd.place(queue[0], bestFit, func(w, v *work) bool { return v.proj == w.proj && v.prio < w.prio }, func(a, b *work) bool { return false }, func(a, b []*work) bool { return len(a) < len(b) }) {
		t.Fatal("a higher priority in the same project could not preempt")
	}
}

// TestScratch: each baseline's decision built on a Scratch that the
// decisions over other inputs were built on is its decision built fresh.
func TestScratch(t *testing.T) {
	inputs := []func() *fixture{
		func() *fixture {
			f := newFixture(3, map[string]int{"a-low": 4, "b-high": 4})
			f.run("a-low/r", 1, []int{0, 1}, 10)
			f.run("a-low/r2", 2, []int{0, 1, 2, 3}, 10)
			f.run("c-mid/orphan", 3, []int{0}, 5) // no project: its allocations still decide
			f.ws("a-low/big", 4, 1, 1)
			f.ws("b-high/small", 1, 1, 2)
			f.ws("b-high/gang", 2, 2, 3)
			return f
		},
		func() *fixture {
			f := newFixture(1, map[string]int{"a-low": 2})
			f.ws("a-low/one", 1, 1, 1)
			return f
		},
		func() *fixture {
			f := newFixture(2, map[string]int{"a-low": 2, "b-high": 6})
			f.run("a-low/r", 1, []int{0, 1, 2}, 10)
			f.ws("b-high/late", 4, 1, 5)
			f.ws("a-low/early", 1, 1, 1)
			return f
		},
	}
	for _, pol := range []struct {
		name   string
		decide func(policies.Input) policies.Decision
	}{{"fifo", FIFO}, {"nomad", Nomad}, {"quota", Quota}} {
		var s policies.Scratch
		for round := range 2 {
			for i, build := range inputs {
				f := build()
				f.set.Sort()
				in := policies.Input{Specs: f.set, Snapshot: f.snap, History: f.hist, Now: t0}
				fresh := pol.decide(in)
				in.Scratch = &s
				if diff := cmp.Diff(fresh, pol.decide(in)); diff != "" {
					t.Errorf("%s, round %d, input %d: on a used Scratch (-fresh +got)\n%s", pol.name, round, i, diff)
				}
			}
		}
	}
}
