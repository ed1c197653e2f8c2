package source

import (
	"io/fs"

	"github.com/berth-dev/berth/load"
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
	return SpecLoader(load.Limits{})(fsys, root)
}

// SpecLoader is LoadSpecs within limits: a file or tree over them is a
// problem that names it (load.Limits). The LoadFunc it returns loads
// incrementally: it keeps a load.Cache, so a revision that changes a few
// files parses and validates only those (and checks again what spans
// documents), with the result a full load gives. Its loads run one at a
// time.
func SpecLoader(limits load.Limits) LoadFunc { return specLoader(limits, &load.Cache{}) }

func specLoader(limits load.Limits, cache *load.Cache) LoadFunc {
	return func(fsys fs.FS, root string) (*schema.Set, []string, error) {
		r, err := load.CheckFSWith(fsys, root, load.Options{Limits: limits, Cache: cache})
		if err != nil {
			return nil, nil, err
		}
		var problems []string
		for _, d := range r.Diagnostics {
			if d.Severity == load.SeverityError {
				problems = append(problems, d.String())
			}
		}
		if r.Set == nil && len(problems) == 0 {
			problems = []string{"the specs are invalid"}
		}
		return r.Set, problems, nil
	}
}
