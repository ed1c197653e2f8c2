package load

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/berth-dev/berth/internal/readfile"
	"github.com/berth-dev/berth/schema"
)

// IgnoreFile names the file, in any directory of a spec tree, whose lines
// are patterns of paths the loader skips: "#" starts a comment; a pattern
// ending in "/" matches directories only; a pattern with another "/" is
// matched against the path relative to the .berthignore's directory, any
// other pattern against the base name at any depth (path.Match syntax).
const IgnoreFile = ".berthignore"

// Default limits on what the loader reads.
const (
	// DefaultMaxFileBytes bounds one spec or rule file.
	DefaultMaxFileBytes = readfile.DefaultLimit
	// DefaultMaxTreeBytes bounds all of a tree's spec and rule files
	// together.
	DefaultMaxTreeBytes = 512 << 20
)

// Limits bounds what the loader reads; a zero field takes its default.
type Limits struct {
	// FileBytes is the most one *.yaml, *.yml or *.cue file may hold.
	FileBytes int64
	// TreeBytes is the most all of them together may hold.
	TreeBytes int64
}

// WithDefaults returns l with each zero field set to its default.
func (l Limits) WithDefaults() Limits { return l.withDefaults() }

func (l Limits) withDefaults() Limits {
	if l.FileBytes <= 0 {
		l.FileBytes = DefaultMaxFileBytes
	}
	if l.TreeBytes <= 0 {
		l.TreeBytes = DefaultMaxTreeBytes
	}
	return l
}

// sourceFile is one file the loader reads: its name as diagnostics show
// it, and its bytes.
type sourceFile struct {
	name string
	data []byte
	// read loads data when it is nil, so workers read files in parallel
	// and no more of them are in memory at once than they need. A
	// *refusedError from it is a diagnostic, any other error I/O trouble.
	read func() ([]byte, error)
	// sum, when known, is the SHA-256 of the file's content as the tree
	// gives it (WithSums): a Cache knows the file by it without reading.
	sum    [sha256.Size]byte
	hasSum bool
}

func (f *sourceFile) load() ([]byte, error) {
	if f.data != nil || f.read == nil {
		return f.data, nil
	}
	b, err := f.read()
	var refused *refusedError
	if err != nil && !errors.As(err, &refused) {
		return nil, fmt.Errorf("read %s: %w", f.name, err)
	}
	return b, err
}

// refusedError is a file the loader will not read, said as a diagnostic.
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

func refused(format string, args ...any) error {
	return &refusedError{msg: fmt.Sprintf(format, args...)}
}

// readLimited reads the file at p in fsys: only a regular file, and at
// most limit bytes. Opening never blocks: OpenDir's tree opens without
// waiting for a writer, and the type is checked on the open file, so a
// file swapped for a FIFO after the walk is refused too.
func readLimited(fsys fs.FS, p string, limit int64) ([]byte, error) {
	f, err := fsys.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, refused("%s; berth reads only regular files", readfile.NotRegular(st.Mode()))
	}
	if st.Size() > limit {
		return nil, tooBig(st.Size(), limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, tooBig(int64(len(b)), limit)
	}
	return b, nil
}

// FileTooLarge is the loader's message for a file of size bytes over the
// per-file limit (a size of 0 or less: its size is not known), as other
// readers of spec files (the git source) say it too.
func FileTooLarge(size, limit int64) string { return tooBig(size, limit).Error() }

// TreeTooLarge is the loader's message for the file at which a tree went
// over the per-tree limit.
func TreeTooLarge(limit int64) string {
	return fmt.Sprintf("the spec tree holds more than the limit of %s of *.yaml, *.yml and *.cue files; split the tree, leave files out with %s, or raise the limit with --max-tree-size", readfile.Size(limit), IgnoreFile)
}

func tooBig(size, limit int64) error {
	more := ""
	if size > limit {
		more = fmt.Sprintf("%s, ", readfile.Size(size))
	}
	return refused("the file is too large (%smore than the limit of %s per file); split it into smaller files, or raise the limit with --max-file-size", more, readfile.Size(limit))
}

