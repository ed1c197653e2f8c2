package schema

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// IgnoreFile names the file, in any directory of a spec tree, whose lines
// are patterns of paths the loader skips: "#" starts a comment; a pattern
// ending in "/" matches directories only; a pattern with another "/" is
// matched against the path relative to the .berthignore's directory, any
// other pattern against the base name at any depth (path.Match syntax).
const IgnoreFile = ".berthignore"

// sourceFile is one file the loader reads: its name as diagnostics show
// it, and its bytes.
type sourceFile struct {
	name string
	data []byte
	// read loads data when it is nil, so workers read files in parallel
	// and no more of them are in memory at once than they need.
	read func() ([]byte, error)
}

func (f *sourceFile) load() ([]byte, error) {
	if f.data != nil || f.read == nil {
		return f.data, nil
	}
	b, err := f.read()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.name, err)
	}
	return b, nil
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

// walkFS collects the spec and rule files under root in fsys, in lexical
// order, skipping hidden files and directories and what .berthignore
// files name. name maps a slash path in fsys to the name diagnostics show.
func walkFS(fsys fs.FS, root string, name func(string) string) ([]sourceFile, error) {
	var files []sourceFile
	var rules []ignoreRules
	err := fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("read %s: %w", name(p), err)
		}
		rel := p
		if root != "." {
			rel = strings.TrimPrefix(strings.TrimPrefix(p, root), "/")
			if rel == "" {
				rel = "."
			}
		}
		if p != root && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if rel != "." && ignored(rules, rel, d.IsDir()) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			b, err := fs.ReadFile(fsys, path.Join(p, IgnoreFile))
			if err == nil {
				rules = append(rules, parseIgnore(rel, b))
			}
			return nil
		}
		if !d.Type().IsRegular() && d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		if !isSpecFile(p) && !isRuleFile(p) {
			return nil
		}
		files = append(files, sourceFile{name: name(p), read: func() ([]byte, error) { return fs.ReadFile(fsys, p) }})
		return nil
	})
	return files, err
}

// readPaths collects the files under each OS path: a directory is walked,
// a file is read as it is.
func readPaths(paths []string) ([]sourceFile, error) {
	var files []sourceFile
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("read specs: %w", err)
		}
		if !st.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, fmt.Errorf("read specs: %w", err)
			}
			files = append(files, sourceFile{name: filepath.Clean(p), data: b})
			continue
		}
		root := filepath.Clean(p)
		fsFiles, err := walkFS(os.DirFS(root), ".", func(rel string) string {
			return filepath.Join(root, filepath.FromSlash(rel))
		})
		if err != nil {
			return nil, fmt.Errorf("read specs: %w", err)
		}
		files = append(files, fsFiles...)
	}
	return files, nil
}
