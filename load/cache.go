package load

import (
	"crypto/sha256"
	"strconv"
	"sync"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"

	"github.com/berth-dev/berth/schema"
)

// Cache keeps what loads learned, so that the next load of a tree that
// changed in a few files parses and validates only those files. A file's
// documents and diagnostics are kept by its name and the SHA-256 of its
// content; a rule file's diagnostics by its name, its content and the
// content of the files that hold the documents it governs (the sections of
// the rules' data, tiers, projects, workspaces, volumes or policy, that it
// names: a change to a rule file, or to a document it governs, checks it
// again). A file whose hash the tree gives (WithSums) is not read when the
// cache knows it. What spans documents (references, duplicates, quotas
// against the cluster files) is checked again on every load, over the
// cached documents. A load through a Cache gives exactly the Report a load
// without one gives.
//
// A Cache keeps only what its last load used; Save and Restore keep it
// in a file between processes. The zero value is empty and ready; loads
// through one Cache run one at a time.
type Cache struct {
	mu    sync.Mutex // held for a whole load
	files map[fileKey]fileResult
	rules map[ruleKey][]Diagnostic
	// lines are the files' lines of the cache file Restore read or Save
	// wrote, so that Save writes a file it kept as it was.
	lines map[fileKey][]byte
	// stats is what the last load reused and redid (Stats).
	stats CacheStats
}

// CacheStats is what the last load through a Cache reused and redid.
type CacheStats struct {
	// FilesReused and FilesParsed count the spec files of the last load;
	// RulesReused and RulesChecked its rule files.
	FilesReused, FilesParsed, RulesReused, RulesChecked int
}

// Stats returns what the last load through c reused and redid.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

type fileKey struct {
	name     string
	sum      [sha256.Size]byte
	keepExpr bool // documents kept as JSON for the rules
}

type ruleKey struct {
	name string
	sum  [sha256.Size]byte // the rule file's content
	data [sha256.Size]byte // the files of the documents it governs
}

// loadState is one load's use of a Cache: what it found and what the next
// load may find. A nil *loadState caches nothing.
type loadState struct {
	c         *Cache
	mu        sync.Mutex // the workers share nextFiles and sums
	nextFiles map[fileKey]fileResult
	nextRules map[ruleKey][]Diagnostic
	sums      map[string][sha256.Size]byte // every spec file's content hash, by name
	stats     CacheStats
}

func (c *Cache) begin() *loadState {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	return &loadState{c: c, nextFiles: map[fileKey]fileResult{}, nextRules: map[ruleKey][]Diagnostic{},
		sums: map[string][sha256.Size]byte{}}
}

// end keeps what this load used for the next one.
func (s *loadState) end() {
	if s == nil {
		return
	}
	s.c.files, s.c.rules = s.nextFiles, s.nextRules
	s.c.stats = s.stats
	s.c.mu.Unlock()
}

// known returns the cached result of file f when the tree gives its
// content hash and the cache holds the file under it: it is not read.
func (s *loadState) known(f sourceFile, keepExpr bool) (fileResult, bool) {
	if s == nil || !f.hasSum {
		return fileResult{}, false
	}
	k := fileKey{name: f.name, sum: f.sum, keepExpr: keepExpr}
	s.mu.Lock()
	defer s.mu.Unlock()
	fr, ok := s.c.files[k]
	if !ok {
		return fileResult{}, false
	}
	s.sums[f.name], s.nextFiles[k] = f.sum, fr
	s.stats.FilesReused++
	return fr.copy(), true
}

// parse is parseFile through the cache, for file f whose content is data.
// The result's documents are copies (build marks duplicates invalid on
// its own copy), its slices the caller's to append to.
func (s *loadState) parse(c func() *checker, f sourceFile, data []byte, keepExpr bool) fileResult {
	if s == nil {
		return parseFile(c(), f.name, data, keepExpr)
	}
	k := fileKey{name: f.name, sum: sha256.Sum256(data), keepExpr: keepExpr}
	s.mu.Lock()
	s.sums[f.name] = k.sum
	fr, ok := s.c.files[k]
	s.mu.Unlock()
	if !ok {
		fr = parseFile(c(), f.name, data, keepExpr)
	}
	s.mu.Lock()
	s.nextFiles[k] = fr
	if ok {
		s.stats.FilesReused++
	} else {
		s.stats.FilesParsed++
	}
	s.mu.Unlock()
	return fr.copy()
}

