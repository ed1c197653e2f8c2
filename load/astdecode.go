package load

import (
	"fmt"
	"reflect"
	"strings"
	"sync"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/token"
)

// decodeAST fills v (a pointer to a raw* struct) from a document the
// schema has accepted, following json tags. It is the loader's fast path:
// going through JSON costs a marshal and a parse per document.
func decodeAST(e ast.Expr, v any) error {
	return decodeValue(e, reflect.ValueOf(v).Elem())
}

var quantityType = reflect.TypeFor[quantity]()

// fieldIndex maps json names to field indices, per struct type.
var fieldIndex sync.Map // reflect.Type -> map[string]int

func fieldsOf(t reflect.Type) map[string]int {
	if m, ok := fieldIndex.Load(t); ok {
		return m.(map[string]int)
	}
	m := map[string]int{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			m[name] = i
		}
	}
	fieldIndex.Store(t, m)
	return m
}

func decodeValue(e ast.Expr, v reflect.Value) error {
	if v.Type() == quantityType {
		lit, ok := e.(*ast.BasicLit)
		if !ok {
			return fmt.Errorf("want a number or a string")
		}
		text := lit.Value
		if lit.Kind == token.STRING {
			s, err := literal.Unquote(lit.Value)
			if err != nil {
				return err
			}
			text = s
		}
		v.Set(reflect.ValueOf(quantity{text: text, set: true}))
		return nil
	}
	switch v.Kind() {
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		if err := decodeValue(e, p.Elem()); err != nil {
			return err
		}
		v.Set(p)
		return nil
	case reflect.Struct:
		s, ok := e.(*ast.StructLit)
		if !ok {
			return fmt.Errorf("want a mapping")
		}
		idx := fieldsOf(v.Type())
		for _, d := range s.Elts {
			f, ok := d.(*ast.Field)
			if !ok {
				continue
			}
			name, _, err := ast.LabelName(f.Label)
			if err != nil {
				return err
			}
			i, ok := idx[name]
			if !ok {
				continue
			}
			if err := decodeValue(f.Value, v.Field(i)); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		return nil
	case reflect.Map:
		s, ok := e.(*ast.StructLit)
		if !ok {
			return fmt.Errorf("want a mapping")
		}
		m := reflect.MakeMapWithSize(v.Type(), len(s.Elts))
		for _, d := range s.Elts {
			f, ok := d.(*ast.Field)
			if !ok {
				continue
			}
			name, _, err := ast.LabelName(f.Label)
			if err != nil {
				return err
			}
			ev := reflect.New(v.Type().Elem()).Elem()
			if err := decodeValue(f.Value, ev); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			m.SetMapIndex(reflect.ValueOf(name).Convert(v.Type().Key()), ev)
		}
		v.Set(m)
		return nil
	case reflect.Slice:
		l, ok := e.(*ast.ListLit)
		if !ok {
			return fmt.Errorf("want a list")
		}
		sl := reflect.MakeSlice(v.Type(), len(l.Elts), len(l.Elts))
		for i, el := range l.Elts {
			if err := decodeValue(el, sl.Index(i)); err != nil {
				return fmt.Errorf("%d: %w", i, err)
			}
		}
		v.Set(sl)
		return nil
	}
	switch x := plain(e).(type) {
	case string:
		if v.Kind() != reflect.String {
			return fmt.Errorf("want %s, got a string", v.Kind())
		}
		v.SetString(x)
	case bool:
		if v.Kind() != reflect.Bool {
			return fmt.Errorf("want %s, got a bool", v.Kind())
		}
		v.SetBool(x)
	case int64:
		switch v.Kind() {
		case reflect.Int, reflect.Int64:
			v.SetInt(x)
		case reflect.Float64:
			v.SetFloat(float64(x))
		default:
			return fmt.Errorf("want %s, got a number", v.Kind())
		}
	case float64:
		if v.Kind() != reflect.Float64 {
			return fmt.Errorf("want %s, got a number", v.Kind())
		}
		v.SetFloat(x)
	case nil:
		return fmt.Errorf("unreadable value")
	default:
		return fmt.Errorf("unexpected %T", x)
	}
	return nil
}
