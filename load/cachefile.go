package load

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"sync"

	"github.com/berth-dev/berth/schema"
)

// cacheFormat is the version of the file Save writes; a file of
// another version (or of another schema) reads as empty.
const cacheFormat = 1

// cacheHeader is the first line of a cache file. Schema is the hash of
// the schema the results were validated against, Key the caller's (the
// program's build): a file written by another is not used.
type cacheHeader struct {
	Format int    `json:"format"`
	Schema string `json:"schema"`
	Key    string `json:"key"`
	Files  int    `json:"files"`
	Rules  int    `json:"rules"`
}

// cachedFile is one line of a cache file after its header: one spec
// file's result, or (Rule set) one rule file's diagnostics.
type cachedFile struct {
	Name     string       `json:"name"`
	Sum      hexSum       `json:"sum"`
	KeepExpr bool         `json:"keepExpr,omitempty"`
	Docs     []cachedDoc  `json:"docs,omitempty"`
	Diags    []Diagnostic `json:"diags,omitempty"`
	Rule     bool         `json:"rule,omitempty"`
	Data     hexSum       `json:"data,omitzero"`
}

// cachedDoc is a doc as a cache file keeps it: positions as line and
// column in the file of its line, its raw value as JSON of its kind's raw
// type.
type cachedDoc struct {
	Kind    string `json:"kind,omitempty"`
	Name    string `json:"name,omitempty"`
	Project string `json:"project,omitempty"`
	Tier    string `json:"tier,omitempty"`
	Owner   string `json:"owner,omitempty"`
	Start   [2]int `json:"start"`
	// Fields names the fields with a position; At holds their lines
	// and columns, two numbers each (lists decode faster than a map).
	Fields []string        `json:"fields,omitempty"`
	At     []int           `json:"at,omitempty"`
	JSON   json.RawMessage `json:"json,omitempty"`
	Valid  bool            `json:"valid,omitempty"`
	Raw    cachedRaw       `json:"raw,omitzero"`
}

// cachedRaw is a document's raw value, in the field of its kind.
type cachedRaw struct {
	Tier      *rawTier         `json:"t,omitempty"`
	Project   *rawProject      `json:"p,omitempty"`
	Workspace *rawWorkspace    `json:"w,omitempty"`
	Volume    *rawVolume       `json:"v,omitempty"`
	Kind      *rawKind         `json:"k,omitempty"`
	Notify    *rawNotification `json:"n,omitempty"`
	Policy    *rawPolicy       `json:"s,omitempty"`
}

// hexSum is a SHA-256 written as hex.
type hexSum [sha256.Size]byte

func (h hexSum) MarshalText() ([]byte, error) { return []byte(hex.EncodeToString(h[:])), nil }

func (h *hexSum) UnmarshalText(b []byte) error {
	if len(b) != 2*sha256.Size {
		return fmt.Errorf("a hash of %d hex digits, want %d", len(b), 2*sha256.Size)
	}
	_, err := hex.Decode(h[:], b)
	return err
}

// schemaSum names the schema the cached results were validated against.
var schemaSum = sync.OnceValue(func() string {
	return fmt.Sprintf("%x", sha256.Sum256(Source))
})

