package drivers

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPlacementsOf(t *testing.T) {
	allocs := []*Alloc{
		{Replica: 1, Node: "b", GPUs: []string{"g3", "g1"}},
		{Replica: 0, Node: "a", GPUs: []string{"g0"}},
		{Replica: 2, Node: "c"},
	}
	want := []Placement{
		{Replica: 0, Node: "a", GPUs: []string{"g0"}},
		{Replica: 1, Node: "b", GPUs: []string{"g1", "g3"}},
		{Replica: 2, Node: "c"},
	}
	var buf PlacementBuf
	buf.Grow(1, 1) // too small: Of makes more room
	got := buf.Of(allocs)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("placements (-want +got)\n%s", diff)
	}
	if allocs[0].GPUs[0] != "g3" || allocs[0].Replica != 1 {
		t.Errorf("Of reordered its input: %+v", allocs[0])
	}
	// Appending to one workspace's slices never reaches the next one's.
	next := buf.Of([]*Alloc{{Replica: 0, Node: "d", GPUs: []string{"g9"}}})
	_ = append(got, Placement{Node: "x"})
	_ = append(got[0].GPUs, "x")
	if diff := cmp.Diff([]Placement{{Replica: 0, Node: "d", GPUs: []string{"g9"}}}, next); diff != "" {
		t.Errorf("a later workspace's placements changed (-want +got)\n%s", diff)
	}
	if PlacementsOf(nil) != nil {
		t.Errorf("no allocations: want nil")
	}
}
