package load

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/token"

	"github.com/berth-dev/berth/schema"
)

// Source is the CUE schema of the specs, embedded in the binary.
//
//go:embed schema.cue
var Source []byte

// Kinds lists the kinds of documents berth reads, in order.
var Kinds = []string{schema.KindPriorityTier, schema.KindProject, schema.KindWorkspace, schema.KindVolume, schema.KindGPUKind, schema.KindNotification, schema.KindSchedulingPolicy}

// checker validates documents against the schema. A checker owns its
// cue.Context, which keeps every value it builds until it is dropped: the
// loader uses a checker for a bounded number of documents, then a new one.
type checker struct {
	ctx    *cue.Context
	root   cue.Value
	defs   map[string]cue.Value
	docs   int
	shapes map[string]*shape
}

// shape is what the schema allows at one place: the fields of a struct,
// whether a pattern admits any other label, and the schema beneath.
type shape struct {
	v        cue.Value
	isStruct bool
	isList   bool
	fields   map[string]bool
	pattern  bool
	required []string
	children map[string]cue.Value
}

// child returns the schema of field name ("*" for any label, "[]" for a
// list element), looked up once.
func (sh *shape) child(name string) cue.Value {
	if v, ok := sh.children[name]; ok {
		return v
	}
	var v cue.Value
	switch name {
	case "*":
		v = sh.v.LookupPath(cue.MakePath(cue.AnyString))
	case "[]":
		v = sh.v.LookupPath(cue.MakePath(cue.AnyIndex))
	default:
		v = sh.v.LookupPath(cue.MakePath(cue.Str(name).Optional()))
	}
	if sh.children == nil {
		sh.children = map[string]cue.Value{}
	}
	sh.children[name] = v
	return v
}

func newChecker() *checker {
	ctx := cuecontext.New()
	v := ctx.CompileBytes(Source, cue.Filename("schema.cue"))
	if err := v.Err(); err != nil {
		panic(fmt.Sprintf("schema: embedded schema does not compile: %v", err))
	}
	c := &checker{ctx: ctx, root: v, defs: map[string]cue.Value{}, shapes: map[string]*shape{}}
	for _, k := range Kinds {
		c.defs[k] = v.LookupPath(cue.MakePath(cue.Def(k)))
	}
	return c
}

// check validates one document of kind against its definition and returns
// the data as a CUE value with the problems found, each at the position of
// the field it is about.
func (c *checker) check(kind string, expr ast.Expr, fields map[string]schema.Pos, start schema.Pos) []Diagnostic {
	c.docs++
	def := c.defs[kind]
	// CUE stops looking for unknown fields in a struct that has another
	// error; berth looks for them itself, so every one is reported.
	unknown := c.unknownFields(kind, def, expr, fields, start)
	// "#Kind & document", built in the schema's scope, is one evaluation
	// where building the document and unifying it with the definition
	// would be two.
	//
	// CUE finds a field or list element among its siblings by a linear
	// scan, so one collection of n values costs n² (a 10 MB document took
	// minutes): the document is validated with each large list and
	// mapping cut to its first maxArcs values, and the rest in pieces of
	// maxArcs values against the schema of the collection.
	var pieces []piece
	trimmed := c.split(&pieces, kind, nil, def, expr, 0)
	diags := unknown
	v := c.ctx.BuildExpr(ast.NewBinExpr(token.AND, ast.NewIdent("#"+kind), trimmed), cue.Scope(c.root), cue.InferBuiltins(true))
	if err := v.Validate(cue.Concrete(true)); err != nil {
		diags = append(diags, cueDiagnostics(err, def, expr, fields, start, kind, nil)...)
	}
	for i := 0; i < len(pieces); i++ {
		p := pieces[i]
		chunk := c.split(&pieces, p.key, p.path, p.schema, p.lit, p.offset)
		v := p.schema.Unify(c.ctx.BuildExpr(chunk))
		if err := v.Validate(cue.Concrete(true)); err != nil {
			shift := func(path []string) []string {
				if !p.isList || len(path) <= len(p.path) {
					return path
				}
				if n, err := strconv.Atoi(path[len(p.path)]); err == nil {
					path = slices.Clone(path)
					path[len(p.path)] = strconv.Itoa(n + p.offset)
				}
				return path
			}
			diags = append(diags, cueDiagnostics(err, def, expr, fields, start, kind, shift)...)
		}
	}
	return diags
}

