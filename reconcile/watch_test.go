package reconcile

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestWatchDirSeesNewSubdirectories(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	changes, err := WatchDir(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	expect := func(what string, want bool) {
		t.Helper()
		select {
		case <-changes:
			if !want {
				t.Fatalf("%s: a change was signalled", what)
			}
		case <-time.After(300 * time.Millisecond):
			if want {
				t.Fatalf("%s: no change signalled", what)
			}
		}
	}
	write := func(rel string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, rel), []byte("kind: Project\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".git/index")
	expect("a write under .git", false)
	write("a.yaml")
	expect("a new file", true)
	if err := os.MkdirAll(filepath.Join(dir, "team"), 0o755); err != nil {
		t.Fatal(err)
	}
	expect("a new directory", true)
	// The watcher adds the new directory as it sees it: writes in it are
	// seen from then on (retry while it catches up on a loaded machine).
	seen := false
	for i := 0; i < 50 && !seen; i++ {
		write("team/b.yaml")
		select {
		case <-changes:
			seen = true
		case <-time.After(100 * time.Millisecond):
		}
	}
	if !seen {
		t.Fatal("a file in the new directory: no change signalled")
	}
	cancel()
	for range changes {
	}
}

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

// expectChange waits for a change on changes (want) or for a quiet spell
// (!want); a change must come within 5 s, quiet is judged after 300 ms.
func expectChange(t *testing.T, changes <-chan struct{}, what string, want bool) {
	t.Helper()
	wait := 300 * time.Millisecond
	if want {
		wait = 5 * time.Second
	}
	select {
	case <-changes:
		if !want {
			t.Fatalf("%s: a change was signalled", what)
		}
	case <-time.After(wait):
		if want {
			t.Fatalf("%s: no change signalled", what)
		}
	}
}

// drain takes the changes signalled until 200 ms pass without one (one
// edit can be several events: a create, then a write), so that the next
// expectation sees only what follows.
func drain(changes <-chan struct{}) {
	for {
		select {
		case <-changes:
		case <-time.After(200 * time.Millisecond):
			return
		}
	}
}

// TestWatchDirFollowsSymlinkSwap publishes revisions the way git-sync
// does: each in its own directory under .worktrees, and a link "current"
// swapped atomically (a new link renamed over the old one). The swap is a
// change at once; edits in the new target are changes; edits in the old
// one no longer are.
func TestWatchDirFollowsSymlinkSwap(t *testing.T) {
	base := t.TempDir()
	for _, rev := range []string{"rev1", "rev2"} {
		if err := os.MkdirAll(filepath.Join(base, ".worktrees", rev, "team"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(".worktrees/rev1", filepath.Join(base, "current")); err != nil {
		t.Fatal(err)
	}
	write := func(rel string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(base, rel), []byte("kind: Project\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	swap := func(target string) {
		t.Helper()
		tmp := filepath.Join(base, "tmp-link")
		if err := os.Symlink(target, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(base, "current")); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ name, sub string }{{"a directory behind the link", "team"}, {"the link itself", ""}} {
		sub := c.sub
		t.Run(c.name, func(t *testing.T) {
			swap(".worktrees/rev1")
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			changes, err := WatchDir(ctx, filepath.Join(base, "current", sub), nil)
			if err != nil {
				t.Fatal(err)
			}
			write(filepath.Join(".worktrees/rev1", sub, "a.yaml"))
			expectChange(t, changes, "an edit in the link's target", true)
			drain(changes)

			swap(".worktrees/rev2")
			expectChange(t, changes, "the link swapped to rev2", true)
			drain(changes)
			write(filepath.Join(".worktrees/rev2", sub, "b.yaml"))
			expectChange(t, changes, "an edit in the new target", true)
			drain(changes)
			write(filepath.Join(".worktrees/rev1", sub, "c.yaml"))
			expectChange(t, changes, "an edit in the old target", false)

			// ln -sfn without mv: the link is gone for a moment, then back.
			if err := os.Remove(filepath.Join(base, "current")); err != nil {
				t.Fatal(err)
			}
			expectChange(t, changes, "the link removed", true)
			drain(changes)
			if err := os.Symlink(".worktrees/rev1", filepath.Join(base, "current")); err != nil {
				t.Fatal(err)
			}
			expectChange(t, changes, "the link back, to rev1", true)
			drain(changes)
			write(filepath.Join(".worktrees/rev1", sub, "d.yaml"))
			expectChange(t, changes, "an edit in rev1 again", true)
			cancel()
			for range changes {
			}
		})
	}
}
