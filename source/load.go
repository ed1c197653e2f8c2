package source

import (
	"io/fs"

	"github.com/berth-dev/berth/schema"
)

// LoadFunc turns a revision's files into a validated Set. A nil Set with
// problems ("file:line:col: message") means the revision is invalid; an
// error means the files could not be read.
type LoadFunc func(fsys fs.FS, root string) (*schema.Set, []string, error)

// LoadSpecs is the LoadFunc of berth's spec loader with the default
// limits: the problems are the error diagnostics, "file:line:col:
// message"; warnings are left out.
func LoadSpecs(fsys fs.FS, root string) (*schema.Set, []string, error) {
	return SpecLoader(schema.Limits{})(fsys, root)
}

// SpecLoader is LoadSpecs within limits: a file or tree over them is a
// problem that names it (schema.Limits). The LoadFunc it returns loads
// incrementally: it keeps a schema.Cache, so a revision that changes a few
// files parses and validates only those (and checks again what spans
// documents), with the result a full load gives. Its loads run one at a
// time.
func SpecLoader(limits schema.Limits) LoadFunc { return specLoader(limits, &schema.Cache{}) }

func specLoader(limits schema.Limits, cache *schema.Cache) LoadFunc {
	return func(fsys fs.FS, root string) (*schema.Set, []string, error) {
		r, err := schema.CheckFSWith(fsys, root, schema.Options{Limits: limits, Cache: cache})
		if err != nil {
			return nil, nil, err
		}
		var problems []string
		for _, d := range r.Diagnostics {
			if d.Severity == schema.SeverityError {
				problems = append(problems, d.String())
			}
		}
		if r.Set == nil && len(problems) == 0 {
			problems = []string{"the specs are invalid"}
		}
		return r.Set, problems, nil
	}
}
