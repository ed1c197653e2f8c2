package source

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/berth-dev/berth/load"
)

func TestDirSourceRevisionFollowsContent(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("one"), 0o644)
	src := DirSource{Dir: dir}
	r1, err := src.Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, ".git"), 0o755)
	os.WriteFile(filepath.Join(dir, ".git", "HEAD"), []byte("ref"), 0o644)
	r2, _ := src.Read(t.Context())
	os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("two"), 0o644)
	r3, _ := src.Read(t.Context())
	if r1.ID != r2.ID {
		t.Errorf("a hidden file changed the revision: %s → %s", r1.ID, r2.ID)
	}
	if r3.ID == r2.ID {
		t.Errorf("new content, same revision %s", r3.ID)
	}
}

// TestDirSourceLinksAndFIFOs: a spec reached through a link inside the
// directory changes the revision when its content does; a FIFO never
// blocks a read, and the revision's FS does not lead outside the
// directory.
func TestDirSourceLinksAndFIFOs(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(dir, "shared"), 0o755)
	os.WriteFile(filepath.Join(dir, "shared", "t.yaml"), []byte("one"), 0o644)
	os.WriteFile(filepath.Join(outside, "secret.yaml"), []byte("db_password: x"), 0o644)
	if err := os.Symlink("shared/t.yaml", filepath.Join(dir, "t.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret.yaml"), filepath.Join(dir, "secret.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := DirSource{Dir: dir}
	read := func() Revision {
		t.Helper()
		done := make(chan Revision)
		go func() {
			r, err := src.Read(t.Context())
			if err != nil {
				t.Error(err)
			}
			done <- r
		}()
		select {
		case r := <-done:
			return r
		case <-time.After(time.Minute):
			t.Fatal("DirSource.Read hangs on a FIFO")
		}
		return Revision{}
	}
	r1 := read()
	if _, err := fs.ReadFile(r1.FS, "secret.yaml"); err == nil {
		t.Error("the revision's FS reads a file outside the directory through a link")
	}
	os.WriteFile(filepath.Join(outside, "secret.yaml"), []byte("db_password: y"), 0o644)
	if r2 := read(); r2.ID != r1.ID {
		t.Errorf("a file outside the directory changed the revision")
	}
	os.Remove(filepath.Join(dir, "t.yaml"))
	if err := os.Symlink("shared/t.yaml", filepath.Join(dir, "t.yaml")); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "shared", "t.yaml"), []byte("two"), 0o644)
	r3 := read()
	if r3.ID == r1.ID {
		t.Errorf("new content behind an in-tree link, same revision %s", r3.ID)
	}
	if b, err := fs.ReadFile(r3.FS, "t.yaml"); err != nil || string(b) != "two" {
		t.Errorf("reading through the in-tree link: %q, %v", b, err)
	}
}

// TestDirSourceKnowsUnchangedFilesByListing: a DirSource from
// NewDirSource does not read a file whose size and modification time are
// those it was hashed under (shown by content changed behind its back, the
// time put back: the revision stays), and reads it again under a new time,
// or when it was written within the racy window before the read.
func TestDirSourceKnowsUnchangedFilesByListing(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.yaml")
	write := func(body string, at time.Time) {
		t.Helper()
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	src := NewDirSource(dir)
	id := func() string {
		t.Helper()
		r, err := src.Read(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	old := time.Now().Add(-time.Hour)
	write("one", old)
	first := id()
	write("two", old)
	if got := id(); got != first {
		t.Errorf("a file with its listing unchanged was read again: revision %s → %s", first, got)
	}
	write("two", old.Add(time.Second))
	if got := id(); got == first {
		t.Errorf("a file with a new modification time: revision still %s", got)
	}
	now := time.Now()
	write("six", now)
	racy := id()
	write("ten", now)
	if got := id(); got == racy {
		t.Errorf("a file written within the racy window before the read that hashed it was not read again: revision still %s", got)
	}
	if fresh, err := (DirSource{Dir: dir}).Read(t.Context()); err != nil || fresh.ID != id() {
		t.Errorf("a DirSource without memory names the same content %v, %v; want the same revision", fresh.ID, err)
	}
}

// writeFleet writes n workspaces in 20 projects under dir, one file
// each, as the fleet benchmark does, all modified an hour ago; it returns
// a workspace's file body by number and RUN value.
func writeFleet(b testing.TB, dir string, n int) func(i int, run string) string {
	b.Helper()
	old := time.Now().Add(-time.Hour)
	write := func(p, body string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			b.Fatal(err)
		}
	}
	ws := func(i int, run string) string {
		return fmt.Sprintf("apiVersion: berth.dev/v1\nkind: Workspace\nmetadata: {name: ws-%05d, project: team-%02d}\nspec:\n  owner: bench\n  state: Running\n  task: {driver: raw_exec, command: /bin/sh, args: [\"-c\", \"sleep 3600\"], env: {RUN: %q}}\n  resources: {gpus: 0, memory: 16Mi}\n", i, i%20, run)
	}
	write(filepath.Join(dir, "tiers.yaml"), "apiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: medium}\nspec: {value: 50}\n")
	for p := range 20 {
		write(filepath.Join(dir, fmt.Sprintf("team-%02d", p), "project.yaml"), fmt.Sprintf("apiVersion: berth.dev/v1\nkind: Project\nmetadata: {name: team-%02d}\nspec:\n  tier: medium\n  quota: {gpus: 16}\n", p))
	}
	for i := range n {
		write(filepath.Join(dir, fmt.Sprintf("team-%02d", i%20), fmt.Sprintf("ws-%05d.yaml", i)), ws(i, "1"))
	}
	return ws
}

// BenchmarkDirSourceRead: a NewDirSource reading a directory of 10,000
// unchanged spec files, as a loop does each cycle (issue 25): a listing,
// and no file read. 175 ms a read on 2 cores when each file was statted
// by path through the tree; 54 ms from the listing's own information.
func BenchmarkDirSourceRead(b *testing.B) {
	dir := b.TempDir()
	writeFleet(b, dir, 10000)
	s := NewDirSource(dir)
	first, err := s.Read(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		r, err := s.Read(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		if r.ID != first.ID {
			b.Fatalf("revision %s, want %s: nothing changed", r.ID, first.ID)
		}
	}
}

// BenchmarkReadLoadOneFileChanged: what a loop's cycle does with the
// specs when one of 10,000 files changed: the source names the revision,
// and the loader loads it from its cache. The loader walks the tree the
// source listed (load.OpenDir lists a directory once): 151 ms on 2
// cores, 214 ms when it listed the 10,000 files again.
func BenchmarkReadLoadOneFileChanged(b *testing.B) {
	dir := b.TempDir()
	ws := writeFleet(b, dir, 10000)
	s, load := NewDirSource(dir), SpecLoader(load.Limits{})
	rev, err := s.Read(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	if set, problems, err := load(rev.FS, rev.Root); set == nil || err != nil {
		b.Fatal(problems, err)
	}
	i := 0
	for b.Loop() {
		i++
		if err := os.WriteFile(filepath.Join(dir, "team-00", "ws-00000.yaml"), []byte(ws(0, "edit-"+strconv.Itoa(i))), 0o644); err != nil {
			b.Fatal(err)
		}
		next, err := s.Read(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		if next.ID == rev.ID {
			b.Fatal("the revision did not change")
		}
		rev = next
		if set, problems, err := load(rev.FS, rev.Root); set == nil || err != nil {
			b.Fatal(problems, err)
		}
	}
}