// Save writes what the last load through c kept, for Restore in
// another process: a header line, then one JSON line per file. key names
// what wrote it (the program's build): Restore with another key keeps
// nothing. Files holding a Cluster document are left out (read again).
// A file's line that Restore read is written as it was.
func (c *Cache) Save(w io.Writer, key string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var lines [][]byte
	kept := make(map[fileKey][]byte, len(c.files))
	for k, fr := range c.files {
		line, ok := c.lines[k]
		if !ok {
			var err error
			if line, err = encodeFile(k, fr); errors.Is(err, errNotKept) {
				continue
			} else if err != nil {
				return err
			}
		}
		kept[k] = line
		lines = append(lines, line)
	}
	c.lines = kept
	files := len(lines)
	for k, diags := range c.rules {
		b, err := json.Marshal(cachedFile{Name: k.name, Sum: k.sum, Data: k.data, Diags: diags, Rule: true})
		if err != nil {
			return err
		}
		lines = append(lines, b)
	}
	head, err := json.Marshal(cacheHeader{Format: cacheFormat, Schema: schemaSum(), Key: key, Files: files, Rules: len(lines) - files})
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	bw.Write(head)
	bw.WriteByte('\n')
	for _, l := range lines {
		bw.Write(l)
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// encodeFile is the line of file k's result.
func encodeFile(k fileKey, fr fileResult) ([]byte, error) {
	cf := cachedFile{Name: k.name, Sum: k.sum, KeepExpr: k.keepExpr, Diags: fr.diags}
	for _, d := range fr.docs {
		cd, err := encodeDoc(k.name, d)
		if err != nil {
			return nil, err
		}
		cf.Docs = append(cf.Docs, cd)
	}
	return json.Marshal(cf)
}

// Restore replaces what c keeps with data, what Save wrote with the same key,
// and reports whether it did. A file of another format, schema or key
// leaves c empty and returns false and no error: it is not an error for a
// cache to be stale. A file that does not parse leaves c empty and
// returns the error.
func (c *Cache) Restore(data []byte, key string) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.files, c.rules, c.lines = nil, nil, nil
	head, rest, _ := bytes.Cut(data, []byte{'\n'})
	if len(head) == 0 {
		return false, nil // empty: nothing kept
	}
	var h cacheHeader
	if err := json.Unmarshal(head, &h); err != nil {
		return false, fmt.Errorf("cache header: %w", err)
	}
	if h.Format != cacheFormat || h.Schema != schemaSum() || h.Key != key {
		return false, nil
	}
	lines := bytes.Split(bytes.TrimSuffix(rest, []byte{'\n'}), []byte{'\n'})
	if len(rest) == 0 {
		lines = nil
	}
	if len(lines) != h.Files+h.Rules {
		return false, fmt.Errorf("cache: %d lines, the header says %d", len(lines), h.Files+h.Rules)
	}
	out := make([]cachedFile, len(lines))
	docs := make([][]*doc, len(lines))
	errs := make([]error, len(lines))
	var wg sync.WaitGroup
	workers := min(runtime.GOMAXPROCS(0), max(1, len(lines)))
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(lines); i += workers {
				if errs[i] = json.Unmarshal(lines[i], &out[i]); errs[i] != nil {
					continue
				}
				for _, cd := range out[i].Docs {
					d, err := decodeDoc(out[i].Name, cd)
					if err != nil {
						errs[i] = err
						break
					}
					docs[i] = append(docs[i], d)
				}
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return false, fmt.Errorf("cache: line %d: %w", i+2, err)
		}
	}
	files := make(map[fileKey]fileResult, h.Files)
	rules := make(map[ruleKey][]Diagnostic, h.Rules)
	kept := make(map[fileKey][]byte, h.Files)
	for i, cf := range out {
		if cf.Rule {
			rules[ruleKey{name: cf.Name, sum: cf.Sum, data: cf.Data}] = cf.Diags
			continue
		}
		k := fileKey{name: cf.Name, sum: cf.Sum, keepExpr: cf.KeepExpr}
		files[k], kept[k] = fileResult{docs: docs[i], diags: cf.Diags}, lines[i]
	}
	c.files, c.rules, c.lines = files, rules, kept
	return true, nil
}

// errNotKept: a document a cache file does not keep (a Cluster's, whose
// raw value is a plain tree of the syntax, or one with a position in
// another file).
var errNotKept = errors.New("not kept")

func encodeDoc(file string, d *doc) (cachedDoc, error) {
	cd := cachedDoc{Kind: d.kind, Name: d.name, Project: d.project, Tier: d.tier, Owner: d.owner,
		JSON: d.json, Valid: d.valid}
	if d.start.File != file {
		return cd, errNotKept
	}
	cd.Start = [2]int{d.start.Line, d.start.Col}
	for _, name := range slices.Sorted(maps.Keys(d.fields)) {
		p := d.fields[name]
		if p.File != file {
			return cd, errNotKept
		}
		cd.Fields, cd.At = append(cd.Fields, name), append(cd.At, p.Line, p.Col)
	}
	switch raw := d.raw.(type) {
	case nil:
	case *rawTier:
		cd.Raw.Tier = raw
	case *rawProject:
		cd.Raw.Project = raw
	case *rawWorkspace:
		cd.Raw.Workspace = raw
	case *rawVolume:
		cd.Raw.Volume = raw
	case *rawKind:
		cd.Raw.Kind = raw
	case *rawNotification:
		cd.Raw.Notify = raw
	case *rawPolicy:
		cd.Raw.Policy = raw
	default:
		return cd, errNotKept // a Cluster's: a plain tree of its syntax
	}
	return cd, nil
}

func decodeDoc(file string, cd cachedDoc) (*doc, error) {
	d := &doc{kind: cd.Kind, name: cd.Name, project: cd.Project, tier: cd.Tier, owner: cd.Owner,
		start: schema.Pos{File: file, Line: cd.Start[0], Col: cd.Start[1]}, json: cd.JSON, valid: cd.Valid}
	if len(cd.At) != 2*len(cd.Fields) {
		return nil, fmt.Errorf("%d positions for %d fields", len(cd.At), len(cd.Fields))
	}
	if cd.Fields != nil {
		d.fields = make(map[string]schema.Pos, len(cd.Fields))
		for i, name := range cd.Fields {
			d.fields[name] = schema.Pos{File: file, Line: cd.At[2*i], Col: cd.At[2*i+1]}
		}
	}
	switch r := cd.Raw; {
	case r.Tier != nil:
		d.raw = r.Tier
	case r.Project != nil:
		d.raw = r.Project
	case r.Workspace != nil:
		d.raw = r.Workspace
	case r.Volume != nil:
		d.raw = r.Volume
	case r.Kind != nil:
		d.raw = r.Kind
	case r.Notify != nil:
		d.raw = r.Notify
	case r.Policy != nil:
		d.raw = r.Policy
	}
	return d, nil
}

// MarshalJSON keeps a quantity for a cache file: its text, or null when
// it was not written.
func (q quantity) MarshalJSON() ([]byte, error) {
	if !q.set {
		return []byte("null"), nil
	}
	return json.Marshal(q.text)
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (q *quantity) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*q = quantity{}
		return nil
	}
	q.set = true
	return json.Unmarshal(b, &q.text)
}
