// Package watch tells the loop when a spec directory changes (fsnotify),
// following a git-sync symbolic link to its new target.
package watch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fsnotify/fsnotify"
)

// Dir watches dir and every directory under it (hidden ones, such as
// .git, left out) and sends on the returned channel when anything in them
// changes. Directories created later are watched too. Sends never block:
// changes that come while one is pending merge into it; Run debounces
// them. The channel closes when ctx ends.
//
// dir may be, or pass through, symbolic links: a git-sync checkout is a
// link to the current worktree, published by an atomic swap (`ln -sfn rev2
// tmp && mv -T tmp current`). Dir watches the directories that hold
// those links too; when one is replaced it sends at once and watches the
// new target's tree instead of the old one.
func Dir(ctx context.Context, dir string, log *slog.Logger) (<-chan struct{}, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", dir, err)
	}
	t := &linkedTree{dir: dir, w: w}
	if err := t.follow(); err != nil {
		w.Close()
		return nil, fmt.Errorf("watch %s: %w", dir, err)
	}
	ch := make(chan struct{}, 1)
	notify := func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	go func() {
		defer close(ch)
		defer w.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if slices.Contains(t.links, ev.Name) {
					// A link on the way to dir was replaced: follow it to
					// its new target. A link that is gone for a moment
					// (ln -sfn without mv) is followed when it is back.
					if err := t.follow(); err != nil {
						log.Debug("specs link moved", "link", ev.Name, "err", err)
					}
					notify()
					continue
				}
				if !within(t.root, ev.Name) || hidden(t.root, ev.Name) {
					continue
				}
				if ev.Has(fsnotify.Create) {
					if fi, err := os.Stat(ev.Name); err == nil && fi.IsDir() {
						if err := addTree(w, ev.Name); err != nil {
							log.Warn("cannot watch new directory", "dir", ev.Name, "err", err)
						}
					}
				}
				notify()
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				log.Warn("watching specs", "err", err)
				notify() // something may have been missed: look again
			}
		}
	}()
	return ch, nil
}

// linkedTree is what Dir watches for dir: the tree under dir's real
// path (root) and the directories holding the symbolic links met on the
// way there (links). Only Dir's goroutine uses it after follow's
// first call.
type linkedTree struct {
	dir   string
	w     *fsnotify.Watcher
	root  string
	links []string
}

// follow resolves dir again and watches what it finds: the directory
// holding each link on the way, and the tree under the real path.
// Watches of an earlier target are removed. On error (a link that points
// nowhere for a moment) the links' directories stay watched, so that the
// link's return is seen.
func (t *linkedTree) follow() error {
	for _, p := range t.w.WatchList() {
		t.w.Remove(p)
	}
	prev := t.links
	t.root, t.links = "", nil
	// Watch the links' directories, then resolve again: a swap after the
	// watches are in place arrives as an event.
	_, before, _ := resolveLinks(t.dir)
	t.watchLinks(before)
	root, links, err := resolveLinks(t.dir)
	t.watchLinks(links)
	if err != nil {
		t.watchLinks(prev)
		return err
	}
	if err := addTree(t.w, root); err != nil {
		return err
	}
	t.root = root
	return nil
}

// watchLinks watches the directories that hold links and remembers the
// links.
func (t *linkedTree) watchLinks(links []string) {
	for _, l := range links {
		if slices.Contains(t.links, l) {
			continue
		}
		if err := t.w.Add(filepath.Dir(l)); err == nil {
			t.links = append(t.links, l)
		}
	}
}

// resolveLinks returns path's real, absolute path and the absolute paths
// of the symbolic links it goes through, in the order they are met.
func resolveLinks(path string) (string, []string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", nil, err
	}
	var links []string
	cur := string(filepath.Separator)
	rest := strings.Split(abs, string(filepath.Separator))
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, name)
		fi, err := os.Lstat(next)
		if err != nil {
			return "", links, err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if len(links) == 40 {
			return "", links, errors.New("too many symbolic links")
		}
		links = append(links, next)
		target, err := os.Readlink(next)
		if err != nil {
			return "", links, err
		}
		if filepath.IsAbs(target) {
			cur = string(filepath.Separator)
		}
		rest = append(strings.Split(target, string(filepath.Separator)), rest...)
	}
	fi, err := os.Stat(cur)
	if err != nil {
		return "", links, err
	}
	if !fi.IsDir() {
		return "", links, fmt.Errorf("%s is not a directory", cur)
	}
	return cur, links, nil
}

// addTree watches root and the directories under it, hidden ones left out.
func addTree(w *fsnotify.Watcher, root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if p != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		return w.Add(p)
	})
}

// within reports whether path is dir or under it; false when dir is
// empty (no tree watched).
func within(dir, path string) bool {
	if dir == "" {
		return false
	}
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// hidden reports whether path, under dir, is in or is a hidden entry.
func hidden(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	if err != nil {
		return false
	}
	for _, part := range strings.Split(filepath.ToSlash(rel), "/") {
		if strings.HasPrefix(part, ".") && part != "." && part != ".." {
			return true
		}
	}
	return false
}