// isSpecFile reports whether name is a YAML spec file.
func isSpecFile(name string) bool {
	ext := strings.ToLower(path.Ext(name))
	return ext == ".yaml" || ext == ".yml"
}

func isRuleFile(name string) bool { return strings.ToLower(path.Ext(name)) == ".cue" }

// ignoreRules are the patterns of one .berthignore, relative to dir.
type ignoreRules struct {
	dir      string
	patterns []string
}

func parseIgnore(dir string, b []byte) ignoreRules {
	r := ignoreRules{dir: dir}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		r.patterns = append(r.patterns, line)
	}
	return r
}

// ignored reports whether p (slash-separated, relative to the walk root)
// is matched by any rule whose directory holds it.
func ignored(rules []ignoreRules, p string, isDir bool) bool {
	for _, r := range rules {
		rel := p
		if r.dir != "." {
			if !strings.HasPrefix(p, r.dir+"/") {
				continue
			}
			rel = strings.TrimPrefix(p, r.dir+"/")
		}
		for _, pat := range r.patterns {
			dirOnly := strings.HasSuffix(pat, "/")
			pat = strings.TrimSuffix(pat, "/")
			if dirOnly && !isDir {
				continue
			}
			anchored := strings.Contains(pat, "/")
			pat = strings.TrimPrefix(pat, "/")
			subject := path.Base(rel)
			if anchored {
				subject = rel
			}
			if ok, _ := path.Match(pat, subject); ok {
				return true
			}
		}
	}
	return false
}

// OpenDir returns the tree under dir as the loader reads it: no path in
// it, through symbolic links or "..", leads outside dir (a link that would
// is an error to open or stat), and opening a file never waits, so a FIFO
// cannot hang a reader. Each directory is listed once: the tree keeps
// the first listing of each (the revision a source names by walking the
// tree is the one the loader then walks, without listing 10,000 files
// again); open a new tree to see the directory as it is now. The tree
// holds an open descriptor of dir, closed when the tree is garbage.
func OpenDir(dir string) (fs.FS, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return osTree{root: root, fsys: root.FS(), dirs: &listings{m: map[string][]fs.DirEntry{}}}, nil
}

// WithSums returns the tree fsys (from OpenDir) that also says the content
// hash (SHA-256) of the files in sums, by path in the tree, as the one who
// read them found it: a load through a Cache takes a file it knows by its
// hash from the cache, without reading the file. fsys of another kind is
// returned as it is. sums is the caller's to keep unchanged.
func WithSums(fsys fs.FS, sums map[string][sha256.Size]byte) fs.FS {
	if t, ok := fsys.(osTree); ok {
		t.sums = sums
		return t
	}
	return fsys
}

// osTree is an os.Root as an fs.FS whose Open does not block, and whose
// directories are listed once.
type osTree struct {
	root *os.Root
	fsys fs.FS
	dirs *listings
	sums map[string][sha256.Size]byte // WithSums
}

// listings are the directories of a tree as first listed, by name.
type listings struct {
	mu sync.Mutex
	m  map[string][]fs.DirEntry
}

func (t osTree) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	return t.root.OpenFile(name, readfile.OpenFlags, 0)
}

func (t osTree) ReadDir(name string) ([]fs.DirEntry, error) {
	t.dirs.mu.Lock()
	defer t.dirs.mu.Unlock()
	if es, ok := t.dirs.m[name]; ok {
		return slices.Clone(es), nil
	}
	es, err := fs.ReadDir(t.fsys, name)
	if err != nil {
		return es, err
	}
	t.dirs.m[name] = slices.Clone(es)
	return es, nil
}

func (t osTree) Stat(name string) (fs.FileInfo, error)  { return fs.Stat(t.fsys, name) }
func (t osTree) Lstat(name string) (fs.FileInfo, error) { return fs.Lstat(t.fsys, name) }
func (t osTree) ReadLink(name string) (string, error)   { return fs.ReadLink(t.fsys, name) }

