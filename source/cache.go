package source

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/berth-dev/berth/internal/atomicfile"
	"github.com/berth-dev/berth/load"
)

// FileCache is what one process learned of a spec directory, kept in a
// file for the next process that reads the same directory (berth apply
// runs once and exits): each file's content hash with the listing it was
// read under (DirSource), and the loader's documents and diagnostics by
// content (load.Cache). The next process reads no file whose size and
// modification time are unchanged, and validates none whose content is:
// a one-file change is read and validated alone. What it loads is the
// load a process without the file gives (load.Cache).
//
// The file is written whole or not at all (atomicfile), so a reader sees
// one run's file or the one before. A file written by another build
// (key), or one that does not parse, counts as empty.
type FileCache struct {
	path, key, dir string
	sums           *dirSums
	specs          *load.Cache
	// revision is the revision the file holds; Save writes only when
	// the last read (read) named another.
	revision string
	mu       sync.Mutex
	read     string
}

// cacheHead is the first line of a FileCache's file.
type cacheHead struct {
	Dir      string          `json:"dir"`
	Revision string          `json:"revision"`
	Files    []cachedListing `json:"files"`
}

// cachedListing is one file's hash and the listing it was read under.
type cachedListing struct {
	Path  string `json:"path"`
	Size  int64  `json:"size"`
	MTime int64  `json:"mtime"` // Unix nanoseconds
	Sum   string `json:"sum"`   // hex
}

// OpenFileCache reads the cache file at path (written for dir), and
// returns the cache and, when the file could not be used (another build,
// another directory, a file that does not parse), why: the cache is then
// empty and works.
func OpenFileCache(path, key, dir string) (*FileCache, error) {
	c := &FileCache{path: path, key: key, dir: dir, sums: &dirSums{}, specs: &load.Cache{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	line, rest, _ := bytes.Cut(data, []byte{'\n'})
	var h cacheHead
	if err := json.Unmarshal(line, &h); err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	if h.Dir != dir {
		return c, fmt.Errorf("%s was written for %s, not %s", path, h.Dir, dir)
	}
	used, err := c.specs.Restore(rest, key)
	if err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	if !used {
		return c, nil // another build's: validate again
	}
	sums := make(map[string]dirSum, len(h.Files))
	for _, l := range h.Files {
		s := dirSum{size: l.Size, mtime: time.Unix(0, l.MTime)}
		if n, err := hex.Decode(s.sum[:], []byte(l.Sum)); err != nil || n != len(s.sum) {
			return c, fmt.Errorf("%s: the hash of %s does not parse", path, l.Path)
		}
		sums[l.Path] = s
	}
	c.sums.sums, c.revision = sums, h.Revision
	return c, nil
}

// Read is DirSource's Read of the directory, starting from the file's
// hashes: a FileCache is the Source of its directory.
func (c *FileCache) Read(ctx context.Context) (Revision, error) {
	rev, err := DirSource{Dir: c.dir, sums: c.sums}.Read(ctx)
	if err == nil {
		c.mu.Lock()
		c.read = rev.ID
		c.mu.Unlock()
	}
	return rev, err
}

// Loader is SpecLoader(limits) through the file's documents.
func (c *FileCache) Loader(limits load.Limits) LoadFunc { return specLoader(limits, c.specs) }

// Save writes what this process learned for the next one, when the
// revision it read is not the one the file holds.
func (c *FileCache) Save() error {
	c.mu.Lock()
	last := c.read
	c.mu.Unlock()
	if last == "" || last == c.revision {
		return nil
	}
	c.sums.mu.Lock()
	h := cacheHead{Revision: last, Dir: c.dir, Files: make([]cachedListing, 0, len(c.sums.sums))}
	for p, s := range c.sums.sums {
		h.Files = append(h.Files, cachedListing{Path: p, Size: s.size, MTime: s.mtime.UnixNano(), Sum: hex.EncodeToString(s.sum[:])})
	}
	c.sums.mu.Unlock()
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(h); err != nil {
		return err
	}
	if err := c.specs.Save(&buf, c.key); err != nil {
		return err
	}
	if err := atomicfile.Write(c.path, buf.Bytes()); err != nil {
		return err
	}
	c.revision = last
	return nil
}
