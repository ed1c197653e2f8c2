package drivers

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/berth-dev/berth/schema"
)

// A snapshot file written before CPUMHz had its name says cpuMilli; it
// still reads, and is written back under the new name.
func TestSnapshotCPUUnderEitherName(t *testing.T) {
	for name, doc := range map[string]string{
		"cpuMilli (older files)": `{"nodes":[{"name":"n","ready":true,"eligible":true,"cpuMilli":8000}],"allocs":[{"workspace":"p/w","node":"n","gpus":[],"cpuMilli":500,"phase":"running"}]}`,
		"cpuMHz":                 `{"nodes":[{"name":"n","ready":true,"eligible":true,"cpuMHz":8000}],"allocs":[{"workspace":"p/w","node":"n","gpus":[],"cpuMHz":500,"phase":"running"}]}`,
	} {
		var s Snapshot
		if err := json.Unmarshal([]byte(doc), &s); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(s.Nodes) != 1 || s.Nodes[0].CPUMHz != 8000 || !s.Nodes[0].Ready || len(s.Allocs) != 1 || s.Allocs[0].CPUMHz != 500 || s.Allocs[0].Phase != AllocRunning || s.Allocs[0].Workspace.Name != "w" {
			t.Errorf("%s: read %+v", name, s)
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"cpuMHz":8000`) || !strings.Contains(string(b), `"cpuMHz":500`) || strings.Contains(string(b), "cpuMilli") {
			t.Errorf("%s: written as %s", name, b)
		}
	}
}

func TestByWorkspace(t *testing.T) {
	a, b := schema.Ref{Project: "p", Name: "a"}, schema.Ref{Project: "p", Name: "b"}
	sorted := []Alloc{{Workspace: a, Replica: 0}, {Workspace: a, Replica: 1}, {Workspace: b}}
	got := ByWorkspace(sorted)
	if len(got) != 2 || len(got[a]) != 2 || len(got[b]) != 1 {
		t.Fatalf("groups %v", got)
	}
	if &got[a][0] != &sorted[0] || cap(got[a]) != 2 {
		t.Errorf("a sorted input is not grouped in place, clipped")
	}
	// Unsorted: a's second run is appended to a copy; the input is untouched.
	unsorted := []Alloc{{Workspace: a, Replica: 0}, {Workspace: b}, {Workspace: a, Replica: 1}}
	before := slices.Clone(unsorted)
	got = ByWorkspace(unsorted)
	if len(got[a]) != 2 || got[a][1].Replica != 1 || len(got[b]) != 1 {
		t.Fatalf("groups %v", got)
	}
	if !slices.EqualFunc(unsorted, before, func(x, y Alloc) bool { return x.Workspace == y.Workspace && x.Replica == y.Replica }) {
		t.Errorf("the input changed: %v", unsorted)
	}
}

func TestAllocsOf(t *testing.T) {
	a, b, c, z := schema.Ref{Project: "p", Name: "a"}, schema.Ref{Project: "p", Name: "b"}, schema.Ref{Project: "p", Name: "c"}, schema.Ref{Project: "p", Name: "z"}
	sorted := []Alloc{{Workspace: a, Replica: 0}, {Workspace: a, Replica: 1}, {Workspace: c}}
	if got := AllocsOf(sorted, a); len(got) != 2 || &got[0] != &sorted[0] || cap(got) != 2 {
		t.Errorf("a: %v (cap %d), want its two, in place, clipped", got, cap(got))
	}
	if got := AllocsOf(sorted, c); len(got) != 1 || got[0].Workspace != c {
		t.Errorf("c: %v", got)
	}
	for _, r := range []schema.Ref{b, z} {
		if got := AllocsOf(sorted, r); len(got) != 0 {
			t.Errorf("%s holds nothing, got %v", r, got)
		}
	}
	if got := AllocsOf(nil, a); len(got) != 0 {
		t.Errorf("no allocations: %v", got)
	}
}
