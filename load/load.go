package load

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/token"
	"cuelang.org/go/encoding/yaml"

	"github.com/berth-dev/berth/schema"
)

// Summary counts what a load found, valid or not.
type Summary struct {
	Files         int `json:"files"`
	Tiers         int `json:"tiers"`
	Projects      int `json:"projects"`
	Workspaces    int `json:"workspaces"`
	Volumes       int `json:"volumes"`
	Kinds         int `json:"kinds"`
	Notifications int `json:"notifications"`
	Policies      int `json:"policies"`
	Rules         int `json:"rules"`
}

// Report is everything a load found: the Set (nil when any diagnostic is
// an error), the diagnostics sorted by file, line and column, and counts.
type Report struct {
	Set         *schema.Set
	Diagnostics Diagnostics
	Summary     Summary
}

// Paths reads every *.yaml and *.yml file under paths (directories are
// walked recursively; hidden directories and files and what .berthignore
// names are skipped; a path naming a file is read as it is), validates the
// documents against the schema, the cross-document rules and any *.cue
// rule files, fills defaults and returns the sorted Set.
//
// The error is for I/O trouble only. Problems in the specs are
// Diagnostics; the Set is nil when any of them is an error.
func Paths(paths ...string) (*schema.Set, Diagnostics, error) {
	r, err := Check(paths...)
	if err != nil {
		return nil, nil, err
	}
	return r.Set, r.Diagnostics, nil
}

// FS is Paths over the tree under root in fsys (for example a git
// commit's tree). Diagnostics name files by their path in fsys.
func FS(fsys fs.FS, root string) (*schema.Set, Diagnostics, error) {
	r, err := CheckFS(fsys, root)
	if err != nil {
		return nil, nil, err
	}
	return r.Set, r.Diagnostics, nil
}

// Options tunes a load. The zero value is the defaults.
type Options struct {
	Limits
	// Progress, when not nil, is updated as files are read, so a caller
	// can show it while a large tree loads.
	Progress *Progress
	// Cache, when not nil, keeps what this load learns for the next
	// one, and reuses what the last one learned (Cache).
	Cache *Cache
}

// Progress counts what a load has done so far; safe to read while the
// load runs.
type Progress struct {
	// Files is how many files the load will read (set once the tree is
	// walked), Read how many it has read, and Documents how many
	// documents those held.
	Files, Read, Documents atomic.Int64
}

// Check is Paths returning the whole Report.
func Check(paths ...string) (*Report, error) { return CheckWith(Options{}, paths...) }

// CheckWith is Check with options.
func CheckWith(opts Options, paths ...string) (*Report, error) {
	if len(paths) == 0 {
		paths = []string{"."}
	}
	files, diags, err := readPaths(paths, opts.Limits)
	if err != nil {
		return nil, err
	}
	return check(files, diags, opts)
}

// CheckFS is FS returning the whole Report.
func CheckFS(fsys fs.FS, root string) (*Report, error) { return CheckFSWith(fsys, root, Options{}) }

// CheckFSWith is CheckFS with options.
func CheckFSWith(fsys fs.FS, root string, opts Options) (*Report, error) {
	if root == "" {
		root = "."
	}
	files, diags, err := walkFS(fsys, path.Clean(root), func(p string) string { return p }, opts.Limits)
	if err != nil {
		return nil, err
	}
	return check(files, diags, opts)
}

// doc is one document of a spec file as the loader sees it.
type doc struct {
	kind    string
	name    string
	project string
	tier    string // spec.tier as written (projects), for references of invalid documents
	owner   string // spec.owner as written (workspaces), likewise
	start   schema.Pos
	fields  map[string]schema.Pos
	json    []byte // the document as JSON, kept only when there are rules
	valid   bool   // passed the schema
	raw     any    // *rawTier, *rawProject, ... when valid
}

func (d *doc) pos(field string) schema.Pos {
	if p, ok := d.fields[field]; ok {
		return p
	}
	return d.start
}

func (d *doc) meta() schema.Meta {
	return schema.Meta{Name: d.name, Project: d.project, Source: d.start, Fields: d.fields}
}

// docsPerContext bounds how many documents one cue.Context validates
// before it is dropped: a context keeps every value built in it.
const docsPerContext = 512

type fileResult struct {
	docs  []*doc
	diags []Diagnostic
}

