// Package pack renders a Nomad Pack (packs/berth) as nomad-pack does, for
// berth's tests and the nomad-pack stand-in the quickstart's test runs:
// text/template with nomad-pack's [[ ]] delimiters, the pack's helpers
// (templates/_helpers.tpl), and the few functions berth's pack uses —
// nomad-pack's var and meta, and Sprig's quote, coalesce, required, fail
// and list, with Sprig's meaning. The Go module proxy does not serve
// github.com/hashicorp/nomad-pack, so its own renderer cannot be used.
//
// metadata.hcl and variables.hcl are read as berth's pack writes them, a
// subset of HCL: blocks of `key = value` lines whose values are one-line
// literals (strings, numbers, bools, lists of them, and the empty map {}
// or a map of strings written as JSON). Anything else is an error, not a
// guess.
package pack

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/template"
)

// Variable is one variable of variables.hcl.
type Variable struct {
	Name, Type, Description string
	Default                 any
}

// Pack is a pack read from its directory.
type Pack struct {
	Dir string
	// Meta holds metadata.hcl's attributes as "block.key" ("pack.name").
	Meta map[string]any
	Vars map[string]Variable
}

// Load reads the pack in dir.
func Load(dir string) (*Pack, error) {
	p := &Pack{Dir: dir, Meta: map[string]any{}, Vars: map[string]Variable{}}
	meta, err := parseHCL(filepath.Join(dir, "metadata.hcl"))
	if err != nil {
		return nil, err
	}
	for _, b := range meta {
		for k, v := range b.attrs {
			p.Meta[b.kind+"."+k] = v.value
		}
	}
	vars, err := parseHCL(filepath.Join(dir, "variables.hcl"))
	if err != nil {
		return nil, err
	}
	for _, b := range vars {
		if b.kind != "variable" || b.label == "" {
			return nil, fmt.Errorf("%s: block %s %q: want variable \"NAME\"", dir, b.kind, b.label)
		}
		v := Variable{Name: b.label}
		for k, a := range b.attrs {
			switch k {
			case "type":
				v.Type = a.raw
			case "description":
				v.Description, _ = a.value.(string)
			case "default":
				v.Default = a.value
			default:
				return nil, fmt.Errorf("variables.hcl: variable %s: unknown attribute %s", b.label, k)
			}
		}
		switch v.Type {
		case "string", "number", "bool", "list(string)", "map(string)":
		default:
			return nil, fmt.Errorf("variables.hcl: variable %s: type %q (string, number, bool, list(string) or map(string))", b.label, v.Type)
		}
		if v.Default == nil {
			return nil, fmt.Errorf("variables.hcl: variable %s has no default", b.label)
		}
		if err := checkType(v, v.Default); err != nil {
			return nil, fmt.Errorf("variables.hcl: variable %s: default: %w", b.label, err)
		}
		p.Vars[v.Name] = v
	}
	return p, nil
}

func checkType(v Variable, val any) error {
	ok := false
	switch v.Type {
	case "string":
		_, ok = val.(string)
	case "number":
		_, ok = val.(float64)
	case "bool":
		_, ok = val.(bool)
	case "list(string)":
		l, isList := val.([]any)
		ok = isList
		for _, e := range l {
			if _, s := e.(string); !s {
				ok = false
			}
		}
	case "map(string)":
		m, isMap := val.(map[string]any)
		ok = isMap
		for _, e := range m {
			if _, s := e.(string); !s {
				ok = false
			}
		}
	}
	if !ok {
		return fmt.Errorf("%v is not a %s", val, v.Type)
	}
	return nil
}

// Value converts a --var value, as given on nomad-pack's command line,
// to the variable's type: a list or a map is written as JSON, which HCL
// reads as the same value (nomad-pack takes it too).
func (p *Pack) Value(name, s string) (any, error) {
	v, ok := p.Vars[name]
	if !ok {
		return nil, fmt.Errorf("--var %s: the pack has no such variable", name)
	}
	var val any
	var err error
	switch v.Type {
	case "string":
		val = s
	case "number":
		val, err = strconv.ParseFloat(s, 64)
	case "bool":
		val, err = strconv.ParseBool(s)
	default:
		err = json.Unmarshal([]byte(s), &val)
	}
	if err == nil {
		err = checkType(v, val)
	}
	if err != nil {
		return nil, fmt.Errorf("--var %s=%s: %w", name, s, err)
	}
	return val, nil
}

// Rendered is a pack rendered with one set of values.
type Rendered struct {
	// Jobs maps each template of templates/*.nomad.tpl that rendered to
	// something beyond white space to its text; a template that renders
	// empty (a job switched off) is left out, as nomad-pack leaves it.
	Jobs map[string]string
	// Outputs is outputs.tpl rendered ("" without one).
	Outputs string
}

