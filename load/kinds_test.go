package load

import (
	"bytes"
	"strings"
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
	// Kinds in order of preference: l40s's quota of 4 holds the gang
	// that h100's 8 + 2 does not.
	pref, err := CheckFS(kindsFS(strings.Replace(strings.Replace(kindsRepo, "gpuKind: h100", "gpuKinds: [h100, l40s]", 1), "gpus: 4, gpu", "gpus: 2, gpu", 1)), ".")
	if err != nil || pref.Set == nil || len(pref.Diagnostics) > 0 {
		t.Fatalf("gpuKinds: %v %v", err, pref.Diagnostics)
	}
	if r := pref.Set.Workspace(schema.Ref{Project: "ml", Name: "train"}).Spec.Resources; !cmp.Equal(r.Kinds(), []string{"h100", "l40s"}) || r.GPUKind != "" {
		t.Errorf("train's resources with gpuKinds %+v", r)
	}
	serve := set.Workspace(schema.Ref{Project: "ml", Name: "serve"})
	if r := serve.Spec.Resources; r.GPUKind != "" || r.GPUModel != "NVIDIA L40S" {
		t.Errorf("serve's resources %+v", r)
	}
	if r.Summary.Kinds != 2 {
		t.Errorf("summary counts %d kinds, want 2", r.Summary.Kinds)
	}
}