// maxArcs is the most values of one list or mapping CUE evaluates at
// once.
const maxArcs = 128

// piece is part of a large collection, validated on its own: values from
// offset on (for a list) of the collection at path, whose schema is
// schema (key names it in the checker's shape cache).
type piece struct {
	key    string
	path   []string
	schema cue.Value
	lit    ast.Expr
	offset int
	isList bool
}

// split returns e with every list, and every mapping whose fields all
// come from a pattern, of more than
// maxArcs values cut to its first maxArcs, appending the rest to pieces,
// and with the fields a closed mapping does not allow left out (they are
// reported by unknownFields, and would cost CUE the same scan). e itself
// is not changed: what changes is copied. offset is the index of e's
// first element when e is a piece of a list.
func (c *checker) split(pieces *[]piece, key string, path []string, v cue.Value, e ast.Expr, offset int) ast.Expr {
	sh := c.shapeAt(key, v)
	switch x := e.(type) {
	case *ast.StructLit:
		if !sh.isStruct {
			return e
		}
		var elts, rest []ast.Decl
		changed := false
		for _, d := range x.Elts {
			f, ok := d.(*ast.Field)
			if !ok {
				elts = append(elts, d)
				continue
			}
			name, _, err := ast.LabelName(f.Label)
			if err != nil {
				elts = append(elts, d)
				continue
			}
			var childKey string
			var child cue.Value
			switch {
			case sh.fields[name]:
				childKey, child = key+"."+name, sh.child(name)
			case sh.pattern || v.Allows(cue.Str(name)):
				childKey, child = key+".*", sh.child("*")
			default:
				changed = true // not allowed: unknownFields says so
				continue
			}
			if len(sh.fields) == 0 && len(elts) >= maxArcs {
				rest = append(rest, f)
				continue
			}
			cv := c.split(pieces, childKey, append(path[:len(path):len(path)], name), child, f.Value, 0)
			if cv != f.Value {
				changed = true
				nf := *f
				nf.Value = cv
				d = &nf
			}
			elts = append(elts, d)
		}
		for from := 0; from < len(rest); from += maxArcs {
			lit := &ast.StructLit{Elts: rest[from:min(from+maxArcs, len(rest))]}
			*pieces = append(*pieces, piece{key: key, path: path, schema: v, lit: lit})
		}
		if !changed && len(rest) == 0 {
			return e
		}
		ns := *x
		ns.Elts = elts
		return &ns
	case *ast.ListLit:
		if !sh.isList {
			return e
		}
		ev := sh.child("[]")
		if !ev.Exists() {
			return e
		}
		elts := x.Elts
		for from := maxArcs; from < len(elts); from += maxArcs {
			lit := &ast.ListLit{Elts: elts[from:min(from+maxArcs, len(elts))]}
			*pieces = append(*pieces, piece{key: key, path: path, schema: v, lit: lit, offset: offset + from, isList: true})
		}
		changed := len(elts) > maxArcs
		elts = elts[:min(len(elts), maxArcs)]
		var out []ast.Expr
		for i, el := range elts {
			cv := c.split(pieces, key+".[]", append(path[:len(path):len(path)], strconv.Itoa(offset+i)), ev, el, 0)
			if cv != el {
				changed = true
			}
			out = append(out, cv)
		}
		if !changed {
			return e
		}
		nl := *x
		nl.Elts = out
		return &nl
	}
	return e
}

func (c *checker) shapeAt(key string, v cue.Value) *shape {
	if sh, ok := c.shapes[key]; ok {
		return sh
	}
	sh := &shape{v: v}
	switch v.IncompleteKind() {
	case cue.StructKind:
		sh.isStruct = true
		sh.fields = map[string]bool{}
		if it, err := v.Fields(cue.Optional(true)); err == nil {
			for it.Next() {
				sel := it.Selector()
				sh.fields[sel.Unquoted()] = true
				if sel.ConstraintType() == cue.RequiredConstraint {
					sh.required = append(sh.required, sel.Unquoted())
				}
			}
		}
		sh.pattern = v.LookupPath(cue.MakePath(cue.AnyString)).Exists()
	case cue.ListKind:
		sh.isList = true
	}
	c.shapes[key] = sh
	return sh
}

