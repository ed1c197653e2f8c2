package reconcile

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/fsnotify/fsnotify"
)

// WatchDir watches dir and every directory under it (hidden ones, such as
// .git, left out) and sends on the returned channel when anything in them
// changes. Directories created later are watched too. Sends never block:
// changes that come while one is pending merge into it; Run debounces
// them. The channel closes when ctx ends.
func WatchDir(ctx context.Context, dir string, log *slog.Logger) (<-chan struct{}, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", dir, err)
	}
	if err := addTree(w, dir); err != nil {
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
				if hidden(dir, ev.Name) {
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