// TestGPUKindErrors: each mistake about GPU kinds is one error at the
// field, that says what to write.
func TestGPUKindErrors(t *testing.T) {
	kind := func(name, match string) string {
		return "---\napiVersion: berth.dev/v1\nkind: GPUKind\nmetadata: {name: " + name + "}\nspec: {match: \"" + match + "\"}\n"
	}
	tests := map[string]struct {
		edits  []string // old, new pairs replaced in kindsRepo
		append string   // documents added at its end (line 46 on)
		want   string   // the one diagnostic
	}{
		"duplicate": {append: kind("h100", "Foo"),
			want: `specs.yaml:49:12: duplicate GPUKind "h100": it is already defined at specs.yaml:6:1; rename or remove one`},
		"overlap": {append: kind("hopper", "nvidia h100 80gb*"),
			want: `specs.yaml:50:8: GPU kind "hopper": spec.match "nvidia h100 80gb*" overlaps kind "h100"'s match "NVIDIA H100*" (specs.yaml:10:3): a device group both match would be of two kinds; narrow one of the patterns`},
		"unknown kind": {edits: []string{"gpuKind: h100", "gpuKind: h10"},
			want: `specs.yaml:37:24: workspace "train": resources.gpuKind: there is no GPUKind "h10"; did you mean "h100"?`},
		"unknown kind, listed": {edits: []string{"gpuKind: h100", "gpuKind: mi300"},
			want: `specs.yaml:37:24: workspace "train": resources.gpuKind: there is no GPUKind "mi300"; use one of h100, l40s`},
		"model and kind": {edits: []string{"gpuKind: h100", "gpuKind: h100, gpuModel: NVIDIA H100 80GB HBM3"},
			want: `specs.yaml:37:24: spec.resources: gpuModel and gpuKind are both set; give one: gpuKind "h100" for any GPU of that kind, or gpuModel "NVIDIA H100 80GB HBM3" for that model alone`},
		"quota kind": {edits: []string{"h100: 8, l40s: 4", "h100: 8, l40z: 4"},
			want: `specs.yaml:27:22: project "ml": quota.kinds: there is no GPUKind "l40z"; did you mean "l40s"?`},
		"borrow kind": {edits: []string{"kinds: {h100: 2}", "kinds: {h100: 2, mi300: 1}"},
			want: `specs.yaml:30:22: project "ml": borrowLimit.kinds: there is no GPUKind "mi300"; use one of h100, l40s`},
		"borrow kind no quota": {edits: []string{"h100: 8, l40s: 4", "h100: 8", "kinds: {h100: 2}", "kinds: {h100: 2, l40s: 1}"},
			want: `specs.yaml:30:22: project "ml": borrowLimit.kinds names kind "l40s", which quota.kinds does not: a kind's borrow limit bounds borrowing beyond its own quota; name it in quota.kinds (l40s: 0 for none), or leave it out here`},
		"quota fit kind": {edits: []string{"replicas: 2", "replicas: 3"},
			want: `specs.yaml:37:15: workspace "train" can never run: it needs 12 GPUs (3 replicas × 4) of kind "h100" but project "ml" may use at most 10 of that kind (quota.kinds.h100 8 + borrowLimit.kinds.h100 2); lower its GPUs or replicas, or raise the project's quota.kinds.h100 or borrowLimit.kinds.h100`},
		// serve asks for no kind: it counts against gpus, which counts
		// the GPUs of kinds the quota does not name.
		"quota fit gpus": {edits: []string{"gpus: 1, gpuModel", "gpus: 4, gpuModel"},
			want: `specs.yaml:45:15: workspace "serve" can never run: it needs 4 GPUs but project "ml" may use at most 3 (quota 2 + borrowLimit 1); lower its GPUs or replicas, or raise the project's quota or borrowLimit`},
		"no node of kind": {append: kind("a100", "NVIDIA A100*") + "---\napiVersion: berth.dev/v1\nkind: Workspace\nmetadata: {name: old, project: ml}\nspec:\n  task: {image: x}\n  resources: {gpus: 1, gpuKind: a100}\n",
			want: `specs.yaml:57:24: workspace "old" can never run: no node of cluster "c" has a GPU of kind "a100" (spec.match "NVIDIA A100*" at specs.yaml:50:8); ask for another kind, or change the kind's match or the cluster's nodes`},
		"too few of kind": {append: "---\napiVersion: berth.dev/v1\nkind: Workspace\nmetadata: {name: big, project: ml}\nspec:\n  task: {image: x}\n  resources: {gpus: 8, gpuKind: l40s}\n",
			want: `specs.yaml:52:15: workspace "big" can never run: no node of cluster "c" has 8 GPUs of kind "l40s"; lower its GPUs or relax its topology`},
		"empty match": {edits: []string{"match: NVIDIA L40S", `match: ""`},
			want: `specs.yaml:17:3: spec.match: "" is out of range: match is a device group's name or a pattern such as "NVIDIA H100*"`},
		"weight 0": {edits: []string{"weight: 0.5", "weight: 0"},
			want: `specs.yaml:18:3: spec.weight: 0 is out of range: weight is a number greater than 0`},
		"preference: unknown kind": {edits: []string{"gpuKind: h100", "gpuKinds: [h100, mi300]"},
			want: `specs.yaml:37:41: workspace "train": resources.gpuKinds: there is no GPUKind "mi300"; use one of h100, l40s`},
		"preference: twice": {edits: []string{"gpuKind: h100", "gpuKinds: [h100, l40s, h100]"},
			want: `specs.yaml:37:47: spec.resources.gpuKinds lists "h100" twice (0 and 2); list each kind once, in order of preference`},
		"preference beside a kind": {edits: []string{"gpuKind: h100", "gpuKind: h100, gpuKinds: [h100]"},
			want: `specs.yaml:37:39: spec.resources: gpuKinds is set beside gpuModel or gpuKind; give one: gpuKinds lists every kind the workspace may run on, in order of preference`},
		// Neither kind holds 12: the first one's figures, and that no
		// other fits either.
		"preference: quota fit": {edits: []string{"gpuKind: h100", "gpuKinds: [h100, l40s]", "replicas: 2", "replicas: 3", "kinds: {h100: 2}", "kinds: {h100: 2, l40s: 0}"},
			want: `specs.yaml:37:15: workspace "train" can never run: it needs 12 GPUs (3 replicas × 4) of kind "h100" but project "ml" may use at most 10 of that kind (quota.kinds.h100 8 + borrowLimit.kinds.h100 2); lower its GPUs or replicas, or raise the project's quota.kinds.h100 or borrowLimit.kinds.h100; nor does any other kind it lists (2 in all)`},
		"kinds and cpu quota": {edits: []string{"    gpus: 2\n", "    gpus: 2\n    cpu: 64\n"},
			want: `specs.yaml:27:5: project "ml": a quota that names GPU kinds (quota.kinds) cannot name cpu or memory too: berth counts a kind's quota in GPUs alone; leave cpu and memory out of this quota, or the kinds`},
		"negative quota": {edits: []string{"h100: 8, l40s: 4", "h100: -1, l40s: 4"},
			want: `specs.yaml:27:13: spec.quota.kinds.h100: -1 is out of range: a number of GPUs of a kind is a whole number from 0 to 100000`},
		"bad kind key": {edits: []string{"h100: 8, l40s: 4", "h100: 8, L40S: 4"},
			want: `specs.yaml:27:22: spec.quota.kinds: "L40S" is not a valid name: quota.kinds maps GPUKind names to whole numbers of GPUs, such as {h100: 8}`},
		"bad gpuKind": {edits: []string{"gpuKind: h100", "gpuKind: H100"},
			want: `specs.yaml:37:24: spec.resources.gpuKind: "H100" is not valid: gpuKind names a GPUKind, such as h100`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			src := kindsRepo
			for i := 0; i < len(tt.edits); i += 2 {
				if !strings.Contains(src, tt.edits[i]) {
					t.Fatalf("%q is not in the repo", tt.edits[i])
				}
				src = strings.Replace(src, tt.edits[i], tt.edits[i+1], 1)
			}
			_, diags, err := FS(kindsFS(src+tt.append), ".")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range diags {
				got = append(got, d.String())
			}
			if diff := cmp.Diff([]string{tt.want}, got); diff != "" {
				t.Errorf("diagnostics (-want +got):\n%s", diff)
			}
		})
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

// TestGPUKindsReferenceExamples: the GPU kinds part of the reference
// holds specs that load together: the two-model fleet and the MIG kind
// (a kind of MIG instances overlaps no kind of whole GPUs), each kind
// matching what the reference says.
func TestGPUKindsReferenceExamples(t *testing.T) {
	part := referenceOutro[strings.Index(referenceOutro, "## GPU kinds"):]
	part = part[:strings.Index(part[1:], "\n## ")+1]
	var docs []string
	for _, block := range strings.Split(part, "```yaml\n")[1:] {
		docs = append(docs, block[:strings.Index(block, "```")])
	}
	if len(docs) != 2 {
		t.Fatalf("%d yaml examples in the GPU kinds part, want 2", len(docs))
	}
	src := strings.Join(append(docs, "apiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: medium}\nspec: {value: 50}\n"), "---\n")
	set, diags, err := FS(fstest.MapFS{"specs.yaml": {Data: []byte(src)}}, ".")
	if err != nil || set == nil {
		t.Fatalf("FS: %v %v", err, diags)
	}
	kindOf := func(model string) string {
		if k := set.KindOf(model); k != nil {
			return k.Meta.Name
		}
		return ""
	}
	if len(set.Kinds) != 3 || kindOf("NVIDIA A100-SXM4-80GB MIG 1g.10gb") != "a100-1g" || kindOf("NVIDIA H100 80GB HBM3") != "h100" ||
		kindOf("NVIDIA H100 80GB HBM3 MIG 1g.10gb") != "" || set.Workspaces[0].Spec.Resources.GPUKind != "a100-1g" {
		t.Errorf("kinds %+v, workspaces %+v", set.Kinds, set.Workspaces)
	}
}