// unknownFields reports every field of the document that the schema does
// not allow, with the closest allowed name when there is one.
func (c *checker) unknownFields(kind string, def cue.Value, expr ast.Expr, fields map[string]schema.Pos, start schema.Pos) []Diagnostic {
	var out []Diagnostic
	var walk func(key string, path []string, v cue.Value, e ast.Expr)
	walk = func(key string, path []string, v cue.Value, e ast.Expr) {
		sh := c.shapeAt(key, v)
		switch x := e.(type) {
		case *ast.StructLit:
			if !sh.isStruct {
				return
			}
			for _, d := range x.Elts {
				f, ok := d.(*ast.Field)
				if !ok {
					continue
				}
				name, _, err := ast.LabelName(f.Label)
				if err != nil {
					continue
				}
				p := append(path[:len(path):len(path)], name)
				switch {
				case sh.fields[name]:
					walk(key+"."+name, p, sh.child(name), f.Value)
				case sh.pattern || v.Allows(cue.Str(name)):
					walk(key+".*", p, sh.child("*"), f.Value)
				case len(sh.fields) == 0:
					msg := fmt.Sprintf("%s: %q is not a valid name", strings.Join(path, "."), name)
					if h := hint(def, path); h != "" {
						msg += ": " + h
					}
					out = append(out, errorf(posOf(fields, p, start), "%s", msg))
				default:
					allowed := make([]string, 0, len(sh.fields))
					for n := range sh.fields {
						allowed = append(allowed, n)
					}
					sort.Strings(allowed)
					msg := fmt.Sprintf("unknown field %q in %s", name, where(path, kind))
					if s := closest(name, allowed); s != "" {
						msg += fmt.Sprintf("; did you mean %q?", s)
					} else {
						msg += "; allowed fields are " + strings.Join(allowed, ", ")
					}
					out = append(out, errorf(posOf(fields, p, start), "%s", msg))
				}
			}
			// CUE reports a missing required field only when nothing
			// else is wrong; berth looks for them itself too.
			for _, req := range sh.required {
				if !hasField(x, req) {
					p := append(path[:len(path):len(path)], req)
					out = append(out, errorf(posOf(fields, p, start), "%s", missingMsg(def, p, kind)))
				}
			}
		case *ast.ListLit:
			if !sh.isList {
				return
			}
			ev := sh.child("[]")
			if !ev.Exists() {
				return
			}
			for i, el := range x.Elts {
				walk(key+".[]", append(path[:len(path):len(path)], strconv.Itoa(i)), ev, el)
			}
		}
	}
	walk(kind, nil, def, expr)
	return out
}

// cueDiagnostics turns CUE's errors into diagnostics a person can act on,
// one per field, at the field's position in the YAML.
// shift, when not nil, maps an error's path to the document's (a piece
// of a list starts at an offset).
func cueDiagnostics(err error, def cue.Value, data ast.Expr, fields map[string]schema.Pos, start schema.Pos, kind string, shift func([]string) []string) []Diagnostic {
	var out []Diagnostic
	seen := map[string]bool{}
	for _, e := range cueerrors.Errors(err) {
		path := cleanPath(e.Path())
		if len(path) > 0 && strings.HasPrefix(path[0], "#") {
			path = path[1:]
		}
		if shift != nil {
			path = shift(path)
		}
		dotted := strings.Join(path, ".")
		if seen[dotted] || format(e) == "field not allowed" || format(e) == "field is required but not present" {
			continue // reported by unknownFields
		}
		msg := explain(e, path, def, data, kind)
		if msg == "" {
			continue
		}
		seen[dotted] = true
		out = append(out, errorf(posOf(fields, path, start), "%s", msg))
	}
	return out
}

// posOf returns where the field at path (or its nearest written parent)
// is written.
func posOf(fields map[string]schema.Pos, path []string, start schema.Pos) schema.Pos {
	for i := len(path); i > 0; i-- {
		if p, ok := fields[strings.Join(path[:i], ".")]; ok {
			return p
		}
	}
	return start
}

// schemaAt finds the schema of the field at path, following list indices
// and pattern constraints.
func schemaAt(def cue.Value, path []string) (cue.Value, bool) {
	v := def
	for _, sel := range path {
		if _, err := strconv.Atoi(sel); err == nil && v.IncompleteKind() == cue.ListKind {
			v = v.LookupPath(cue.MakePath(cue.AnyIndex))
		} else if f := v.LookupPath(cue.MakePath(cue.Str(sel).Optional())); f.Exists() {
			v = f
		} else if f := v.LookupPath(cue.MakePath(cue.Str(sel).Required())); f.Exists() {
			v = f
		} else {
			v = v.LookupPath(cue.MakePath(cue.AnyString))
		}
		if !v.Exists() {
			return v, false
		}
	}
	return v, true
}