// check runs every stage over files and builds the report.
func check(files []sourceFile, walked []Diagnostic, opts Options) (*Report, error) {
	progress := opts.Progress
	cache := opts.Cache.begin()
	defer cache.end()
	if progress == nil {
		progress = &Progress{}
	}
	files = dedupe(files)
	progress.Files.Store(int64(len(files)))
	var specs, rules []sourceFile
	for _, f := range files {
		if isRuleFile(f.name) {
			b, err := f.load()
			progress.Read.Add(1)
			var refused *refusedError
			if errors.As(err, &refused) {
				walked = append(walked, errorf(schema.Pos{File: f.name}, "not read: %s", refused.msg))
				continue
			}
			if err != nil {
				return nil, err
			}
			f.data = b
			rules = append(rules, f)
		} else {
			specs = append(specs, f)
		}
	}
	keepExpr := len(rules) > 0

	// 1. Parse and validate each document on its own, in parallel; each
	// worker renews its cue.Context every docsPerContext documents.
	results := make([]fileResult, len(specs))
	readErrs := make([]error, len(specs))
	workers := min(runtime.GOMAXPROCS(0), max(1, len(specs)))
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var c *checker
			current := func() *checker {
				if c == nil || c.docs >= docsPerContext {
					c = newChecker()
				}
				return c
			}
			for i := range next {
				if fr, ok := cache.known(specs[i], keepExpr); ok {
					progress.Read.Add(1)
					results[i] = fr
					progress.Documents.Add(int64(len(fr.docs)))
					continue
				}
				b, err := specs[i].load()
				progress.Read.Add(1)
				var refused *refusedError
				if errors.As(err, &refused) {
					results[i].diags = []Diagnostic{errorf(schema.Pos{File: specs[i].name}, "not read: %s", refused.msg)}
					continue
				}
				if err != nil {
					readErrs[i] = err
					continue
				}
				results[i] = cache.parse(current, specs[i], b, keepExpr)
				progress.Documents.Add(int64(len(results[i].docs)))
			}
		}()
	}
	for i := range specs {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(readErrs...); err != nil {
		return nil, err
	}

	r := &Report{Summary: Summary{Files: len(specs), Rules: len(rules)}, Diagnostics: walked}
	var docs []*doc
	for _, fr := range results {
		r.Diagnostics = append(r.Diagnostics, fr.diags...)
		docs = append(docs, fr.docs...)
	}

	// 2. Cross-document rules over the documents that parsed.
	set, diags := build(docs)
	r.Diagnostics = append(r.Diagnostics, diags...)
	for _, d := range docs {
		switch d.kind {
		case schema.KindPriorityTier:
			r.Summary.Tiers++
		case schema.KindProject:
			r.Summary.Projects++
		case schema.KindWorkspace:
			r.Summary.Workspaces++
		case schema.KindVolume:
			r.Summary.Volumes++
		case schema.KindGPUKind:
			r.Summary.Kinds++
		case schema.KindNotification:
			r.Summary.Notifications++
		case schema.KindSchedulingPolicy:
			r.Summary.Policies++
		}
	}

	// 3. The repo's own CUE rules over the data.
	if len(rules) > 0 {
		r.Diagnostics = append(r.Diagnostics, checkRules(rules, docs, cache)...)
	}

	r.Diagnostics.Sort()
	if !r.Diagnostics.HasErrors() {
		r.Set = set
	}
	return r, nil
}

