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
	"sync"
	"time"

	"github.com/berth-dev/berth/load"
)

// DirSource reads specs from a local directory. Its revision ID is a
// hash of every file's path and content (hidden files and directories,
// such as .git, left out), so it changes exactly when the specs do. A
// symbolic link counts by its target and, when it leads to a regular file
// inside the directory, by that file's content too, so a spec reached
// through a link is watched like any other. The revision's FS never leads
// outside Dir and never blocks on a FIFO (load.OpenDir).
//
// A DirSource made by NewDirSource remembers each file's content hash with
// the size and modification time it was read under, and does not read a
// file again while both stay the same (one written within 2 s before the
// read that hashed it is read again: it may change within the clock's
// resolution, keeping its size). A loop names each revision without
// reading 10,000 unchanged files. The revision's tree gives the loader
// each file's hash (load.WithSums), so the loader's cache does not read
// them either.
type DirSource struct {
	Dir  string
	sums *dirSums
}

// NewDirSource returns a DirSource for dir that remembers its files'
// hashes between reads (see DirSource).
func NewDirSource(dir string) DirSource { return DirSource{Dir: dir, sums: &dirSums{}} }

// dirSums are the content hashes of a directory's files, by path, with the
// listing they were read under.
type dirSums struct {
	mu   sync.Mutex
	sums map[string]dirSum
}

type dirSum struct {
	size  int64
	mtime time.Time
	sum   [sha256.Size]byte
}

// racyWindow: a file modified this shortly before the read that hashed it
// is hashed again by the next read, whatever its listing says.
const racyWindow = 2 * time.Second

// Read returns the directory's current revision.
func (s DirSource) Read(ctx context.Context) (Revision, error) {
	fsys, err := load.OpenDir(s.Dir)
	if err != nil {
		return Revision{}, fmt.Errorf("read %s: %w", s.Dir, err)
	}
	type entry struct {
		path string
		d    fs.DirEntry
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
		if t := d.Type(); t.IsRegular() || t&fs.ModeSymlink != 0 {
			entries = append(entries, entry{path: p, d: d})
		}
		return nil
	})
	if err != nil {
		return Revision{}, fmt.Errorf("read %s: %w", s.Dir, err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].path < entries[j].path })
	started := time.Now()
	var old map[string]dirSum
	if s.sums != nil {
		s.sums.mu.Lock()
		defer s.sums.mu.Unlock()
		old = s.sums.sums
	}
	next := make(map[string]dirSum, len(entries))
	sums := make(map[string][sha256.Size]byte, len(entries))
	h := sha256.New()
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return Revision{}, err
		}
		fmt.Fprintf(h, "%s\x00", e.path)
		var st fs.FileInfo
		if e.d.Type()&fs.ModeSymlink != 0 {
			target, _ := fs.ReadLink(fsys, e.path)
			fmt.Fprintf(h, "-> %s\x00", target)
			st, err = fs.Stat(fsys, e.path)
		} else {
			// The listing's own information: a stat by path through the
			// tree resolves every directory on the way again.
			st, err = e.d.Info()
		}
		if err != nil || !st.Mode().IsRegular() {
			continue // the loader names it; a link's target is all there is
		}
		sum, ok := old[e.path]
		if !ok || sum.size != st.Size() || !sum.mtime.Equal(st.ModTime()) {
			sum = dirSum{size: st.Size(), mtime: st.ModTime()}
			if sum.sum, err = hashFile(fsys, e.path); err != nil {
				return Revision{}, fmt.Errorf("read %s: %w", filepath.Join(s.Dir, e.path), err)
			}
		}
		sums[e.path] = sum.sum
		if sum.mtime.Before(started.Add(-racyWindow)) {
			next[e.path] = sum
		}
		h.Write(sum.sum[:])
		h.Write([]byte{0})
	}
	if s.sums != nil {
		s.sums.sums = next
	}
	// The loader takes each file's hash from the tree: a file its cache
	// holds under that hash is not read again.
	return Revision{ID: hex.EncodeToString(h.Sum(nil))[:12], FS: load.WithSums(fsys, sums), Root: "."}, nil
}

// hashFile returns the hash of the content of the regular file at p; a
// file that is no longer regular when opened (swapped for a FIFO) hashes
// as empty.
func hashFile(fsys fs.FS, p string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	f, err := fsys.Open(p)
	if err != nil {
		return sum, err
	}
	defer f.Close()
	h := sha256.New()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return sum, err
	}
	if _, err := io.Copy(h, f); err != nil {
		return sum, err
	}
	h.Sum(sum[:0])
	return sum, nil
}
