package plan

import (
	"strings"
	"testing"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/schema/schematest"
)

func fiveRunning() []schema.Workspace { return schematest.Running("med", "a", "b", "c", "d", "e") }

func TestCheckMassPrune(t *testing.T) {
	five := withWorkspaces(fiveRunning()...)
	annotated := withWorkspaces(workspace("med", "a", schema.DesiredRunning))
	annotated.Policy.Meta.Annotations = map[string]string{AllowMassPruneAnnotation: "true"}
	ref := func(n string) schema.Ref { return schema.Ref{Project: "med", Name: n} }
	tests := map[string]struct {
		prev, next *schema.Set
		snap       *drivers.Snapshot
		allow      bool
		refused    bool
		affected   int
	}{
		"remove 4 of 5":          {prev: five, next: withWorkspaces(workspace("med", "a", schema.DesiredRunning)), refused: true, affected: 4},
		"stop 4 of 5":            {prev: five, next: withWorkspaces(append(fiveRunning()[:1], stopped(fiveRunning()[1:])...)...), refused: true, affected: 4},
		"remove 3 of 5":          {prev: five, next: withWorkspaces(fiveRunning()[:2]...), affected: 3},
		"remove 4 of 20 is 20%":  {prev: withWorkspaces(many(20)...), next: withWorkspaces(many(16)...), affected: 4},
		"remove 6 of 20":         {prev: withWorkspaces(many(20)...), next: withWorkspaces(many(14)...), refused: true, affected: 6},
		"flag allows":            {prev: five, next: withWorkspaces(), allow: true, affected: 5},
		"annotation allows":      {prev: five, next: annotated, affected: 4},
		"no specs at all":        {prev: nil, next: &schema.Set{Policy: schema.DefaultPolicy()}, refused: true},
		"running in the cluster": {next: withWorkspaces(), snap: &drivers.Snapshot{Allocs: allocs(ref("a"), ref("b"), ref("c"), ref("d"))}, refused: true, affected: 4},
	}
	// A stricter threshold: more than 10% and more than 1.
	strict := CheckMassPrune(five, withWorkspaces(fiveRunning()[:3]...), nil, PruneGuard{Percent: 10, Min: 1})
	if !strict.Refused() || !strings.Contains(strict.Problem(), "more than 10% and more than 1") {
		t.Errorf("strict threshold: %+v %q", strict, strict.Problem())
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			m := CheckMassPrune(tt.prev, tt.next, tt.snap, PruneGuard{Allow: tt.allow})
			if m.Refused() != tt.refused || len(m.Affected) != tt.affected {
				t.Errorf("refused %v with %d affected (%+v), want %v with %d", m.Refused(), len(m.Affected), m, tt.refused, tt.affected)
			}
			if tt.refused && !strings.Contains(m.Problem(), AllowMassPruneAnnotation) {
				t.Errorf("problem %q does not say how to allow it", m.Problem())
			}
		})
	}
}

func stopped(ws []schema.Workspace) []schema.Workspace {
	for i := range ws {
		ws[i].Spec.State = schema.DesiredStopped
	}
	return ws
}

func many(n int) []schema.Workspace {
	var ws []schema.Workspace
	for i := range n {
		ws = append(ws, workspace("med", string(rune('a'+i)), schema.DesiredRunning))
	}
	return ws
}

func allocs(refs ...schema.Ref) []drivers.Alloc {
	var out []drivers.Alloc
	for i, r := range refs {
		out = append(out, drivers.Alloc{Workspace: r, Node: "node", GPUs: []string{string(rune('0' + i))}, Phase: drivers.AllocRunning})
	}
	return out
}