func dedupe(files []sourceFile) []sourceFile {
	seen := map[string]bool{}
	out := files[:0]
	for _, f := range files {
		if !seen[f.name] {
			seen[f.name] = true
			out = append(out, f)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// parseFile reads the documents of one YAML file and validates each
// against the schema. It never panics: a panic inside a library becomes a
// diagnostic.
func parseFile(c *checker, name string, data []byte, keepExpr bool) (fr fileResult) {
	defer func() {
		if p := recover(); p != nil {
			fr.diags = append(fr.diags, errorf(schema.Pos{File: name}, "internal error reading this file (please report it): %v", p))
		}
	}()
	if !bytes.ContainsFunc(data, func(r rune) bool { return r != ' ' && r != '\n' && r != '\t' && r != '\r' }) {
		return fr
	}
	data, fr.diags = badBytes(name, data)
	var starts, startLines []int // documents' offsets and lines, found after a first syntax error
	dec := yaml.NewDecoder(name, bytes.NewReader(data))
	for restarts := 0; ; {
		expr, err := dec.Extract()
		if errors.Is(err, io.EOF) {
			return fr
		}
		if err != nil {
			d := yamlSyntax(name, data, err)
			fr.diags = append(fr.diags, d)
			// Go on at the next document after the mistake, with what
			// came before blanked, so positions stay the file's.
			if starts == nil {
				starts = docStarts(data)
				startLines = make([]int, len(starts))
				prev, line := 0, 1
				for i, s := range starts {
					line += bytes.Count(data[prev:s], []byte("\n"))
					startLines[i], prev = line, s
				}
			}
			i := sort.SearchInts(startLines, d.Pos.Line+1)
			if d.Pos.Line <= 0 || i >= len(starts) || restarts >= maxRestarts {
				return fr
			}
			restarts++
			next := starts[i]
			dec = yaml.NewDecoder(name, io.MultiReader(bytes.NewReader(bytes.Repeat([]byte("\n"), startLines[i]-1)), bytes.NewReader(data[next:])))
			continue
		}
		d, diags := parseDoc(c, name, expr, keepExpr)
		fr.diags = append(fr.diags, diags...)
		if d != nil {
			fr.docs = append(fr.docs, d)
		}
	}
}

// yamlLine matches the YAML library's "file:line: message" and
// "yaml: line N: message" forms.
var yamlLine = regexp.MustCompile(`^(?:.*?:(\d+):(?:(\d+):)? )?(?:yaml: )?(?:line (\d+): )?(.*)$`)

func yamlError(file string, err error) Diagnostic {
	p := schema.Pos{File: file}
	msg := strings.TrimPrefix(err.Error(), file+": ")
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, col := m[1], m[2]
		if line == "" {
			line = m[3]
		}
		p.Line, _ = strconv.Atoi(line)
		p.Col, _ = strconv.Atoi(col)
		msg = m[4]
	}
	return errorf(p, "invalid YAML: %s", msg)
}

// parseDoc reads one document's header, then validates it against the
// schema of its kind. It returns nil for empty documents and Cluster
// files.
func parseDoc(c *checker, file string, expr ast.Expr, keepExpr bool) (*doc, []Diagnostic) {
	start := toPos(expr.Pos())
	if start.File == "" {
		start.File = file
	}
	if lit, ok := expr.(*ast.BasicLit); ok && lit.Kind == token.NULL {
		return nil, nil // an empty document, such as a trailing ---
	}
	if b, ok := expr.(*ast.BinaryExpr); ok && b.Op == token.OR {
		return nil, nil // a file of comments only reads as *null | _
	}
	st, ok := expr.(*ast.StructLit)
	if !ok {
		return nil, []Diagnostic{errorf(start, "a document must be a mapping with apiVersion, kind, metadata and spec")}
	}
	if len(st.Elts) == 0 {
		return nil, nil
	}
	fields, dups := fieldPositions(expr)
	d := &doc{start: start, fields: fields}
	d.kind, _ = stringField(expr, "kind")
	d.name, _ = stringField(expr, "metadata.name")
	d.project, _ = stringField(expr, "metadata.project")
	d.tier, _ = stringField(expr, "spec.tier")
	d.owner, _ = stringField(expr, "spec.owner")
	switch {
	case d.kind == schema.KindCluster:
		d.raw = plain(expr)
		return d, nil
	case lookupField(expr, "kind") == nil:
		return nil, []Diagnostic{errorf(start, "kind is missing; set it to one of %s", strings.Join(Kinds, ", "))}
	case !isKind(d.kind):
		k := "kind"
		if d.kind != "" {
			k = fmt.Sprintf("kind %q", d.kind)
		}
		msg := fmt.Sprintf("%s is not a berth kind; use one of %s", k, strings.Join(Kinds, ", "))
		if s := closest(d.kind, Kinds); s != "" && d.kind != "" {
			msg = fmt.Sprintf("%s is not a berth kind; did you mean %q?", k, s)
		}
		return nil, []Diagnostic{errorf(d.pos("kind"), "%s", msg)}
	}
	if keepExpr {
		b, err := json.Marshal(plain(expr))
		if err != nil {
			return d, []Diagnostic{errorf(start, "cannot read the document: %v", err)}
		}
		d.json = b
	}
	diags := c.check(d.kind, expr, fields, start)
	if len(dups) > 0 {
		// CUE sees a key written twice as two values for one field; say
		// what happened instead.
		skip := map[schema.Pos]bool{}
		for _, dg := range dups {
			skip[dg.Pos] = true
			skip[fields[strings.SplitN(dg.Message, " ", 2)[0]]] = true
		}
		kept := dups
		for _, dg := range diags {
			if !skip[dg.Pos] {
				kept = append(kept, dg)
			}
		}
		return d, kept
	}
	if len(diags) > 0 {
		return d, diags
	}
	raw, err := decodeRaw(d.kind, expr)
	if err != nil {
		return d, []Diagnostic{errorf(start, "%v", err)}
	}
	d.raw, d.valid = raw, true
	return d, nil
}

func isKind(k string) bool {
	for _, x := range Kinds {
		if x == k {
			return true
		}
	}
	return false
}

// decodeRaw reads a document that passed the schema into its raw type,
// straight from its syntax tree (cue.Value.Decode is several times slower,
// and a JSON round trip costs a marshal and a parse).
func decodeRaw(kind string, expr ast.Expr) (any, error) {
	raw := rawOf(kind)
	if err := decodeAST(expr, raw); err != nil {
		return nil, fmt.Errorf("decode %s: %w", kind, err)
	}
	return raw, nil
}

// rawOf returns a new value of kind's raw type (nil for a Cluster).
func rawOf(kind string) any {
	switch kind {
	case schema.KindPriorityTier:
		return &rawTier{}
	case schema.KindProject:
		return &rawProject{}
	case schema.KindWorkspace:
		return &rawWorkspace{}
	case schema.KindVolume:
		return &rawVolume{}
	case schema.KindGPUKind:
		return &rawKind{}
	case schema.KindNotification:
		return &rawNotification{}
	case schema.KindSchedulingPolicy:
		return &rawPolicy{}
	}
	return nil
}