// linkProblem says why the link at p cannot be followed, given the error
// of a stat through it.
func linkProblem(fsys fs.FS, p string, err error) string {
	target, rerr := fs.ReadLink(fsys, p)
	if rerr != nil {
		return fmt.Sprintf("it is a symbolic link berth cannot follow (%v)", err)
	}
	dest := path.Join(path.Dir(p), target)
	switch {
	case path.IsAbs(target) || filepath.IsAbs(target) || dest == ".." || strings.HasPrefix(dest, "../") || errors.Is(err, errOutside):
		return fmt.Sprintf("it is a symbolic link to %s, outside the spec tree; berth reads only files inside the tree: copy the file in, or link to a file inside the tree", target)
	case errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EMLINK): // EMLINK: FreeBSD's and OpenBSD's word for it
		return fmt.Sprintf("it is a symbolic link to %s, which is a loop of links; point it at a file", target)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("it is a symbolic link to %s, which does not exist; fix or remove the link", target)
	}
	// A link to a path inside the tree that leads out of it through
	// another link, or anything else os.Root refuses.
	return fmt.Sprintf("it is a symbolic link to %s, which berth cannot follow inside the spec tree (%v); link to a regular file inside the tree", target, errors.Unwrap(err))
}

// walk is the state of one walk over a tree.
type walk struct {
	fsys   fs.FS
	root   string
	name   func(string) string
	limits Limits
	files  []sourceFile
	diags  []Diagnostic
	rules  []ignoreRules
	total  int64
	full   bool // the tree limit is reached: nothing more is read
}

// inside reports whether the link at p points, as written, inside the
// walk's root (fsys itself keeps links from leaving fsys).
func (w *walk) inside(p string) bool {
	target, err := fs.ReadLink(w.fsys, p)
	if err != nil || path.IsAbs(target) {
		return false
	}
	dest := path.Join(path.Dir(p), target)
	if w.root == "." {
		return dest != ".." && !strings.HasPrefix(dest, "../")
	}
	return dest == w.root || strings.HasPrefix(dest, w.root+"/")
}

// errOutside: a link leads out of the walk's root.
var errOutside = errors.New("outside the tree")

func (w *walk) refuse(p, format string, args ...any) {
	w.diags = append(w.diags, errorf(schema.Pos{File: w.name(p)}, format, args...))
}

// walkFS collects the spec and rule files under root in fsys, in lexical
// order, skipping hidden files and directories and what .berthignore
// files name, within limits. name maps a slash path in fsys to the name
// diagnostics show. Only regular files are read; a link is followed only
// to a regular file inside the tree (fsys must keep links inside it, as
// OpenDir's trees and fstest.MapFS do). Every link, FIFO, device or file
// too large that the loader does not read is a diagnostic; the error is
// for I/O trouble only.
func walkFS(fsys fs.FS, root string, name func(string) string, limits Limits) ([]sourceFile, []Diagnostic, error) {
	w := &walk{fsys: fsys, root: root, name: name, limits: limits.withDefaults()}
	err := fs.WalkDir(fsys, root, w.visit)
	return w.files, w.diags, err
}

