package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"

	"github.com/berth-dev/berth/schema"
)

// DirSource reads specs from a local directory. Its revision ID is a
// hash of every file's path and content (hidden files and directories,
// such as .git, left out), so it changes exactly when the specs do. A
// symbolic link counts by its target and, when it leads to a regular file
// inside the directory, by that file's content too, so a spec reached
// through a link is watched like any other. The revision's FS never leads
// outside Dir and never blocks on a FIFO (schema.OpenDir).
type DirSource struct {
	Dir string
}

// Read returns the directory's current revision.
func (s DirSource) Read(ctx context.Context) (Revision, error) {
	fsys, err := schema.OpenDir(s.Dir)
	if err != nil {
		return Revision{}, fmt.Errorf("read %s: %w", s.Dir, err)
	}
	type entry struct {
		path string
		link bool
	}
	var entries []entry
	err = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != "." && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		switch {
		case d.Type().IsRegular():
			entries = append(entries, entry{path: p})
		case d.Type()&fs.ModeSymlink != 0:
			entries = append(entries, entry{path: p, link: true})
		}
		return nil
	})
	if err != nil {
		return Revision{}, fmt.Errorf("read %s: %w", s.Dir, err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].path < entries[j].path })
	h := sha256.New()
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return Revision{}, err
		}
		fmt.Fprintf(h, "%s\x00", e.path)
		if e.link {
			target, _ := fs.ReadLink(fsys, e.path)
			fmt.Fprintf(h, "-> %s\x00", target)
			if st, err := fs.Stat(fsys, e.path); err != nil || !st.Mode().IsRegular() {
				continue // the loader names it; its target is all there is
			}
		}
		if err := hashFile(h, fsys, e.path); err != nil {
			return Revision{}, fmt.Errorf("read %s: %w", filepath.Join(s.Dir, e.path), err)
		}
		h.Write([]byte{0})
	}
	return Revision{ID: hex.EncodeToString(h.Sum(nil))[:12], FS: fsys, Root: "."}, nil
}

// hashFile writes the content of the regular file at p to h; a file that
// is no longer regular when opened (swapped for a FIFO) adds nothing.
func hashFile(h io.Writer, fsys fs.FS, p string) error {
	f, err := fsys.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return err
	}
	_, err = io.Copy(h, f)
	return err
}
