package watch

import (
	"context"
	"os"
	"path/filepath"
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
	changes, err := Dir(ctx, dir, nil)
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
			changes, err := Dir(ctx, filepath.Join(base, "current", sub), nil)
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