func (w *walk) visit(p string, d fs.DirEntry, err error) error {
	if err != nil {
		return fmt.Errorf("read %s: %w", w.name(p), err)
	}
	rel := p
	if w.root != "." {
		rel = strings.TrimPrefix(strings.TrimPrefix(p, w.root), "/")
		if rel == "" {
			rel = "."
		}
	}
	if p != w.root && strings.HasPrefix(d.Name(), ".") {
		if d.IsDir() {
			return fs.SkipDir
		}
		return nil
	}
	if rel != "." && ignored(w.rules, rel, d.IsDir()) {
		if d.IsDir() {
			return fs.SkipDir
		}
		return nil
	}
	if d.IsDir() {
		ip := path.Join(p, IgnoreFile)
		b, err := readLimited(w.fsys, ip, w.limits.FileBytes)
		var r *refusedError
		switch {
		case err == nil:
			w.rules = append(w.rules, parseIgnore(rel, b))
		case errors.As(err, &r):
			w.refuse(ip, "%s is not read: %s", IgnoreFile, r.msg)
		case !errors.Is(err, fs.ErrNotExist):
			if _, lerr := fs.Lstat(w.fsys, ip); lerr == nil {
				w.refuse(ip, "%s is not read: %s", IgnoreFile, linkProblem(w.fsys, ip, err))
			}
		}
		return nil
	}
	want := isSpecFile(p) || isRuleFile(p)
	mode := d.Type()
	var size int64 = -1
	if mode&fs.ModeSymlink != 0 {
		st, err := fs.Stat(w.fsys, p)
		if err == nil && !w.inside(p) {
			err = errOutside
		}
		switch {
		case err != nil && want:
			w.refuse(p, "not read: %s", linkProblem(w.fsys, p, err))
			return nil
		case err != nil:
			// It may be a link to a directory of specs outside the tree:
			// say so when the name looks like a directory's.
			if path.Ext(p) == "" {
				target, _ := fs.ReadLink(w.fsys, p)
				w.diags = append(w.diags, warnf(schema.Pos{File: w.name(p)}, "not followed: it is a symbolic link to %s, which berth cannot follow inside the spec tree; if it is a directory of specs, move them into the tree", target))
			}
			return nil
		case st.IsDir():
			target, _ := fs.ReadLink(w.fsys, p)
			w.refuse(p, "not read: it is a symbolic link to the directory %s, and berth does not follow links to directories (a loop would never end); move the directory into the tree, or point berth at it", target)
			return nil
		}
		mode, size = st.Mode(), st.Size()
	}
	if !want {
		return nil
	}
	if !mode.IsRegular() {
		w.refuse(p, "not read: %s; berth reads only regular files", readfile.NotRegular(mode))
		return nil
	}
	if size < 0 {
		if info, err := d.Info(); err == nil {
			size = info.Size()
		}
	}
	if size > w.limits.FileBytes {
		w.refuse(p, "not read: %s", tooBig(size, w.limits.FileBytes))
		return nil
	}
	if w.full {
		return nil
	}
	w.total += max(size, 0)
	if w.total > w.limits.TreeBytes {
		w.full = true
		w.refuse(p, "not read, nor any file after it: %s", TreeTooLarge(w.limits.TreeBytes))
		return nil
	}
	fsys, limit := w.fsys, w.limits.FileBytes
	f := sourceFile{name: w.name(p), read: func() ([]byte, error) { return readLimited(fsys, p, limit) }}
	if t, ok := w.fsys.(osTree); ok {
		f.sum, f.hasSum = t.sums[p]
	}
	w.files = append(w.files, f)
	return nil
}

// readPaths collects the files under each OS path: a directory is walked
// (see walkFS), a file is read as it is, if it is a regular file.
func readPaths(paths []string, limits Limits) ([]sourceFile, []Diagnostic, error) {
	var files []sourceFile
	var diags []Diagnostic
	limits = limits.withDefaults()
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, nil, fmt.Errorf("read specs: %w", err)
		}
		if !st.IsDir() {
			name := filepath.Clean(p)
			b, err := readLimited(readfile.OS{}, p, limits.FileBytes)
			var r *refusedError
			switch {
			case errors.As(err, &r):
				diags = append(diags, errorf(schema.Pos{File: name}, "not read: %s", r.msg))
			case err != nil:
				return nil, nil, fmt.Errorf("read specs: %w", err)
			default:
				files = append(files, sourceFile{name: name, data: b})
			}
			continue
		}
		root := filepath.Clean(p)
		fsys, err := OpenDir(root)
		if err != nil {
			return nil, nil, fmt.Errorf("read specs: %w", err)
		}
		fsFiles, fsDiags, err := walkFS(fsys, ".", func(rel string) string {
			return filepath.Join(root, filepath.FromSlash(rel))
		}, limits)
		if err != nil {
			return nil, nil, fmt.Errorf("read specs: %w", err)
		}
		files = append(files, fsFiles...)
		diags = append(diags, fsDiags...)
	}
	return files, diags, nil
}
