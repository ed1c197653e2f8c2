package plan

import (
	"fmt"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/internal/clustertest"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/source"
	"github.com/google/go-cmp/cmp"
)

func loadTestSpecs(t *testing.T, fsys fstest.MapFS, name string) *schema.Set {
	t.Helper()
	set, problems, err := source.LoadSpecs(fsys, ".")
	if err != nil || set == nil {
		t.Fatalf("%s specs: %v %v", name, problems, err)
	}
	set.Revision = name
	return set
}

// parsePlanCluster reads the cluster section; every allocation runs the
// base revision.
func parsePlanCluster(t *testing.T, text string, now time.Time) *drivers.Snapshot {
	t.Helper()
	snap, err := clustertest.Parse(text, now, clustertest.Options{NodeGPUIDs: true})
	if err != nil {
		t.Fatalf("cluster: %v", err)
	}
	for i := range snap.Allocs {
		snap.Allocs[i].Revision = "base"
	}
	return snap
}

func TestMarkdownSplitsLongPlans(t *testing.T) {
	r := Report{Version: PlanVersion, Head: "h", Cluster: "c", Warnings: []string{}}
	for i := range 40 {
		p := ProjectReport{Name: fmt.Sprintf("p%02d", i), Change: "changed"}
		for j := range 30 {
			p.Consequences = append(p.Consequences, Consequence{Workspace: schema.Ref{Project: p.Name, Name: fmt.Sprintf("w%02d", j)},
				Kind: "wait", Reason: strings.Repeat("capacity is short ", 5)})
		}
		r.Projects = append(r.Projects, p)
		r.Summary.Wait += 30
	}
	const limit = 20000
	parts := r.Markdown(limit)
	if len(parts) < 3 {
		t.Fatalf("%d parts, want several", len(parts))
	}
	total := 0
	for i, p := range parts {
		if len(p) > limit {
			t.Errorf("part %d has %d characters, over %d", i+1, len(p), limit)
		}
		if !strings.HasPrefix(p, fmt.Sprintf("<sub>berth plan, comment %d of %d</sub>", i+1, len(parts))) {
			t.Errorf("part %d does not say which it is: %.60q", i+1, p)
		}
		if strings.Count(p, "<details>") != strings.Count(p, "</details>") || strings.Count(p, "```")%2 != 0 {
			t.Errorf("part %d cuts a block in two", i+1)
		}
		total += strings.Count(p, "| `p")
	}
	if total != 40*30 {
		t.Errorf("%d table rows over all parts, want %d", total, 40*30)
	}
	if one := r.Markdown(0); len(one) != 1 && len(strings.Join(one, "")) < GitHubCommentLimit {
		t.Errorf("split below the limit")
	}
}

func TestGuessedTopologyWarning(t *testing.T) {
	node := func(name string, gpus int, guessed bool) drivers.Node {
		n := drivers.Node{Name: name, TopologyGuessed: guessed}
		for i := range gpus {
			n.GPUs = append(n.GPUs, drivers.GPU{ID: fmt.Sprintf("%s-g%d", name, i), Index: i})
		}
		return n
	}
	tests := map[string]struct {
		nodes []drivers.Node
		want  []string
	}{
		"agent everywhere": {nodes: []drivers.Node{node("a", 8, false)}},
		"guessed, no GPUs": {nodes: []drivers.Node{node("cpu", 0, true)}},
		"one guessed": {
			nodes: []drivers.Node{node("a", 8, false), node("b", 4, true)},
			want:  []string{"1 node(s) have no GPU topology from berth agent (b): berth assumes one NVLink domain and one NUMA node on each, so nvlink/numa requirements there are not checked against the hardware; run berth agent on them"},
		},
		"many guessed": {
			nodes: []drivers.Node{node("n1", 1, true), node("n2", 1, true), node("n3", 1, true), node("n4", 1, true), node("n5", 1, true), node("n6", 1, true), node("n7", 1, true)},
			want:  []string{"7 node(s) have no GPU topology from berth agent (n1, n2, n3, n4, n5 and 2 more): berth assumes one NVLink domain and one NUMA node on each, so nvlink/numa requirements there are not checked against the hardware; run berth agent on them"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := guessedTopology(&drivers.Snapshot{Nodes: tt.nodes})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("guessedTopology (-want +got):\n%s", diff)
			}
		})
	}
}