// secretAt reports whether the field at path, or one it is in, carries
// the schema's @secret() attribute: a value written there may be a
// credential, and an error about it never repeats it (CI logs and pull
// request annotations are read by many).
func secretAt(def cue.Value, path []string) bool {
	for i := 1; i <= len(path); i++ {
		if v, ok := schemaAt(def, path[:i]); ok {
			if a := v.Attribute("secret"); a.Err() == nil {
				return true
			}
		}
	}
	return false
}

func hint(def cue.Value, path []string) string {
	v, ok := schemaAt(def, path)
	if !ok {
		return ""
	}
	a := v.Attribute("hint")
	if a.Err() != nil {
		return ""
	}
	s, err := a.String(0)
	if err != nil {
		return ""
	}
	return s
}

// allowedFields lists the fields the schema allows at path, sorted.
func allowedFields(def cue.Value, path []string) []string {
	v, ok := schemaAt(def, path)
	if !ok {
		return nil
	}
	it, err := v.Fields(cue.Optional(true))
	if err != nil {
		return nil
	}
	var names []string
	for it.Next() {
		names = append(names, it.Selector().Unquoted())
	}
	sort.Strings(names)
	return names
}

// explain writes one sentence for a CUE error: what is wrong with the
// field and what would fix it.
func explain(e cueerrors.Error, path []string, def cue.Value, data ast.Expr, kind string) string {
	format, args := e.Msg()
	field := strings.Join(path, ".")
	if field == "" {
		field = "the document"
	}
	withHint := func(s string) string {
		if h := hint(def, path); h != "" {
			return s + ": " + h
		}
		return s
	}
	got := func() string {
		if secretAt(def, path) {
			return "a value (not shown: it may be a credential)"
		}
		v := lookupField(data, strings.Join(path, "."))
		if v == nil {
			return ""
		}
		if lit, ok := v.(*ast.BasicLit); ok && (lit.Kind == token.INT || lit.Kind == token.FLOAT) {
			// As written, so a number too large for JSON stays readable
			// (CUE's YAML decoder writes one as "number & 1e20").
			return strings.TrimPrefix(lit.Value, "number & ")
		}
		b, err := json.Marshal(plain(v))
		if err != nil {
			return ""
		}
		return echo(string(b))
	}
	switch {
	case format == "field not allowed":
		name := path[len(path)-1]
		allowed := allowedFields(def, path[:len(path)-1])
		msg := fmt.Sprintf("unknown field %q in %s", name, where(path[:len(path)-1], kind))
		if s := closest(name, allowed); s != "" {
			return msg + fmt.Sprintf("; did you mean %q?", s)
		}
		if len(allowed) > 0 {
			return msg + "; allowed fields are " + strings.Join(allowed, ", ")
		}
		return msg
	case format == "field is required but not present":
		return "" // reported by unknownFields
	case strings.HasPrefix(format, "incompatible list lengths"):
		return withHint(fmt.Sprintf("%s: %s is not valid", field, got()))
	case strings.HasPrefix(format, "conflicting values") || strings.HasPrefix(format, "conflicting value "):
		if s, ok := schemaAt(def, path); ok && s.IsConcrete() && s.Kind()&(cue.StructKind|cue.ListKind) == 0 {
			return withHint(fmt.Sprintf("%s: %s is not valid", field, got()))
		}
		if enum := enumOf(def, path); enum != "" {
			return fmt.Sprintf("%s: %s is not allowed; use one of %s", field, got(), enum)
		}
		if want := wantKind(def, path); want != "" {
			return withHint(fmt.Sprintf("%s: got %s, want %s", field, got(), want))
		}
	case strings.HasPrefix(format, "invalid value"):
		if len(args) == 2 {
			if bound := fmt.Sprint(args[1]); !strings.HasPrefix(bound, "=~") && !strings.Contains(bound, "MaxRunes") {
				if h := hint(def, path); h != "" {
					return fmt.Sprintf("%s: %s is out of range: %s", field, got(), h)
				}
				return (fmt.Sprintf("%s: %s is out of range (it must be %s)", field, got(), bound))
			}
		}
		return withHint(fmt.Sprintf("%s: %s is not valid", field, got()))
	case strings.Contains(format, "empty disjunction"):
		if enum := enumOf(def, path); enum != "" {
			return fmt.Sprintf("%s: %s is not allowed; use one of %s", field, got(), enum)
		}
		return withHint(fmt.Sprintf("%s: %s is not valid", field, got()))
	case strings.Contains(format, "illegal number") || strings.HasPrefix(format, "parse error") || strings.Contains(format, "overflow"):
		// A number CUE cannot hold (99999999999999999999): its parser's
		// words would show the schema's internals.
		if h := hint(def, path); h != "" {
			return fmt.Sprintf("%s: %s is out of range: %s", field, got(), h)
		}
		return fmt.Sprintf("%s: %s is not a number berth can use", field, got())
	case strings.HasPrefix(format, "incomplete value"):
		return withHint(fmt.Sprintf("%s is missing or incomplete", field))
	}
	return withHint(fmt.Sprintf("%s: %s", field, fmt.Sprintf(format, args...)))
}