// copy returns fr with its own slices and documents.
func (fr fileResult) copy() fileResult {
	out := fileResult{diags: append([]Diagnostic(nil), fr.diags...), docs: make([]*doc, len(fr.docs))}
	for i, d := range fr.docs {
		cp := *d
		out.docs[i] = &cp
	}
	return out
}

// rule returns the cached diagnostics of rule file f over docs, or
// computes them with eval and keeps them unless eval says not to.
func (s *loadState) rule(f sourceFile, docs []*doc, eval func() ([]Diagnostic, bool)) []Diagnostic {
	if s == nil {
		diags, _ := eval()
		return diags
	}
	k := ruleKey{name: f.name, sum: sha256.Sum256(f.data), data: s.governedData(governed(f), docs)}
	diags, ok := s.c.rules[k]
	keep := true
	if ok {
		s.stats.RulesReused++
	} else {
		diags, keep = eval()
		s.stats.RulesChecked++
	}
	if keep {
		s.nextRules[k] = diags
	}
	return append([]Diagnostic(nil), diags...)
}

// governedData hashes what the rules' data holds of sections (all when
// nil): each document that enters it, by its place, its file and that
// file's content, which fix both its JSON and its positions.
func (s *loadState) governedData(sections map[string]bool, docs []*doc) [sha256.Size]byte {
	h := sha256.New()
	seen := map[string]bool{}
	for _, d := range docs {
		key, ok := ruleKeyOf(d)
		if !ok || seen[key] {
			continue
		}
		seen[key] = true
		if sections != nil && !sections[ruleRoot(d)[0]] {
			continue
		}
		sum := s.sums[d.start.File]
		h.Write([]byte(key + "\x00" + d.start.File + "\x00" + strconv.Itoa(d.start.Line) + ":" + strconv.Itoa(d.start.Col) + "\x00"))
		h.Write(sum[:])
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// ruleSections are the top-level fields of the rules' data (ruleRoot).
var ruleSections = []string{"tiers", "projects", "workspaces", "volumes", "gpuKinds", "notifications", "policy"}

// governed is the sections of the rules' data that rule file f may
// constrain or read: those it names anywhere (an identifier, a label or a
// string), or all of them (nil) when its top level holds anything but
// plain fields, whose effect on the data cannot be read off its names (an
// embedding, a pattern constraint, a comprehension, a computed label), or
// when it does not parse.
func governed(f sourceFile) map[string]bool {
	file, err := parser.ParseFile(f.name, f.data)
	if err != nil {
		return nil
	}
	for _, decl := range file.Decls {
		switch x := decl.(type) {
		case *ast.Package, *ast.ImportDecl, *ast.Attribute, *ast.CommentGroup, *ast.LetClause:
		case *ast.Field:
			switch l := x.Label.(type) {
			case *ast.Ident:
			case *ast.BasicLit:
				if l.Kind != token.STRING {
					return nil
				}
			default:
				return nil
			}
		default:
			return nil
		}
	}
	names := map[string]bool{}
	ast.Walk(file, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.Ident:
			names[x.Name] = true
		case *ast.BasicLit:
			if x.Kind == token.STRING {
				if v, err := literal.Unquote(x.Value); err == nil {
					names[v] = true
				} else {
					names["*"] = true
				}
			}
		case *ast.Interpolation:
			// "\(x)s" may spell a section's name.
			names["*"] = true
		}
		return true
	}, nil)
	if names["*"] {
		return nil
	}
	out := map[string]bool{}
	for _, s := range ruleSections {
		if names[s] {
			out[s] = true
		}
	}
	return out
}

// ruleKeyOf is d's place in the rules' data as one string, and whether it
// has one (checkRules leaves out the others).
func ruleKeyOf(d *doc) (string, bool) {
	path := ruleRoot(d)
	if path == nil || d.json == nil || d.name == "" || (d.kind == schema.KindWorkspace && d.project == "") {
		return "", false
	}
	k := path[0]
	for _, p := range path[1:] {
		k += "\x00" + p
	}
	return k, true
}
