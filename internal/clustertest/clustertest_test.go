package clustertest

import (
	"fmt"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	const text = `
# two nodes, one allocation
node b gpus=2 domains=2 mem=64Gi dc=eu
node a gpus=1 model=A100
alloc ml/train node=b gpus=1,0 started=-2h checkpoint=-5m
`
	gpu := func(id string, i, dom int, model string) drivers.GPU {
		return drivers.GPU{ID: id, Index: i, Model: model, Domain: dom, NUMA: 0, Healthy: true}
	}
	tests := map[string]struct {
		opt      Options
		ids      [3]string // a's GPU 0, b's GPU 0 and 1
		allocIDs []string
	}{
		"policies' names": {Options{}, [3]string{"g0", "g0", "g1"}, []string{"g0", "g1"}},
		"plan's names":    {Options{NodeGPUIDs: true}, [3]string{"a-g0", "b-g0", "b-g1"}, []string{"b-g0", "b-g1"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Parse(text, now, tt.opt)
			if err != nil {
				t.Fatal(err)
			}
			want := &drivers.Snapshot{ObservedAt: now,
				Nodes: []drivers.Node{
					{Name: "a", ID: "a", Ready: true, Eligible: true, GPUs: []drivers.GPU{gpu(tt.ids[0], 0, 0, "A100")}},
					{Name: "b", ID: "b", Ready: true, Eligible: true, Datacenter: "eu", MemoryBytes: 64 << 30,
						GPUs: []drivers.GPU{gpu(tt.ids[1], 0, 0, "H100"), gpu(tt.ids[2], 1, 1, "H100")}},
				},
				Allocs: []drivers.Alloc{{Workspace: schema.Ref{Project: "ml", Name: "train"}, Node: "b", Phase: drivers.AllocRunning,
					GPUs: tt.allocIDs, StartedAt: now.Add(-2 * time.Hour), LastCheckpoint: now.Add(-5 * time.Minute)}},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if _, err := Parse("vm x", now, Options{}); err == nil {
		t.Errorf("an unknown line parsed")
	}
}

// TestParseMIGParents: mig=PROFILE:K puts K MIG instances in one domain;
// migparents=P splits them over P parents, each a Domain of its own past
// the NVLink domains, on the NUMA nodes in turn.
func TestParseMIGParents(t *testing.T) {
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	snap, err := Parse("node a gpus=2 domains=2 numa=2 model=A100 mig=1g.10gb:4 migparents=2\nnode b gpus=0 model=A100 mig=1g.10gb:2", now, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range snap.Nodes {
		for _, g := range n.GPUs {
			got = append(got, fmt.Sprintf("%s/%s %s d%d n%d", n.Name, g.ID, g.Model, g.Domain, g.NUMA))
		}
	}
	want := []string{
		"a/g0 A100 d0 n0", "a/g1 A100 d1 n1",
		"a/g2 A100 MIG 1g.10gb d2 n0", "a/g3 A100 MIG 1g.10gb d2 n0", "a/g4 A100 MIG 1g.10gb d3 n1", "a/g5 A100 MIG 1g.10gb d3 n1",
		"b/g0 A100 MIG 1g.10gb d0 n0", "b/g1 A100 MIG 1g.10gb d0 n0",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	if _, err := Parse("node a mig=1g.10gb:2 migparents=x", now, Options{}); err == nil {
		t.Error("migparents=x parsed")
	}
}

func TestLine(t *testing.T) {
	f := Fields("node a cpu=500m mem=2Gi disk=3Mi cores=4 quota=unlimited gpus=2,0,1 none= draining")
	if diff := cmp.Diff([]string{"node", "a", "draining"}, f.Words); diff != "" {
		t.Errorf("Words (-want +got):\n%s", diff)
	}
	if !f.Flags["draining"] || f.Flags["cpu"] {
		t.Errorf("Flags = %v, want the words only", f.Flags)
	}
	cpu, mem, disk, cores, err := f.Resources()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := [4]int64{cpu, mem, disk, int64(cores)}, [4]int64{500, 2 << 30, 3 << 20, 4}; got != want {
		t.Errorf("Resources() = %v, want %v", got, want)
	}
	ints := map[string]struct {
		key       string
		def, want int
	}{
		"given":     {"cores", 9, 4},
		"absent":    {"replicas", 9, 9},
		"unlimited": {"quota", 0, schema.Unlimited},
	}
	for name, tt := range ints {
		if got, err := f.Int(tt.key, tt.def); err != nil || got != tt.want {
			t.Errorf("%s: Int(%q, %d) = %d, %v; want %d", name, tt.key, tt.def, got, err, tt.want)
		}
	}
	lists := map[string]struct {
		key  string
		want []string
	}{
		"sorted": {"gpus", []string{"0", "1", "2"}},
		"empty":  {"none", []string{}},
		"absent": {"volumes", nil},
	}
	for name, tt := range lists {
		if diff := cmp.Diff(tt.want, f.List(tt.key)); diff != "" {
			t.Errorf("%s: List(%q) (-want +got):\n%s", name, tt.key, diff)
		}
	}
	for _, bad := range []string{"cpu=x", "mem=1Ti", "cores=two"} {
		if _, _, _, _, err := Fields("node a " + bad).Resources(); err == nil {
			t.Errorf("%s: Resources() read it", bad)
		}
	}
	if diff := cmp.Diff([]string{"node a", "alloc b"}, Lines("\n  node a  \n# a comment\n\nalloc b\n")); diff != "" {
		t.Errorf("Lines (-want +got):\n%s", diff)
	}
}
