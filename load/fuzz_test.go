package load

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

// seeds are real mistakes: the kinds of YAML people write by hand.
var seeds = []string{
	minimal,
	"apiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata:\n  name: low\n spec: {value: 20}\n", // bad indent
	"apiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: low}\nspec:\n\tvalue: 20\n",  // tab
	"apiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: low}\nspec: {value: [20}\n",  // unclosed
	"apiVersion: berth.dev/v1\nkind: Workspace\nmetadata: {name: w, project: p}\nspec: {task: {image: x}, resources: {gpus: 99999999999999999999999}}\n",
	"apiVersion: berth.dev/v1\nkind: Workspace\nmetadata: {name: w, project: p}\nspec: {task: {image: x}, resources: {gpus: 1, memory: 1e400, cpu: -0.5}}\n",
	"a: &x {b: *x}\n",            // recursive alias
	"a: &x 1\nb: *y\n",           // unknown alias
	"<<: {kind: PriorityTier}\n", // merge key
	"kind: Workspace\nmetadata: {name: w, project: p}\nspec: {task: {image: x}, resources: {gpus: 1}, volumes: [{name: v, mountPath: /d}, {name: v, mountPath: /d}]}\n",
	"---\n---\n---\n",
	"null\n",
	"- a\n- b\n",
	"\"just a string\"\n",
	"apiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: low}\nspec: {value: 20, value: 30}\n", // duplicate key
	"apiVersion: berth.dev/v1\nkind: Project\nmetadata: {name: \"x\\u0000y\"}\nspec: {tier: low}\n",
	"apiVersion: berth.dev/v1\nkind: Project\nmetadata: {name: ml}\nspec: {tier: low, quota: {gpus: 1}, borrowLimit: {gpus: 0}, fairShare: {weight: .inf}}\n",
	"apiVersion: berth.dev/v1\nkind: SchedulingPolicy\nmetadata: {name: p}\nspec: {aging: {interval: 99999999999h}}\n",
	"apiVersion: berth.dev/v1\nkind: Cluster\nmetadata: {name: c}\nspec: {nodes: [{count: -5, preset: 3}, 7]}\n",
	"apiVersion: berth.dev/v1\nkind: Workspace\nmetadata: {name: w, project: p}\nspec: !!binary aGVsbG8=\n",
	"apiVersion: berth.dev/v1\nkind: [PriorityTier]\n",
	"apiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: low, labels: {a: {b: c}}}\nspec: {value: 20}\n",
	"\xff\xfe\x00",
	"# comments only\n",
	"%YAML 1.2\n---\na: 1\n",
	"a: [1,\n---\nb: {c\n---\n\tkind: x\n---\nkind: \"open\n---\nkind: PriorityTier\n", // a syntax error per document
	"kind: x\x07\n---\nkind: y\xff\n---\n---\nkind: [}\n",                              // bad bytes, then a mismatched bracket
	"\xef\xbb\xbfapiVersion: berth.dev/v1\r\nkind: PriorityTier\r\nmetadata: {name: low}\r\nspec: {value: 20}\r\n",
}

// FuzzLoad feeds arbitrary bytes to the loader, as a spec file and as a
// rule file: it must never panic, must report problems as diagnostics in
// order, and must return a Set exactly when there is no error.
func FuzzLoad(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s), []byte(nil))
	}
	f.Add([]byte(minimal), []byte("projects: [_]: spec: tier: !=\"low\" @msg(\"no\")\n"))
	f.Add([]byte(minimal), []byte("workspaces: [string]: [string]: spec: replicas!: >1\n"))
	f.Add([]byte(minimal), []byte("package x\nimport \"strings\"\ntiers: [N=_]: metadata: name: strings.HasPrefix(N)\n"))
	f.Add([]byte(minimal), []byte("projects: {{{\n"))
	f.Fuzz(func(t *testing.T, spec, rule []byte) {
		// A hang is a bug too: crash, so the fuzzer keeps the input.
		watchdog := time.AfterFunc(20*time.Second, func() {
			panic(fmt.Sprintf("FS hangs on spec %q, rule %q", spec, rule))
		})
		defer watchdog.Stop()
		fsys := fstest.MapFS{"a.yaml": {Data: spec}}
		if len(rule) > 0 {
			fsys["rules.cue"] = &fstest.MapFile{Data: rule}
		}
		set, diags, err := FS(fsys, ".")
		if err != nil {
			t.Fatalf("I/O error from a map file system: %v", err)
		}
		if (set == nil) != diags.HasErrors() {
			t.Fatalf("set=%v but %d errors: %v", set != nil, diags.Errors(), diags)
		}
		if !sort.SliceIsSorted(diags, func(i, j int) bool { return diags[i].less(diags[j]) }) {
			t.Fatalf("diagnostics not sorted: %v", diags)
		}
		for _, d := range diags {
			if d.Pos.File != "a.yaml" && d.Pos.File != "rules.cue" {
				t.Errorf("diagnostic names file %q: %v", d.Pos.File, d)
			}
			if strings.Contains(d.Message, "internal error") {
				t.Errorf("a library panicked: %v", d)
			}
			if d.Message == "" {
				t.Errorf("empty message at %v", d.Pos)
			}
		}
	})
}
