package load

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"time"
)

// writeTree writes files (slash paths relative to dir) into dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// messages returns "file: message" of each diagnostic, file relative to
// dir.
func messages(dir string, ds Diagnostics) []string {
	var out []string
	for _, d := range ds {
		rel, err := filepath.Rel(dir, d.Pos.File)
		if err != nil {
			rel = d.Pos.File
		}
		out = append(out, filepath.ToSlash(rel)+": "+d.Message)
	}
	return out
}

// hasMessage reports whether some diagnostic of file holds every part.
func hasMessage(msgs []string, file string, parts ...string) bool {
next:
	for _, m := range msgs {
		if !strings.HasPrefix(m, file+": ") {
			continue
		}
		for _, p := range parts {
			if !strings.Contains(m, p) {
				continue next
			}
		}
		return true
	}
	return false
}

// TestLoaderReadsOnlyRegularFilesInTheTree: links out of the tree, links
// to directories, loops, dangling links, FIFOs and devices are each named
// in a diagnostic and never read; a link to a file inside the tree is
// read like the file.
func TestLoaderReadsOnlyRegularFilesInTheTree(t *testing.T) {
	outside := t.TempDir()
	writeTree(t, outside, map[string]string{"secret.yaml": "apiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: x}\nspec: {value: 1, db_password: hunter2}\n"})
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"tiers/low.yaml":     "apiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: low}\nspec: {value: 20}\n",
		"shared/high.yaml":   "apiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: high}\nspec: {value: 80}\n",
		"dir.yaml/mid.yaml":  "apiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: mid}\nspec: {value: 50}\n",
		"notes/readme.txt":   "not a spec",
		"outdir/placeholder": "",
	})
	symlink(t, "/etc/passwd", filepath.Join(dir, "passwd.yaml"))
	symlink(t, "/proc/self/environ", filepath.Join(dir, "environ.yaml"))
	symlink(t, "/dev/zero", filepath.Join(dir, "zero.yaml"))
	symlink(t, filepath.Join(outside, "secret.yaml"), filepath.Join(dir, "secret.yaml"))
	symlink(t, "../../"+filepath.Base(outside)+"/secret.yaml", filepath.Join(dir, "tiers", "relative.yaml"))
	symlink(t, "loop-b.yaml", filepath.Join(dir, "loop-a.yaml"))
	symlink(t, "loop-a.yaml", filepath.Join(dir, "loop-b.yaml"))
	symlink(t, "gone.yaml", filepath.Join(dir, "dangling.yaml"))
	symlink(t, "shared", filepath.Join(dir, "linkdir"))
	symlink(t, "shared", filepath.Join(dir, "linkdir.yaml"))
	symlink(t, outside, filepath.Join(dir, "outdir", "escape"))
	symlink(t, "../shared/high.yaml", filepath.Join(dir, "tiers", "high-link.yaml"))
	symlink(t, "/etc/passwd", filepath.Join(dir, "notes", "passwd.txt")) // not a spec name: never read, nothing to say
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}

	done := make(chan struct{})
	var r *Report
	var err error
	go func() {
		defer close(done)
		r, err = Check(dir)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute): // a hang is the bug this test is for
		t.Fatal("Check hangs (on the FIFO?)")
	}
	if err != nil {
		t.Fatalf("Check: %v (want diagnostics, not an I/O error)", err)
	}
	msgs := messages(dir, r.Diagnostics)
	for file, parts := range map[string][]string{
		"passwd.yaml":         {"symbolic link to /etc/passwd", "outside the spec tree"},
		"environ.yaml":        {"symbolic link to /proc/self/environ", "outside the spec tree"},
		"zero.yaml":           {"symbolic link to /dev/zero", "outside the spec tree"},
		"secret.yaml":         {"outside the spec tree"},
		"tiers/relative.yaml": {"outside the spec tree"},
		"loop-a.yaml":         {"loop"},
		"loop-b.yaml":         {"loop"},
		"dangling.yaml":       {"gone.yaml, which does not exist"},
		"linkdir":             {"link to the directory shared", "does not follow links to directories"},
		"linkdir.yaml":        {"link to the directory shared"},
		"outdir/escape":       {"symbolic link to /", "not followed", "if it is a directory of specs"},
		"fifo.yaml":           {"named pipe (FIFO)", "only regular files"},
	} {
		if !hasMessage(msgs, file, parts...) {
			t.Errorf("no diagnostic for %s saying %q; got:\n%s", file, parts, strings.Join(msgs, "\n"))
		}
	}
	for _, m := range msgs {
		if strings.Contains(m, "db_password") || strings.Contains(m, "root:") || strings.HasPrefix(m, "notes/") {
			t.Errorf("a file outside the tree (or not a spec) was read: %s", m)
		}
	}
	// low, high (through tiers/high-link.yaml and shared/high.yaml: a
	// duplicate, so the linked file was read) and mid (a directory named
	// *.yaml is walked).
	if !hasMessage(msgs, "tiers/high-link.yaml", `duplicate PriorityTier "high"`) && !hasMessage(msgs, "shared/high.yaml", `duplicate PriorityTier "high"`) {
		t.Errorf("the in-tree link tiers/high-link.yaml was not read as a spec; got:\n%s", strings.Join(msgs, "\n"))
	}
	if r.Summary.Tiers != 4 {
		t.Errorf("read %d tiers, want 4 (low, mid, high twice)", r.Summary.Tiers)
	}
	if r.Set != nil {
		t.Errorf("a tree with refused links is valid")
	}
}

