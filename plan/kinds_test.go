package plan

import (
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/clustertest"
	"github.com/berth-dev/berth/schema"
	"github.com/google/go-cmp/cmp"
)

func TestKindWarnings(t *testing.T) {
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	snap, err := clustertest.Parse(`
node a gpus=2 model=H100 also=L40S:1 mig=1g.10gb:7
node b gpus=2 model=H100
`, now, clustertest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	kind := func(name, match string) schema.GPUKind {
		return schema.GPUKind{Meta: schema.Meta{Name: name, Source: schema.Pos{File: "kinds.yaml", Line: 1}}, Spec: schema.GPUKindSpec{Match: match}}
	}
	set := &schema.Set{
		Kinds: []schema.GPUKind{kind("b200", "B200*"), kind("h100", "H100"), kind("slice", "* MIG 1g.10gb")},
		Projects: []schema.Project{{Meta: schema.Meta{Name: "ml"}, Spec: schema.ProjectSpec{Quota: schema.Resources{
			Kinds: map[string]int{"b200": 4, "h100": 2, "slice": 0},
		}}}},
	}
	want := []string{
		`GPU kind b200 (match "B200*", kinds.yaml:1) matches no device group on the cluster (the cluster has "H100", "H100 MIG 1g.10gb", "L40S"): its workspaces wait`,
		`no GPU kind matches device group "L40S" (1 device): only workspaces that ask for no kind run there (or name the model in gpuModel); declare a GPUKind to give quotas in it`,
		`project ml's quota names 4 b200 GPUs, but the cluster has no GPU of kind b200: the quota promises what cannot run`,
	}
	if diff := cmp.Diff(want, KindWarnings(set, snap)); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	// No kinds declared: nothing to say.
	if w := KindWarnings(&schema.Set{}, snap); w != nil {
		t.Errorf("no kinds: %q", w)
	}

}
