package drivers

import (
	"errors"
	"fmt"

	"github.com/berth-dev/berth/schema"
)

// Class sorts a driver error by what the loop does next.
type Class int

const (
	// ClassTransient: the cluster could not be reached or answered with a
	// server error; retry the same step with backoff.
	ClassTransient Class = iota
	// ClassConflict: the cluster changed under berth (a stale index, a GPU
	// that is no longer free, a node that is gone); observe again and replan.
	ClassConflict
	// ClassInvalid: the cluster refused what berth asked (a job that does not
	// validate, an object berth does not own); report it against the
	// workspace and do not retry until the spec changes.
	ClassInvalid
	// ClassUnplaceable: the cluster accepted the workspace but its
	// scheduler cannot place it now (a resource exhausted, a constraint
	// no node meets; the message carries the scheduler's own reason).
	// It concerns that workspace alone: the rest of the plan goes on, and
	// the workspace is tried again when the cluster changes or after
	// backoff, never in a tight loop.
	ClassUnplaceable
)

func (c Class) String() string {
	switch c {
	case ClassTransient:
		return "transient"
	case ClassConflict:
		return "conflict"
	case ClassInvalid:
		return "invalid"
	case ClassUnplaceable:
		return "unplaceable"
	}
	return "unknown"
}

// Error is a classified driver error. Op names the step ("register job
// ws-a"); Workspace is zero when the error concerns no single workspace.
type Error struct {
	Class     Class
	Op        string
	Workspace schema.Ref
	Err       error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return e.Op
	}
	return e.Op + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// ErrorClass returns e.Class: an *Error is Classified.
func (e *Error) ErrorClass() Class { return e.Class }

// Classified is an error that knows its class. *Error is one; an error
// made outside drivers that the loop must treat as a driver error of some
// class (a write refused because this replica no longer leads: a
// conflict) implements it rather than being classified anywhere else.
type Classified interface {
	ErrorClass() Class
}

// Errorf returns a classified error for op; format and args describe the
// cause and may wrap an error with %w.
func Errorf(class Class, ref schema.Ref, op, format string, args ...any) error {
	return &Error{Class: class, Op: op, Workspace: ref, Err: fmt.Errorf(format, args...)}
}

// ClassOf returns the class of err, the one classification of driver
// errors: that of the first Classified error in its chain (errors.As
// order; usually the outermost *Error), or ClassTransient for an error
// nobody classified (a broken connection is worth a retry).
func ClassOf(err error) Class {
	var c Classified
	if errors.As(err, &c) {
		return c.ErrorClass()
	}
	return ClassTransient
}
