package load

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"
)

// Rule files the property test writes: one per section, one that reads
// projects from workspaces, one whose top level is a pattern (it governs
// everything), one that does not compile.
var propRules = []string{
	"projects: [string]: spec: quota: gpus: <=6 @msg(\"a project's quota is at most 6 GPUs\")\n",
	"workspaces: [string]: [string]: spec: resources: gpus: <=4\n",
	"tiers: high: spec: value: >=60\n",
	"workspaces: [P=string]: [string]: spec: owner: !=projects[P].metadata.name\n",
	"[string]: [string]: metadata: name: !=\"p2\"\n",
	"workspaces: [string]: [string]: spec: {\n",
	"import \"strings\"\nworkspaces: [string]: [N=string]: metadata: name: strings.HasPrefix(\"w\")\n",
}

// propFile draws the content of the file at name (its kind follows from
// its name).
func propFile(t *rapid.T, name string) string {
	pad := strings.Repeat("# moved down\n", rapid.IntRange(0, 2).Draw(t, "pad"))
	switch {
	case strings.HasPrefix(name, "rules-"):
		return rapid.SampledFrom(propRules).Draw(t, "rule")
	case name == "cluster.yaml":
		return fmt.Sprintf("%sapiVersion: berth.dev/v1\nkind: Cluster\nmetadata: {name: c}\nspec:\n  nodes:\n  - {name: n, count: %d, gpus: 8, cpu: %d, memory: 64Gi}\n",
			pad, rapid.IntRange(1, 3).Draw(t, "nodes"), rapid.SampledFrom([]int{8, 64}).Draw(t, "cores"))
	case name == "tiers.yaml":
		return fmt.Sprintf("%sapiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: low}\nspec: {value: 20}\n---\napiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: high}\nspec: {value: %d}\n",
			pad, rapid.SampledFrom([]int{20, 50, 70}).Draw(t, "high"))
	case strings.HasPrefix(name, "proj-"):
		return fmt.Sprintf("%sapiVersion: berth.dev/v1\nkind: Project\nmetadata: {name: %s}\nspec:\n  tier: %s\n  quota: {gpus: %d, cpu: %d}\n  borrowLimit: {gpus: 2}\n",
			pad, rapid.SampledFrom([]string{"p0", "p1", "p2"}).Draw(t, "project"),
			rapid.SampledFrom([]string{"low", "high", "hgh"}).Draw(t, "tier"),
			rapid.IntRange(0, 8).Draw(t, "quota"), rapid.SampledFrom([]int{4, 100}).Draw(t, "cpu"))
	}
	var docs []string
	for range rapid.IntRange(1, 2).Draw(t, "docs") {
		gpus := rapid.SampledFrom([]string{"0", "1", "4", "9", "x"}).Draw(t, "gpus")
		docs = append(docs, fmt.Sprintf("apiVersion: berth.dev/v1\nkind: Workspace\nmetadata: {name: %s, project: %s}\nspec:\n  owner: %s\n  task: {image: img}\n  resources: {gpus: %s}\n",
			rapid.SampledFrom([]string{"w0", "w1", "w2", "v"}).Draw(t, "name"),
			rapid.SampledFrom([]string{"p0", "p1", "p2", "nope"}).Draw(t, "wsproject"),
			rapid.SampledFrom([]string{"p0", "alice"}).Draw(t, "owner"), gpus))
	}
	body := pad + strings.Join(docs, "---\n")
	if rapid.IntRange(0, 9).Draw(t, "broken") == 0 {
		body += "spec: [\n" // a syntax error
	}
	return body
}

// TestPropIncrementalLoad: over random sequences of edits (files written,
// rewritten, moved down a few lines, removed; rule files among them), a
// load through one Cache gives the Report a fresh load gives, diagnostics
// included; so does a load through a Cache read back from the file
// another one wrote (Save, Restore), as berth apply's next run does.
func TestPropIncrementalLoad(t *testing.T) {
	names := []string{"tiers.yaml", "proj-a.yaml", "proj-b.yaml", "ws-0.yaml", "ws-1.yaml", "ws-2.yaml", "ws-3.yaml", "cluster.yaml", "rules-a.cue", "rules-b.cue"}
	rapid.Check(t, func(t *rapid.T) {
		fsys := fstest.MapFS{}
		cache := &Cache{}
		for step := range rapid.IntRange(1, 8).Draw(t, "steps") {
			if rapid.Bool().Draw(t, "persist") {
				var buf bytes.Buffer
				if err := cache.Save(&buf, "k"); err != nil {
					t.Fatal(err)
				}
				cache = &Cache{}
				if _, err := cache.Restore(buf.Bytes(), "k"); err != nil {
					t.Fatal(err)
				}
			}
			for range rapid.IntRange(1, 3).Draw(t, "edits") {
				name := rapid.SampledFrom(names).Draw(t, "file")
				if step > 0 && rapid.IntRange(0, 4).Draw(t, "remove") == 0 {
					delete(fsys, name)
					continue
				}
				fsys[name] = &fstest.MapFile{Data: []byte(propFile(t, name))}
			}
			full, err := CheckFS(fsys, ".")
			if err != nil {
				t.Fatal(err)
			}
			inc, err := CheckFSWith(fsys, ".", Options{Cache: cache})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(full, inc, cmpopts.EquateEmpty()); diff != "" {
				files := slices.Sorted(maps.Keys(fsys))
				t.Fatalf("step %d (files %v): incremental load differs from a full one (-full +incremental):\n%s", step, files, diff)
			}
		}
	})
}