// maxEcho is the most characters of a value a message repeats.
const maxEcho = 80

// echo shortens a value written back in a message to maxEcho characters,
// saying how long it was: a deeply nested value is not a 30 KB line.
func echo(s string) string {
	if len(s) <= maxEcho {
		return s
	}
	cut := maxEcho
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d characters)", s[:cut], len(s))
}

func where(parent []string, kind string) string {
	if len(parent) == 0 {
		return "a " + kind
	}
	return strings.Join(parent, ".") + " of a " + kind
}

// enumOf lists the allowed strings when the schema of path is a
// disjunction of string literals, such as "Running" | "Stopped".
func enumOf(def cue.Value, path []string) string {
	v, ok := schemaAt(def, path)
	if !ok {
		return ""
	}
	op, parts := v.Expr()
	if op != cue.OrOp {
		return ""
	}
	var out []string
	for _, p := range parts {
		s, err := p.String()
		if err != nil {
			return ""
		}
		out = append(out, strconv.Quote(s))
	}
	return strings.Join(out, ", ")
}

// wantKind says in words what type the schema wants at path.
func wantKind(def cue.Value, path []string) string {
	v, ok := schemaAt(def, path)
	if !ok {
		return ""
	}
	var kinds []string
	k := v.IncompleteKind()
	for _, c := range []struct {
		k    cue.Kind
		name string
	}{
		{cue.StructKind, "a mapping"}, {cue.ListKind, "a list"}, {cue.StringKind, "a string"},
		{cue.BoolKind, "true or false"}, {cue.IntKind, "a whole number"}, {cue.FloatKind, "a number"},
	} {
		if k&c.k != 0 {
			kinds = append(kinds, c.name)
		}
	}
	if k&cue.NumberKind == cue.NumberKind {
		kinds = slicesDelete(kinds, "a whole number")
	}
	return strings.Join(kinds, " or ")
}

func slicesDelete(s []string, x string) []string {
	out := s[:0]
	for _, v := range s {
		if v != x {
			out = append(out, v)
		}
	}
	return out
}

// closest returns the candidate within edit distance 2 of name, if any.
func closest(name string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(name), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func format(e cueerrors.Error) string {
	f, _ := e.Msg()
	return f
}

// cleanPath unquotes the selectors of a CUE error path ("\"my-name\"").
func cleanPath(path []string) []string {
	out := make([]string, len(path))
	for i, p := range path {
		if strings.HasPrefix(p, `"`) {
			if u, err := strconv.Unquote(p); err == nil {
				p = u
			}
		}
		out[i] = p
	}
	return out
}

func hasField(s *ast.StructLit, name string) bool {
	for _, d := range s.Elts {
		if f, ok := d.(*ast.Field); ok {
			if n, _, err := ast.LabelName(f.Label); err == nil && n == name {
				return true
			}
		}
	}
	return false
}

func missingMsg(def cue.Value, path []string, kind string) string {
	field := strings.Join(path, ".")
	if h := hint(def, path); h != "" {
		return fmt.Sprintf("%s is missing: %s", field, h)
	}
	return fmt.Sprintf("%s is missing; every %s needs it", field, kind)
}
