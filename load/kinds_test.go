package load

import (
	"bytes"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/berth-dev/berth/schema"
)

// kindsRepo is a repo of two GPU kinds: a project with a quota and a
// borrow limit per kind, a workspace asking for a kind, and one asking
// for a model that a kind matches (fine: it counts against gpus).
const kindsRepo = `apiVersion: berth.dev/v1
kind: PriorityTier
metadata: {name: low}
spec: {value: 20}
---
apiVersion: berth.dev/v1
kind: GPUKind
metadata: {name: h100}
spec:
  match: "NVIDIA H100*"
  description: Hopper
---
apiVersion: berth.dev/v1
kind: GPUKind
metadata: {name: l40s}
spec:
  match: NVIDIA L40S
  weight: 0.5
---
apiVersion: berth.dev/v1
kind: Project
metadata: {name: ml}
spec:
  tier: low
  quota:
    gpus: 2
    kinds: {h100: 8, l40s: 4}
  borrowLimit:
    gpus: 1
    kinds: {h100: 2}
---
apiVersion: berth.dev/v1
kind: Workspace
metadata: {name: train, project: ml}
spec:
  task: {image: x}
  resources: {gpus: 4, gpuKind: h100}
  replicas: 2
---
apiVersion: berth.dev/v1
kind: Workspace
metadata: {name: serve, project: ml}
spec:
  task: {image: x}
  resources: {gpus: 1, gpuModel: NVIDIA L40S}
`

// kindsCluster has two nodes of eight H100s and one of four L40S.
const kindsCluster = `apiVersion: berth.dev/v1
kind: Cluster
metadata: {name: c}
spec:
  nodes:
  - name: dgx
    count: 2
    gpus:
    - {model: NVIDIA H100 80GB HBM3, count: 8}
  - name: ws
    gpus:
    - {model: NVIDIA L40S, count: 4}
`

func kindsFS(specs string) fstest.MapFS {
	return fstest.MapFS{"specs.yaml": {Data: []byte(specs)}, "cluster.yaml": {Data: []byte(kindsCluster)}}
}

// TestGPUKinds: a repo of two kinds loads their matches and weights
// (sorted by name), the quota and borrow limit per kind, and a
// workspace's gpuKind; the summary counts the kinds.
func TestGPUKinds(t *testing.T) {
	r, err := CheckFS(kindsFS(kindsRepo), ".")
	if err != nil || r.Set == nil {
		t.Fatalf("CheckFS: %v %v", err, r.Diagnostics)
	}
	set := r.Set
	want := []schema.GPUKind{
		{Meta: schema.Meta{Name: "h100"}, Spec: schema.GPUKindSpec{Match: "NVIDIA H100*", Description: "Hopper"}},
		{Meta: schema.Meta{Name: "l40s"}, Spec: schema.GPUKindSpec{Match: "NVIDIA L40S", Weight: 0.5}},
	}
	if diff := cmp.Diff(want, set.Kinds, ignorePositions); diff != "" {
		t.Errorf("kinds (-want +got):\n%s", diff)
	}
	if got := set.Kinds[0].Meta.FieldPos("spec.match"); got != (schema.Pos{File: "specs.yaml", Line: 10, Col: 3}) {
		t.Errorf("h100's spec.match at %v", got)
	}
	if k := set.KindOf("NVIDIA H100 80GB HBM3"); k == nil || k.Meta.Name != "h100" {
		t.Errorf("KindOf(H100) = %v", k)
	}
	p := set.Project("ml")
	if diff := cmp.Diff(map[string]int{"h100": 8, "l40s": 4}, p.Spec.Quota.Kinds); diff != "" {
		t.Errorf("quota.kinds (-want +got):\n%s", diff)
	}
	if b := p.Spec.BorrowLimit; b.GPUs != 1 || !cmp.Equal(b.Kinds, map[string]int{"h100": 2}) {
		t.Errorf("borrowLimit = %+v", b)
	}
	train := set.Workspace(schema.Ref{Project: "ml", Name: "train"})
	if r := train.Spec.Resources; r.GPUKind != "h100" || r.GPUModel != "" || p.Spec.Quota.KindQuota(r.GPUKind) != "h100" {
		t.Errorf("train's resources %+v", r)
	}
	serve := set.Workspace(schema.Ref{Project: "ml", Name: "serve"})
	if r := serve.Spec.Resources; r.GPUKind != "" || r.GPUModel != "NVIDIA L40S" {
		t.Errorf("serve's resources %+v", r)
	}
	if r.Summary.Kinds != 2 {
		t.Errorf("summary counts %d kinds, want 2", r.Summary.Kinds)
	}
}

// TestGPUKindsCached: a repo with GPU kinds loads through a Cache as it
// loads fresh, the second time from the cache, and again from a cache
// read back from the file another one wrote.
func TestGPUKindsCached(t *testing.T) {
	fsys := kindsFS(kindsRepo)
	fsys["kinds.cue"] = &fstest.MapFile{Data: []byte("gpuKinds: [string]: spec: description?: !=\"\"\n")}
	full, err := CheckFS(fsys, ".")
	if err != nil || full.Set == nil {
		t.Fatalf("CheckFS: %v %v", err, full.Diagnostics)
	}
	cache := &Cache{}
	for i, want := range []CacheStats{{FilesParsed: 2, RulesChecked: 1}, {FilesReused: 2, RulesReused: 1}} {
		r, err := CheckFSWith(fsys, ".", Options{Cache: cache})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(full, r, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("load %d through the cache differs (-fresh +cached):\n%s", i+1, diff)
		}
		// The cluster file is read again each time (a Cluster's syntax
		// is not kept).
		if got := cache.Stats(); got.FilesReused+got.FilesParsed != want.FilesReused+want.FilesParsed || got.RulesReused != want.RulesReused || got.RulesChecked != want.RulesChecked {
			t.Errorf("load %d: %+v, want %+v", i+1, got, want)
		}
	}
	var buf bytes.Buffer
	if err := cache.Save(&buf, "k"); err != nil {
		t.Fatal(err)
	}
	restored := &Cache{}
	if _, err := restored.Restore(buf.Bytes(), "k"); err != nil {
		t.Fatal(err)
	}
	r, err := CheckFSWith(fsys, ".", Options{Cache: restored})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(full, r, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("a load through a restored cache differs (-fresh +cached):\n%s", diff)
	}
	if st := restored.Stats(); st.FilesReused == 0 {
		t.Errorf("the restored cache reused no file: %+v", st)
	}
}

// TestGPUKindRules: the repo's CUE rules see GPU kinds under gpuKinds,
// by name, and report a failure at the kind's field.
func TestGPUKindRules(t *testing.T) {
	fsys := kindsFS(kindsRepo)
	fsys["kinds.cue"] = &fstest.MapFile{Data: []byte("gpuKinds: [string]: spec: weight?: >=1 @msg(\"a kind's weight is at least 1\")\n")}
	_, diags, err := FS(fsys, ".")
	if err != nil {
		t.Fatal(err)
	}
	want := `specs.yaml:18:3: GPUKind "l40s": a kind's weight is at least 1 (rule at kinds.cue:1:36)`
	if len(diags) != 1 || diags[0].String() != want {
		t.Errorf("diagnostics %v; want %q", diags, want)
	}
}
