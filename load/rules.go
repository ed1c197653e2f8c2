package load

import (
	"encoding/json"
	"fmt"
	"strings"

	"sort"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/token"

	"github.com/berth-dev/berth/schema"
)

// Rule files: every *.cue file in a spec tree is a set of the repo's own
// rules. Each file is compiled on its own (the CUE standard library may be
// imported; a package clause is allowed and ignored) and unified with the
// documents as written, arranged as
//
//	tiers:      [name]: document
//	projects:   [name]: document
//	workspaces: [project]: [name]: document
//	volumes:    [name]: document
//	gpuKinds:   [name]: document
//	notifications: [name]: document
//	policy:     document
//
// so "project ml may not use tier highest" is
//
//	projects: ml: spec: tier: !="highest" @msg("project ml may not use tier highest")
//
// A failure is reported at the document's field, with the rule's position
// and its @msg when it has one.

// ruleRoot maps a document to its place in the rules' data.
func ruleRoot(d *doc) []string {
	switch d.kind {
	case schema.KindPriorityTier:
		return []string{"tiers", d.name}
	case schema.KindProject:
		return []string{"projects", d.name}
	case schema.KindWorkspace:
		return []string{"workspaces", d.project, d.name}
	case schema.KindVolume:
		return []string{"volumes", d.name}
	case schema.KindGPUKind:
		return []string{"gpuKinds", d.name}
	case schema.KindNotification:
		return []string{"notifications", d.name}
	case schema.KindSchedulingPolicy:
		return []string{"policy"}
	}
	return nil
}

func checkRules(rules []sourceFile, docs []*doc, cache *loadState) (diags []Diagnostic) {
	defer func() {
		if p := recover(); p != nil {
			diags = append(diags, errorf(schema.Pos{File: rules[0].name}, "internal error checking the CUE rules (please report it): %v", p))
		}
	}()
	// The data is prepared once, and only when some rule file is not in
	// the cache.
	var (
		ctx     *cue.Context
		data    cue.Value
		byPath  map[string]*doc
		dataErr []Diagnostic
	)
	prepare := func() {
		if ctx != nil {
			return
		}
		ctx = cuecontext.New()
		data, byPath, dataErr = rulesData(ctx, rules[0].name, docs)
	}
	for _, f := range rules {
		diags = append(diags, cache.rule(f, docs, func() ([]Diagnostic, bool) {
			prepare()
			if dataErr != nil {
				return nil, false
			}
			return checkRule(ctx, data, byPath, f), true
		})...)
	}
	if dataErr != nil {
		return dataErr
	}
	return diags
}

// rulesData is the rules' data: every named document, first of each name
// only, as JSON (a CUE subset): positions come from the documents' field
// maps, so the data need not keep its syntax trees.
func rulesData(ctx *cue.Context, first string, docs []*doc) (cue.Value, map[string]*doc, []Diagnostic) {
	root := map[string]any{}
	byPath := map[string]*doc{}
	for _, d := range docs {
		key, ok := ruleKeyOf(d)
		if !ok {
			continue
		}
		if _, dup := byPath[key]; dup {
			continue
		}
		byPath[key] = d
		insert(root, ruleRoot(d), json.RawMessage(d.json))
	}
	src, err := json.Marshal(root)
	if err != nil {
		return cue.Value{}, nil, []Diagnostic{errorf(schema.Pos{File: first}, "cannot prepare the documents for the CUE rules: %v", err)}
	}
	data := ctx.CompileBytes(src, cue.Filename("documents.json"))
	if err := data.Err(); err != nil {
		return cue.Value{}, nil, []Diagnostic{errorf(schema.Pos{File: first}, "cannot prepare the documents for the CUE rules: %v", err)}
	}
	return data, byPath, nil
}

