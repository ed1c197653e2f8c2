package schema

import cueerrors "cuelang.org/go/cue/errors"

func cueErrors(err error) []cueerrors.Error { return cueerrors.Errors(err) }