// TestPropIncrementalLoadDir is TestPropIncrementalLoad on a directory of
// the OS, where a Cache knows an unchanged file by its listing (size and
// modification time) and does not read it. Each edit leaves the file
// with a modification time of its own, older than the racy window, as
// files written a while before a load have.
func TestPropIncrementalLoadDir(t *testing.T) {
	names := []string{"tiers.yaml", "proj-a.yaml", "proj-b.yaml", "ws-0.yaml", "ws-1.yaml", "ws-2.yaml", "ws-3.yaml", "cluster.yaml", "rules-a.cue", "rules-b.cue"}
	rapid.Check(t, func(t *rapid.T) {
		dir, err := os.MkdirTemp("", "berth-prop-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		cache := &Cache{}
		mtime := time.Now().Add(-time.Hour)
		for step := range rapid.IntRange(1, 8).Draw(t, "steps") {
			for range rapid.IntRange(1, 3).Draw(t, "edits") {
				name := filepath.Join(dir, rapid.SampledFrom(names).Draw(t, "file"))
				if step > 0 && rapid.IntRange(0, 4).Draw(t, "remove") == 0 {
					os.Remove(name)
					continue
				}
				if err := os.WriteFile(name, []byte(propFile(t, filepath.Base(name))), 0o644); err != nil {
					t.Fatal(err)
				}
				mtime = mtime.Add(time.Second)
				if err := os.Chtimes(name, mtime, mtime); err != nil {
					t.Fatal(err)
				}
			}
			full, err := Check(dir)
			if err != nil {
				t.Fatal(err)
			}
			inc, err := CheckWith(Options{Cache: cache}, dir)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(full, inc, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("step %d: incremental load differs from a full one (-full +incremental):\n%s", step, diff)
			}
		}
	})
}

// TestCacheTakesTheTreesSums: a file whose content hash the tree gives
// (WithSums) and that the cache holds under it is not read (shown by
// content changed behind the tree's back: the old result stays); a file
// the tree gives no hash for is read.
func TestCacheTakesTheTreesSums(t *testing.T) {
	dir := t.TempDir()
	ws := func(gpus int) []byte {
		return fmt.Appendf(nil, "apiVersion: berth.dev/v1\nkind: Workspace\nmetadata: {name: w, project: p}\nspec: {owner: a, task: {image: i}, resources: {gpus: %d}}\n", gpus)
	}
	files := map[string][]byte{
		"tiers.yaml": []byte("apiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: low}\nspec: {value: 20}\n"),
		"p.yaml":     []byte("apiVersion: berth.dev/v1\nkind: Project\nmetadata: {name: p}\nspec: {tier: low}\n"),
		"w.yaml":     ws(1),
	}
	sums := map[string][sha256.Size]byte{}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		sums[name] = sha256.Sum256(b)
	}
	cache := &Cache{}
	gpus := func(sums map[string][sha256.Size]byte) (int, CacheStats) {
		t.Helper()
		fsys, err := OpenDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		r, err := CheckFSWith(WithSums(fsys, sums), ".", Options{Cache: cache})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Diagnostics.Err(); err != nil {
			t.Fatal(err)
		}
		return r.Set.Workspaces[0].Spec.Resources.GPUs, cache.Stats()
	}
	if got, st := gpus(sums); got != 1 || st.FilesParsed != 3 {
		t.Fatalf("first load: %d GPUs, %+v; want 1 GPU, 3 files parsed", got, st)
	}
	if err := os.WriteFile(filepath.Join(dir, "w.yaml"), ws(2), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, st := gpus(sums); got != 1 || st.FilesParsed != 0 {
		t.Errorf("a file the tree gave the old hash of was read (%d GPUs, %+v), want the cached 1 GPU", got, st)
	}
	delete(sums, "w.yaml")
	if got, st := gpus(sums); got != 2 || st.FilesParsed != 1 {
		t.Errorf("a file the tree gave no hash for: %d GPUs, %+v; want 2, read", got, st)
	}
}

// TestCacheFileOfAnotherKeyKeepsNothing: a cache file written under
// another key (another build of berth), or one that is empty, reads as an
// empty cache without an error; one cut short is an error, and empty too.
func TestCacheFileOfAnotherKeyKeepsNothing(t *testing.T) {
	fsys := fstest.MapFS{
		"tiers.yaml": {Data: []byte("apiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: low}\nspec: {value: 20}\n")},
		"p.yaml":     {Data: []byte("apiVersion: berth.dev/v1\nkind: Project\nmetadata: {name: p}\nspec: {tier: low, quota: {gpus: 2, memory: 64Gi}}\n")},
	}
	cache := &Cache{}
	if _, err := CheckFSWith(fsys, ".", Options{Cache: cache}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := cache.Save(&buf, "build-1"); err != nil {
		t.Fatal(err)
	}
	written := buf.Bytes()
	reload := func(data []byte, key string) (CacheStats, error) {
		t.Helper()
		c := &Cache{}
		_, err := c.Restore(data, key)
		if _, lerr := CheckFSWith(fsys, ".", Options{Cache: c}); lerr != nil {
			t.Fatal(lerr)
		}
		return c.Stats(), err
	}
	if st, err := reload(written, "build-1"); err != nil || st.FilesReused != 2 {
		t.Errorf("the same key: %+v, %v; want both files reused", st, err)
	}
	if st, err := reload(written, "build-2"); err != nil || st.FilesParsed != 2 {
		t.Errorf("another key: %+v, %v; want both files parsed, no error", st, err)
	}
	if st, err := reload(nil, "build-1"); err != nil || st.FilesParsed != 2 {
		t.Errorf("an empty file: %+v, %v; want both files parsed, no error", st, err)
	}
	if st, err := reload(written[:len(written)-20], "build-1"); err == nil || st.FilesParsed != 2 {
		t.Errorf("a file cut short: %+v, %v; want an error, and both files parsed", st, err)
	}
}

// TestCacheRereadsOnlyWhatChanged: a load after one file changed parses
// that file alone, and checks again only the rule files that govern what
// changed.
func TestCacheRereadsOnlyWhatChanged(t *testing.T) {
	fsys := fstest.MapFS{
		"tiers.yaml":    {Data: []byte("apiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: low}\nspec: {value: 20}\n")},
		"p.yaml":        {Data: []byte("apiVersion: berth.dev/v1\nkind: Project\nmetadata: {name: p}\nspec: {tier: low, quota: {gpus: 4}}\n")},
		"w1.yaml":       {Data: []byte("apiVersion: berth.dev/v1\nkind: Workspace\nmetadata: {name: w1, project: p}\nspec: {owner: a, task: {image: i}, resources: {gpus: 1}}\n")},
		"w2.yaml":       {Data: []byte("apiVersion: berth.dev/v1\nkind: Workspace\nmetadata: {name: w2, project: p}\nspec: {owner: a, task: {image: i}, resources: {gpus: 1}}\n")},
		"projects.cue":  {Data: []byte(propRules[0])},
		"workspace.cue": {Data: []byte(propRules[1])},
	}
	cache := &Cache{}
	load := func() CacheStats {
		t.Helper()
		r, err := CheckFSWith(fsys, ".", Options{Cache: cache})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Diagnostics.Err(); err != nil {
			t.Fatal(err)
		}
		return cache.Stats()
	}
	// In order: each step's stats depend on the one before.
	steps := []string{"1 first", "2 unchanged", "3 a workspace", "4 a project rule", "5 a project moved"}
	cases := map[string]struct {
		edit func()
		want CacheStats
	}{
		"1 first":     {func() {}, CacheStats{FilesParsed: 4, RulesChecked: 2}},
		"2 unchanged": {func() {}, CacheStats{FilesReused: 4, RulesReused: 2}},
		"3 a workspace": {func() {
			fsys["w2.yaml"].Data = []byte(strings.Replace(string(fsys["w2.yaml"].Data), "gpus: 1", "gpus: 2", 1))
		}, CacheStats{FilesReused: 3, FilesParsed: 1, RulesReused: 1, RulesChecked: 1}},
		"4 a project rule":  {func() { fsys["projects.cue"].Data = []byte("projects: [string]: spec: quota: gpus: <=5\n") }, CacheStats{FilesReused: 4, RulesReused: 1, RulesChecked: 1}},
		"5 a project moved": {func() { fsys["p.yaml"].Data = append([]byte("# moved\n"), fsys["p.yaml"].Data...) }, CacheStats{FilesReused: 3, FilesParsed: 1, RulesReused: 1, RulesChecked: 1}},
	}
	for _, name := range steps {
		cases[name].edit()
		if diff := cmp.Diff(cases[name].want, load()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}
