package load

import (
	"strconv"
	"strings"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/token"

	"github.com/berth-dev/berth/schema"
)

// toPos converts a CUE position to a Pos.
func toPos(p token.Pos) schema.Pos {
	if !p.IsValid() {
		return schema.Pos{}
	}
	pp := p.Position()
	return schema.Pos{File: pp.Filename, Line: pp.Line, Col: pp.Column}
}

// fieldPositions records where each field of a document is written,
// keyed by dotted path ("spec.resources.gpus", "spec.volumes.0.name").
// A key written twice in one mapping is returned in dups.
func fieldPositions(expr ast.Expr) (m map[string]schema.Pos, dups []Diagnostic) {
	m = make(map[string]schema.Pos, 32)
	var walk func(prefix string, e ast.Expr)
	walk = func(prefix string, e ast.Expr) {
		switch x := e.(type) {
		case *ast.StructLit:
			for _, d := range x.Elts {
				f, ok := d.(*ast.Field)
				if !ok {
					continue
				}
				name, _, err := ast.LabelName(f.Label)
				if err != nil {
					continue
				}
				p := name
				if prefix != "" {
					p = prefix + "." + name
				}
				if first, dup := m[p]; dup {
					dups = append(dups, errorf(toPos(f.Label.Pos()), "%s is written twice in the same mapping (first at line %d); remove one", p, first.Line))
				} else {
					m[p] = toPos(f.Label.Pos())
				}
				walk(p, f.Value)
			}
		case *ast.ListLit:
			for i, el := range x.Elts {
				p := prefix + "." + strconv.Itoa(i)
				m[p] = toPos(el.Pos())
				walk(p, el)
			}
		}
	}
	walk("", expr)
	return m, dups
}

// lookupField returns the value written at the dotted path in a document,
// or nil.
func lookupField(e ast.Expr, dotted string) ast.Expr {
	for _, sel := range strings.Split(dotted, ".") {
		switch x := e.(type) {
		case *ast.StructLit:
			var next ast.Expr
			for _, d := range x.Elts {
				f, ok := d.(*ast.Field)
				if !ok {
					continue
				}
				if name, _, err := ast.LabelName(f.Label); err == nil && name == sel {
					next = f.Value
					break
				}
			}
			if next == nil {
				return nil
			}
			e = next
		case *ast.ListLit:
			i, err := strconv.Atoi(sel)
			if err != nil || i < 0 || i >= len(x.Elts) {
				return nil
			}
			e = x.Elts[i]
		default:
			return nil
		}
	}
	return e
}

// stringField returns the string written at the dotted path, and whether
// there is one.
func stringField(e ast.Expr, dotted string) (string, bool) {
	lit, ok := lookupField(e, dotted).(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := literal.Unquote(lit.Value)
	if err != nil {
		return "", false
	}
	return s, true
}

// plain converts a YAML-derived CUE expression to plain Go values
// (map[string]any, []any, string, int64, float64, bool, nil); it is used
// for documents berth reads leniently, such as Cluster files.
func plain(e ast.Expr) any {
	switch x := e.(type) {
	case *ast.StructLit:
		m := map[string]any{}
		for _, d := range x.Elts {
			f, ok := d.(*ast.Field)
			if !ok {
				continue
			}
			if name, _, err := ast.LabelName(f.Label); err == nil {
				m[name] = plain(f.Value)
			}
		}
		return m
	case *ast.ListLit:
		l := make([]any, 0, len(x.Elts))
		for _, el := range x.Elts {
			l = append(l, plain(el))
		}
		return l
	case *ast.BasicLit:
		switch x.Kind {
		case token.STRING:
			s, err := literal.Unquote(x.Value)
			if err != nil {
				return nil
			}
			return s
		case token.INT:
			n, err := strconv.ParseInt(strings.ReplaceAll(x.Value, "_", ""), 0, 64)
			if err != nil {
				return nil
			}
			return n
		case token.FLOAT:
			f, err := strconv.ParseFloat(x.Value, 64)
			if err != nil {
				return nil
			}
			return f
		case token.TRUE:
			return true
		case token.FALSE:
			return false
		}
	case *ast.UnaryExpr:
		if x.Op == token.SUB {
			switch v := plain(x.X).(type) {
			case int64:
				return -v
			case float64:
				return -v
			}
		}
	}
	return nil
}
