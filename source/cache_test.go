package source

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/berth-dev/berth/load"
	"github.com/berth-dev/berth/schema"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestFileCacheCarriesALoadToTheNextProcess: a process that opens the
// file another one saved reads no spec file and validates none when the
// directory is unchanged, validates the one file that changed, and loads
// what a process without the file loads; a file written by another build
// or for another directory, or one cut short, is not used.
func TestFileCacheCarriesALoadToTheNextProcess(t *testing.T) {
	dir, cacheDir := t.TempDir(), t.TempDir()
	ws := writeFleet(t, dir, 50)
	path := filepath.Join(cacheDir, "specs")
	// run is one process: open the file, read and load, save.
	run := func(key string) (*schema.Set, load.CacheStats, error) {
		t.Helper()
		c, openErr := OpenFileCache(path, key, dir)
		rev, err := c.Read(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		set, problems, err := c.Loader(load.Limits{})(rev.FS, rev.Root)
		if err != nil || set == nil {
			t.Fatal(problems, err)
		}
		if err := c.Save(); err != nil {
			t.Fatal(err)
		}
		return set, c.specs.Stats(), openErr
	}
	fresh := func() *schema.Set {
		t.Helper()
		rev, err := DirSource{Dir: dir}.Read(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		set, problems, err := LoadSpecs(rev.FS, rev.Root)
		if err != nil || set == nil {
			t.Fatal(problems, err)
		}
		return set
	}
	same := func(what string, got *schema.Set) {
		t.Helper()
		if diff := cmp.Diff(fresh(), got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: the load differs from a fresh one (-fresh +cached):\n%s", what, diff)
		}
	}
	const all = 50 + 21 // workspaces, projects, the tiers
	if _, st, err := run("b1"); err != nil || st.FilesParsed != all {
		t.Fatalf("first process: %+v, %v; want %d files parsed", st, err, all)
	}
	set, st, err := run("b1")
	if err != nil || st.FilesParsed != 0 || st.FilesReused != all {
		t.Errorf("unchanged: %+v, %v; want all %d files reused", st, err, all)
	}
	same("unchanged", set)
	if err := os.WriteFile(filepath.Join(dir, "team-03", "ws-00003.yaml"), []byte(ws(3, "2")), 0o644); err != nil {
		t.Fatal(err)
	}
	set, st, err = run("b1")
	if err != nil || st.FilesParsed != 1 {
		t.Errorf("one file changed: %+v, %v; want that one parsed", st, err)
	}
	same("one file changed", set)
	if _, st, err := run("b2"); err != nil || st.FilesParsed != all {
		t.Errorf("another build: %+v, %v; want all parsed, no error", st, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b[:len(b)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, st, err := run("b2"); err == nil || st.FilesParsed != all {
		t.Errorf("a file cut short: %+v, %v; want all parsed, and why", st, err)
	}
	other := t.TempDir()
	writeFleet(t, other, 1)
	c, err := OpenFileCache(path, "b2", other)
	if err == nil || !strings.Contains(err.Error(), "was written for") {
		t.Errorf("another directory: %v; want it named", err)
	}
	if rev, err := c.Read(t.Context()); err != nil || rev.ID == "" {
		t.Errorf("a cache not used still reads: %v", err)
	}
}

// BenchmarkFileCacheOneFileChanged: what berth apply does with the specs
// when one of 10,000 files changed since its last run: open the cache
// file, name the revision, load it (one file validated), and save the
// file for the next run.
func BenchmarkFileCacheOneFileChanged(b *testing.B) {
	dir := b.TempDir()
	ws := writeFleet(b, dir, 10000)
	path := filepath.Join(b.TempDir(), "specs")
	run := func(parsed int) {
		c, err := OpenFileCache(path, "k", dir)
		if err != nil {
			b.Fatal(err)
		}
		rev, err := c.Read(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		if set, problems, err := c.Loader(load.Limits{})(rev.FS, rev.Root); set == nil || err != nil {
			b.Fatal(problems, err)
		}
		if err := c.Save(); err != nil {
			b.Fatal(err)
		}
		if st := c.specs.Stats(); st.FilesParsed != parsed {
			b.Fatalf("parsed %d files, want %d", st.FilesParsed, parsed)
		}
	}
	run(10021)
	i := 0
	for b.Loop() {
		i++
		if err := os.WriteFile(filepath.Join(dir, "team-00", "ws-00000.yaml"), []byte(ws(0, "edit-"+strconv.Itoa(i))), 0o644); err != nil {
			b.Fatal(err)
		}
		run(1)
	}
}
