package drivers

import (
	"errors"
	"fmt"
	"testing"

	"github.com/berth-dev/berth/schema"
)

func TestClassOf(t *testing.T) {
	ref := schema.Ref{Project: "p", Name: "w"}
	tests := map[string]struct {
		err  error
		want Class
	}{
		"plain error is transient": {errors.New("connection refused"), ClassTransient},
		"conflict":                 {Errorf(ClassConflict, ref, "register", "stale index"), ClassConflict},
		"invalid wrapped":          {fmt.Errorf("apply: %w", Errorf(ClassInvalid, ref, "register", "priority 101")), ClassInvalid},
		"outermost driver error":   {Errorf(ClassTransient, ref, "register", "retry: %w", Errorf(ClassConflict, ref, "get", "gone")), ClassTransient},
		"classified elsewhere":     {fmt.Errorf("write: %w", classified(ClassConflict)), ClassConflict},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ClassOf(tt.err); got != tt.want {
				t.Errorf("ClassOf(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// classified is an error made outside drivers that knows its class.
type classified Class

func (c classified) Error() string     { return Class(c).String() }
func (c classified) ErrorClass() Class { return Class(c) }

func TestErrorInterfaces(t *testing.T) {
	err := error(Errorf(ClassConflict, schema.Ref{}, "op", "x"))
	var c Classified
	if !errors.As(err, &c) || c.ErrorClass() != ClassConflict {
		t.Fatalf("a conflict error must be Classified as a conflict")
	}
	if got, want := err.Error(), "op: x"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
