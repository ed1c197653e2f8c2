package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// DirSource reads specs from a local directory. Its revision ID is a
// hash of every file's path and content (hidden files and directories,
// such as .git, left out), so it changes exactly when the specs do.
type DirSource struct {
	Dir string
}

// Read returns the directory's current revision.
func (s DirSource) Read(ctx context.Context) (Revision, error) {
	fsys := os.DirFS(s.Dir)
	var paths []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != "." && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return Revision{}, fmt.Errorf("read %s: %w", s.Dir, err)
	}
	sort.Strings(paths)
	h := sha256.New()
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return Revision{}, err
		}
		f, err := fsys.Open(p)
		if err != nil {
			return Revision{}, fmt.Errorf("read %s: %w", filepath.Join(s.Dir, p), err)
		}
		fmt.Fprintf(h, "%s\x00", p)
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return Revision{}, fmt.Errorf("read %s: %w", filepath.Join(s.Dir, p), err)
		}
		h.Write([]byte{0})
	}
	return Revision{ID: hex.EncodeToString(h.Sum(nil))[:12], FS: fsys, Root: "."}, nil
}
