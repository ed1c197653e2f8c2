package main

import (
	"github.com/berth-dev/berth/load"
	"github.com/berth-dev/berth/schema"
	"github.com/spf13/pflag"
)

// limitFlags are the size limits on spec input, the same flags with the
// same defaults for every command that reads specs (validate, plan,
// apply, reconcile).
type limitFlags struct {
	file, tree string
}

// limitsHelp is what the help of those commands says of the limits.
const limitsHelp = `Size limits: one *.yaml, *.yml or *.cue file may hold at most
--max-file-size (default 16Mi) and all of them together at most
--max-tree-size (default 512Mi). A file over the first, and every file
after the second is reached, is never read: it is an error that names it
and says which limit, so validate and plan fail, and apply and reconcile
refuse the revision (reconcile keeps the last good one in force). A git
source applies them to the blobs of a commit, before reading them.`

func (f *limitFlags) add(fl *pflag.FlagSet) {
	fl.StringVar(&f.file, "max-file-size", "16Mi", "the most one spec or rule file may hold (16Mi, 1Gi, bytes); a larger file is an error, not read")
	fl.StringVar(&f.tree, "max-tree-size", "512Mi", "the most all spec and rule files together may hold; the files past it are errors, not read")
}

// limits parses the flags; a bad size is a usage error.
func (f *limitFlags) limits() (load.Limits, error) {
	var l load.Limits
	for _, v := range []struct {
		flag, value string
		to          *int64
	}{{"--max-file-size", f.file, &l.FileBytes}, {"--max-tree-size", f.tree, &l.TreeBytes}} {
		n, err := schema.ParseBytes(v.value)
		if err != nil || n <= 0 {
			return load.Limits{}, usagef("%s %q: want a size such as 16Mi or 1Gi", v.flag, v.value)
		}
		*v.to = n
	}
	return l, nil
}
