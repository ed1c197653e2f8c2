package load

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/berth-dev/berth/schema"
)

// Severity says whether a Diagnostic makes a revision invalid.
type Severity int

const (
	// SeverityError: the revision is invalid and must not be applied.
	SeverityError Severity = iota
	// SeverityWarning: the revision is valid, but something is likely wrong.
	SeverityWarning
)

func (s Severity) String() string {
	switch s {
	case SeverityError:
		return "error"
	case SeverityWarning:
		return "warning"
	}
	return "unknown"
}

// MarshalText writes "error" or "warning".
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads what MarshalText writes.
func (s *Severity) UnmarshalText(b []byte) error {
	switch string(b) {
	case "error":
		*s = SeverityError
	case "warning":
		*s = SeverityWarning
	default:
		return fmt.Errorf("severity %q: want error or warning", b)
	}
	return nil
}

// Diagnostic is one problem found in the specs: where, how bad, and a
// sentence a person can act on.
type Diagnostic struct {
	Pos      schema.Pos `json:"pos"`
	Severity Severity   `json:"severity"`
	Message  string     `json:"message"`
}

// String writes "file:line:col: message" for an error and
// "file:line:col: warning: message" for a warning.
func (d Diagnostic) String() string {
	prefix := d.Pos.String()
	if prefix != "" {
		prefix += ": "
	}
	if d.Severity == SeverityWarning {
		prefix += "warning: "
	}
	return prefix + d.Message
}

// Diagnostics is a list of problems, sorted by file, line, column, then
// message once Sort has run (Paths returns it sorted).
type Diagnostics []Diagnostic

// HasErrors reports whether any diagnostic is an error.
func (ds Diagnostics) HasErrors() bool { return ds.Errors() > 0 }

// Errors counts the errors.
func (ds Diagnostics) Errors() int {
	n := 0
	for _, d := range ds {
		if d.Severity == SeverityError {
			n++
		}
	}
	return n
}

// Warnings counts the warnings.
func (ds Diagnostics) Warnings() int { return len(ds) - ds.Errors() }

// Err returns nil when there are no errors, and otherwise an error whose
// message lists every error, one per line.
func (ds Diagnostics) Err() error {
	if !ds.HasErrors() {
		return nil
	}
	var lines []string
	for _, d := range ds {
		if d.Severity == SeverityError {
			lines = append(lines, d.String())
		}
	}
	return &InvalidError{Diagnostics: ds, msg: strings.Join(lines, "\n")}
}

// InvalidError is the error Diagnostics.Err returns: the specs are invalid.
type InvalidError struct {
	Diagnostics Diagnostics
	msg         string
}

func (e *InvalidError) Error() string { return "invalid specs:\n" + e.msg }

// IsInvalid reports whether err is (or wraps) an InvalidError.
func IsInvalid(err error) bool {
	var ie *InvalidError
	return errors.As(err, &ie)
}

// Sort orders ds by file, line, column, severity, then message.
func (ds Diagnostics) Sort() {
	sort.SliceStable(ds, func(i, j int) bool { return ds[i].less(ds[j]) })
}

func (d Diagnostic) less(o Diagnostic) bool {
	if d.Pos.File != o.Pos.File {
		return d.Pos.File < o.Pos.File
	}
	if d.Pos.Line != o.Pos.Line {
		return d.Pos.Line < o.Pos.Line
	}
	if d.Pos.Col != o.Pos.Col {
		return d.Pos.Col < o.Pos.Col
	}
	if d.Severity != o.Severity {
		return d.Severity < o.Severity
	}
	return d.Message < o.Message
}

func errorf(p schema.Pos, format string, args ...any) Diagnostic {
	return Diagnostic{Pos: p, Severity: SeverityError, Message: fmt.Sprintf(format, args...)}
}

func warnf(p schema.Pos, format string, args ...any) Diagnostic {
	return Diagnostic{Pos: p, Severity: SeverityWarning, Message: fmt.Sprintf(format, args...)}
}