// checkRule unifies one rule file, compiled on its own, with the data.
func checkRule(ctx *cue.Context, data cue.Value, byPath map[string]*doc, f sourceFile) (diags []Diagnostic) {
	rule := ctx.CompileBytes(f.data, cue.Filename(f.name))
	if err := rule.Err(); err != nil {
		for _, e := range cueerrors.Errors(err) {
			format, args := e.Msg()
			diags = append(diags, errorf(rulePos(e, f.name), "CUE rule file does not compile: %s", fmt.Sprintf(format, args...)))
		}
		return diags
	}
	u := data.Unify(rule)
	// CUE reports some errors only when no other error hides them:
	// when the whole fails, validate each document on its own too.
	seen := map[string]bool{}
	report := func(err error) {
		for _, e := range cueerrors.Errors(err) {
			path := cleanPath(e.Path())
			key := strings.Join(path, ".")
			if seen[key] {
				continue
			}
			seen[key] = true
			diags = append(diags, ruleDiagnostic(e, path, u, f.name, byPath))
		}
	}
	err := u.Validate(cue.Concrete(false), cue.Final())
	if err == nil {
		return nil
	}
	keys := make([]string, 0, len(byPath))
	for k := range byPath {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := u.LookupPath(cue.MakePath(selectors(strings.Split(k, "\x00"))...)).Validate(cue.Concrete(false), cue.Final()); err != nil {
			report(err)
		}
	}
	report(err)
	return diags
}

// insert puts value at path in m, creating maps on the way.
func insert(m map[string]any, path []string, value any) {
	for _, sel := range path[:len(path)-1] {
		next, ok := m[sel].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[sel] = next
		}
		m = next
	}
	m[path[len(path)-1]] = value
}

// rulePos is the position of e in the rule file, or the file itself.
func rulePos(e cueerrors.Error, file string) schema.Pos {
	for _, p := range append([]token.Pos{e.Position()}, e.InputPositions()...) {
		if pp := toPos(p); pp.File == file {
			return pp
		}
	}
	return schema.Pos{File: file}
}

func ruleDiagnostic(e cueerrors.Error, path []string, u cue.Value, file string, byPath map[string]*doc) Diagnostic {
	format, args := e.Msg()
	msg := fmt.Sprintf(format, args...)
	rp := rulePos(e, file)

	// Find the document the failing field belongs to.
	var d *doc
	var rest []string
	for n := min(3, len(path)); n >= 1; n-- {
		if x, ok := byPath[strings.Join(path[:n], "\x00")]; ok {
			d, rest = x, path[n:]
			break
		}
	}
	custom := ruleMessage(u, path)
	if d == nil {
		if custom != "" {
			return errorf(rp, "%s (rule %s: %s)", custom, strings.Join(path, "."), msg)
		}
		return errorf(rp, "CUE rule fails: %s: %s", strings.Join(path, "."), msg)
	}
	field := strings.Join(rest, ".")
	what := fmt.Sprintf("%s %q", d.kind, d.name)
	if d.kind == schema.KindWorkspace {
		what = fmt.Sprintf("Workspace %q in project %q", d.name, d.project)
	}
	where := posOf(d.fields, rest, d.start)
	if field == "" {
		field = "the document"
	}
	if custom != "" {
		return errorf(where, "%s: %s (rule at %s)", what, custom, rp)
	}
	return errorf(where, "%s: %s breaks the rule at %s: %s", what, field, rp, msg)
}

func selectors(path []string) []cue.Selector {
	sels := make([]cue.Selector, 0, len(path))
	for _, p := range path {
		sels = append(sels, cue.Str(p))
	}
	return sels
}

// ruleMessage is the @msg attribute of the rule at path, if any; the last
// selector may name a required or optional field that the data lacks.
func ruleMessage(u cue.Value, path []string) string {
	if len(path) == 0 {
		return ""
	}
	sels := selectors(path)
	last := cue.Str(path[len(path)-1])
	for _, s := range []cue.Selector{last, last.Required(), last.Optional()} {
		sels[len(sels)-1] = s
		v := u.LookupPath(cue.MakePath(sels...))
		if !v.Exists() {
			continue
		}
		if a := v.Attribute("msg"); a.Err() == nil {
			if m, err := a.String(0); err == nil {
				return m
			}
		}
	}
	return ""
}
