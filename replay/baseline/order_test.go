package baseline

import (
	"testing"
	"time"

	"github.com/berth-dev/berth/schema"
	"github.com/google/go-cmp/cmp"
)

func TestInOrder(t *testing.T) {
	pa, pb := &project{name: "a"}, &project{name: "b"}
	mk := func(p *project, name string, min int, prio int) *work {
		return &work{ref: schema.Ref{Project: p.name, Name: name}, proj: p, queued: t0.Add(time.Duration(min) * time.Minute), prio: prio}
	}
	// Project a's run is not in queue order; b's is.
	queue := []*work{mk(pa, "x", 5, 20), mk(pa, "y", 1, 20), mk(pa, "z", 3, 20), mk(pb, "u", 2, 80), mk(pb, "v", 4, 80)}
	byTime := func(a, b *work) bool { return a.queued.Before(b.queued) }
	byPrio := func(a, b *work) bool {
		if a.prio != b.prio {
			return a.prio > b.prio
		}
		return a.queued.Before(b.queued)
	}
	collect := func(less func(a, b *work) bool, passes func(*work) bool, stop string) []string {
		var out []string
		inOrder(queue, less, passes, func(w *work) bool {
			out = append(out, w.ref.Name)
			return w.ref.Name != stop
		})
		return out
	}
	tests := map[string]struct {
		got, want []string
	}{
		"by time":              {collect(byTime, nil, ""), []string{"y", "u", "z", "v", "x"}},
		"by priority":          {collect(byPrio, nil, ""), []string{"u", "v", "y", "z", "x"}},
		"stops when told":      {collect(byTime, nil, "z"), []string{"y", "u", "z"}},
		"only those that pass": {collect(byTime, func(w *work) bool { return w.ref.Name != "u" && w.ref.Name != "z" }, ""), []string{"y", "v", "x"}},
	}
	for name, tt := range tests {
		if diff := cmp.Diff(tt.want, tt.got); diff != "" {
			t.Errorf("%s (-want +got)\n%s", name, diff)
		}
	}
	if queue[0].ref.Name != "x" {
		t.Errorf("inOrder reordered its input")
	}
}