// Names lists the rendered jobs' templates in order.
func (r Rendered) Names() []string {
	names := make([]string, 0, len(r.Jobs))
	for n := range r.Jobs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// context is the pack's `.`: what var and meta read.
type context struct {
	vars map[string]any
	meta map[string]any
}

// Render renders the pack with set (--var NAME=VALUE, as strings) over
// the defaults.
func (p *Pack) Render(set map[string]string) (Rendered, error) {
	ctx := &context{vars: map[string]any{}, meta: p.Meta}
	for n, v := range p.Vars {
		ctx.vars[n] = v.Default
	}
	for n, s := range set {
		val, err := p.Value(n, s)
		if err != nil {
			return Rendered{}, err
		}
		ctx.vars[n] = val
	}
	root := template.New("pack").Delims("[[", "]]").Option("missingkey=error").Funcs(funcs)
	helpers := filepath.Join(p.Dir, "templates", "_helpers.tpl")
	if b, err := os.ReadFile(helpers); err == nil {
		if _, err := root.New("_helpers.tpl").Parse(string(b)); err != nil {
			return Rendered{}, err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return Rendered{}, err
	}
	files, err := filepath.Glob(filepath.Join(p.Dir, "templates", "*.nomad.tpl"))
	if err != nil {
		return Rendered{}, err
	}
	slices.Sort(files)
	if len(files) == 0 {
		return Rendered{}, fmt.Errorf("%s: no templates/*.nomad.tpl", p.Dir)
	}
	out := Rendered{Jobs: map[string]string{}}
	render := func(path string) (string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		t, err := root.New(filepath.Base(path)).Parse(string(b))
		if err != nil {
			return "", err
		}
		var buf bytes.Buffer
		if err := t.Execute(&buf, ctx); err != nil {
			return "", err
		}
		return buf.String(), nil
	}
	for _, f := range files {
		s, err := render(f)
		if err != nil {
			return Rendered{}, err
		}
		if strings.TrimSpace(s) != "" {
			out.Jobs[filepath.Base(f)] = s
		}
	}
	if _, err := os.Stat(filepath.Join(p.Dir, "outputs.tpl")); err == nil {
		if out.Outputs, err = render(filepath.Join(p.Dir, "outputs.tpl")); err != nil {
			return Rendered{}, err
		}
	}
	return out, nil
}

var funcs = template.FuncMap{
	// nomad-pack's: var "NAME" . and meta "block.key" .
	"var": func(name string, c *context) (any, error) {
		v, ok := c.vars[name]
		if !ok {
			return nil, fmt.Errorf("var %q: the pack has no such variable", name)
		}
		return v, nil
	},
	"meta": func(name string, c *context) (any, error) {
		v, ok := c.meta[name]
		if !ok {
			return nil, fmt.Errorf("meta %q: not in metadata.hcl", name)
		}
		return v, nil
	},
	// Sprig's.
	"quote": func(v any) string { return strconv.Quote(fmt.Sprint(v)) },
	"coalesce": func(vs ...any) any {
		for _, v := range vs {
			if !empty(v) {
				return v
			}
		}
		return nil
	},
	"required": func(msg string, v any) (any, error) {
		if empty(v) {
			return nil, errors.New(msg)
		}
		return v, nil
	},
	"fail": func(msg string) (string, error) { return "", errors.New(msg) },
	"list": func(vs ...any) []any { return vs },
}

// empty is Sprig's: nil, "", 0, false, empty lists and maps.
func empty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case float64:
		return v == 0
	case bool:
		return !v
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}

// block is one block of the HCL subset.
type block struct {
	kind, label string
	attrs       map[string]attr
}

type attr struct {
	raw   string // as written
	value any    // the literal's value; nil for a bare word (a type)
}

// parseHCL reads the subset of HCL the pack's metadata.hcl and
// variables.hcl are written in.
func parseHCL(path string) ([]block, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var (
		blocks []block
		cur    *block
		n      int
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "//") {
			continue
		}
		bad := func(why string) error { return fmt.Errorf("%s:%d: %s: %q", path, n, why, line) }
		switch {
		case cur == nil && strings.HasSuffix(line, "{"):
			fields := strings.Fields(strings.TrimSuffix(line, "{"))
			b := block{attrs: map[string]attr{}}
			switch len(fields) {
			case 1:
				b.kind = fields[0]
			case 2:
				b.kind = fields[0]
				if b.label, err = strconv.Unquote(fields[1]); err != nil {
					return nil, bad("a block's label is a quoted string")
				}
			default:
				return nil, bad("want NAME { or NAME \"LABEL\" {")
			}
			blocks = append(blocks, b)
			cur = &blocks[len(blocks)-1]
		case cur != nil && line == "}":
			cur = nil
		case cur != nil:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				return nil, bad("want key = value")
			}
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if _, dup := cur.attrs[k]; dup {
				return nil, bad("a second " + k)
			}
			a := attr{raw: v}
			switch {
			case v == "string" || v == "number" || v == "bool" || strings.HasPrefix(v, "list(") || strings.HasPrefix(v, "map("):
				// a type
			default:
				// HCL's template escapes: $${ and %%{ are literal ${ and %{.
				lit := strings.NewReplacer("$${", "${", "%%{", "%{").Replace(v)
				if err := json.Unmarshal([]byte(lit), &a.value); err != nil {
					return nil, bad("a value is a one-line literal")
				}
			}
			cur.attrs[k] = a
		default:
			return nil, bad("outside a block")
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cur != nil {
		return nil, fmt.Errorf("%s: block %s not closed", path, cur.kind)
	}
	return blocks, nil
}