// TestLoaderRefusesNonRegularFileArguments: a FIFO or a device named on
// the command line is refused, not read.
func TestLoaderRefusesNonRegularFileArguments(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan struct{})
	var r *Report
	var err error
	go func() { defer close(done); r, err = Check(fifo, "/dev/zero") }()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("Check hangs on a FIFO argument")
	}
	if err != nil {
		t.Fatal(err)
	}
	msgs := messages("/", r.Diagnostics)
	if !hasMessage(msgs, strings.TrimPrefix(fifo, "/"), "named pipe") || !hasMessage(msgs, "dev/zero", "device") {
		t.Errorf("got:\n%s", strings.Join(msgs, "\n"))
	}
}

// TestLoaderSizeLimits: a file over the per-file limit, and the files
// past the per-tree limit, are diagnostics naming the limit; nothing of
// them is parsed.
func TestLoaderSizeLimits(t *testing.T) {
	dir := t.TempDir()
	big := "apiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: big}\nspec: {value: 1}\n# " + strings.Repeat("x", 2000) + "\n"
	writeTree(t, dir, map[string]string{
		"a.yaml": "apiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: a}\nspec: {value: 10}\n",
		"b.yaml": big,
		"c.yaml": "apiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: c}\nspec: {value: 30}\n",
		"d.yaml": "apiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: d}\nspec: {value: 40}\n",
	})
	r, err := CheckWith(Options{Limits: Limits{FileBytes: 1024, TreeBytes: 200}}, dir)
	if err != nil {
		t.Fatal(err)
	}
	msgs := messages(dir, r.Diagnostics)
	if !hasMessage(msgs, "b.yaml", "too large", "2.0 KiB", "limit of 1 KiB per file", "--max-file-size") {
		t.Errorf("no per-file limit diagnostic for b.yaml; got:\n%s", strings.Join(msgs, "\n"))
	}
	if !hasMessage(msgs, "d.yaml", "nor any file after it", "limit of 200 bytes", "--max-tree-size") {
		t.Errorf("no per-tree limit diagnostic at d.yaml; got:\n%s", strings.Join(msgs, "\n"))
	}
	if r.Summary.Tiers != 2 {
		t.Errorf("parsed %d tiers, want 2 (a and c)", r.Summary.Tiers)
	}

	// The same limits hold for a tree in an fs.FS, such as a git commit's.
	fsys := fstest.MapFS{"b.yaml": {Data: []byte(big)}}
	r, err = CheckFSWith(fsys, ".", Options{Limits: Limits{FileBytes: 1024}})
	if err != nil {
		t.Fatal(err)
	}
	if msgs := messages(".", r.Diagnostics); !hasMessage(msgs, "b.yaml", "too large") {
		t.Errorf("fs.FS: got:\n%s", strings.Join(msgs, "\n"))
	}
}

// TestLoaderLinksInMapFS: a git tree's links (fstest.MapFS symlinks) are
// followed inside the tree and refused outside it.
func TestLoaderLinksInMapFS(t *testing.T) {
	fsys := fstest.MapFS{
		"specs/low.yaml":    {Data: []byte("apiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: low}\nspec: {value: 20}\n")},
		"specs/alias.yaml":  {Data: []byte("low.yaml"), Mode: os.ModeSymlink},
		"specs/passwd.yaml": {Data: []byte("/etc/passwd"), Mode: os.ModeSymlink},
		"specs/up.yaml":     {Data: []byte("../outside.yaml"), Mode: os.ModeSymlink},
		"outside.yaml":      {Data: []byte("kind: Nope\n")},
	}
	r, err := CheckFS(fsys, "specs")
	if err != nil {
		t.Fatal(err)
	}
	msgs := messages(".", r.Diagnostics)
	if !hasMessage(msgs, "specs/low.yaml", `duplicate PriorityTier "low"`, "specs/alias.yaml") {
		t.Errorf("the in-tree link was not read; got:\n%s", strings.Join(msgs, "\n"))
	}
	if !hasMessage(msgs, "specs/passwd.yaml", "outside the spec tree") || !hasMessage(msgs, "specs/up.yaml", "outside the spec tree") {
		t.Errorf("links out of the tree not refused; got:\n%s", strings.Join(msgs, "\n"))
	}
}

// TestProgressCounts: a load's Progress ends with every file read and
// every document counted.
func TestProgressCounts(t *testing.T) {
	dir := t.TempDir()
	writeRepo(t, dir, 20)
	var p Progress
	r, err := CheckWith(Options{Progress: &p}, dir)
	if err != nil {
		t.Fatal(err)
	}
	s := r.Summary
	if p.Files.Load() != 20 || p.Read.Load() != 20 || p.Documents.Load() != int64(s.Tiers+s.Projects+s.Workspaces+s.Volumes) {
		t.Errorf("progress %d of %d files, %d documents; summary %+v", p.Read.Load(), p.Files.Load(), p.Documents.Load(), s)
	}
}

// TestOpenDirListsOnce: a tree lists each directory once, so the loader
// walks the revision its source named; a new tree lists it as it is now.
func TestOpenDirListsOnce(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	names := func(fsys fs.FS) []string {
		t.Helper()
		es, err := fs.ReadDir(fsys, ".")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range es {
			out = append(out, e.Name())
		}
		return out
	}
	tree, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	first := names(tree)
	if err := os.WriteFile(filepath.Join(dir, "b.yaml"), []byte("b"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := names(tree); !slices.Equal(got, first) || !slices.Equal(got, []string{"a.yaml"}) {
		t.Errorf("the same tree lists %v, then %v; want [a.yaml] both times", first, got)
	}
	again, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(again); !slices.Equal(got, []string{"a.yaml", "b.yaml"}) {
		t.Errorf("a new tree lists %v, want [a.yaml b.yaml]", got)
	}
}
