package plan

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/internal/clustertest"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/source"
	"github.com/google/go-cmp/cmp"
	"github.com/rogpeppe/go-internal/txtar"
)

// TestPlanGoldens runs every testdata/*.txtar: the specs before
// (base/…) and after (head/…), the cluster observed at now, in; the plan
// as text, markdown and json out. BERTH_UPDATE=1 rewrites the outputs.
//
//	-- now --     2026-03-02T10:00:00Z
//	-- cluster -- as internal/clustertest reads it, GPU IDs NAME-g0…:
//	              node NAME gpus=N [domains=D] …
//	              alloc PROJECT/NAME node=N gpus=0,1 [started=-1h] [checkpoint=-5m] [phase=stopping] …
//	-- flags --   allow-mass-prune | native=batch
func TestPlanGoldens(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txtar")
	if len(files) < 5 {
		t.Fatalf("%d plan scenarios, want at least 5", len(files))
	}
	update := os.Getenv("BERTH_UPDATE") != ""
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			in := planInput(t, ar)
			r := NewReport(in)
			js, err := json.MarshalIndent(r, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{
				"text":     r.Text(),
				"markdown": strings.Join(r.Markdown(0), MarkdownSplit),
				"json":     string(js) + "\n",
			}
			if again := NewReport(in); !cmp.Equal(r, again) {
				t.Errorf("the same inputs gave another report")
			}
			for _, name := range []string{"text", "markdown", "json"} {
				idx := -1
				for i, f := range ar.Files {
					if f.Name == name {
						idx = i
					}
				}
				if update {
					if idx < 0 {
						ar.Files = append(ar.Files, txtar.File{Name: name})
						idx = len(ar.Files) - 1
					}
					ar.Files[idx].Data = []byte(got[name])
					continue
				}
				if idx < 0 {
					t.Fatalf("no %s section; run with BERTH_UPDATE=1", name)
				}
				if diff := cmp.Diff(string(ar.Files[idx].Data), got[name]); diff != "" {
					t.Errorf("%s (-want +got):\n%s", name, diff)
				}
			}
			if update {
				if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func planInput(t *testing.T, ar *txtar.Archive) PlanInput {
	t.Helper()
	base, head := fstest.MapFS{}, fstest.MapFS{}
	sections := map[string]string{}
	for _, f := range ar.Files {
		switch {
		case strings.HasPrefix(f.Name, "base/"):
			base[strings.TrimPrefix(f.Name, "base/")] = &fstest.MapFile{Data: f.Data}
		case strings.HasPrefix(f.Name, "head/"):
			head[strings.TrimPrefix(f.Name, "head/")] = &fstest.MapFile{Data: f.Data}
		default:
			sections[f.Name] = string(f.Data)
		}
	}
	now, err := time.Parse(time.RFC3339, strings.TrimSpace(sections["now"]))
	if err != nil {
		t.Fatalf("now: %v", err)
	}
	in := PlanInput{Cluster: "test", HeadName: "head", Snapshot: parsePlanCluster(t, sections["cluster"], now), History: &drivers.History{}}
	in.Head = loadTestSpecs(t, head, "head")
	if len(base) > 0 {
		in.Base = loadTestSpecs(t, base, "base")
		in.BaseName = "base"
	}
	// The allocations run what the base revision (else the head) asked:
	// its task fingerprint and its tier's priority, as a driver reports.
	started := in.Base
	if started == nil {
		started = in.Head
	}
	for i := range in.Snapshot.Allocs {
		a := &in.Snapshot.Allocs[i]
		if w := started.Workspace(a.Workspace); w != nil {
			a.SpecHash = drivers.Fingerprint(&w.Spec)
		}
		if p := started.Project(a.Workspace.Project); p != nil {
			if tr := started.Tier(p.Spec.Tier); tr != nil {
				a.Priority = tr.Spec.Value
			}
		}
	}
	for _, f := range strings.Fields(sections["flags"]) {
		switch {
		case f == "allow-mass-prune":
			in.AllowMassPrune = true
		case strings.HasPrefix(f, "native="):
			in.NativePreemption = append(in.NativePreemption, strings.TrimPrefix(f, "native="))
		default:
			t.Fatalf("flag %q", f)
		}
	}
	return in
}

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
