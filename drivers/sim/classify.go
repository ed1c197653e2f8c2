package sim

import (
	"errors"
	"fmt"

	"github.com/berth-dev/berth/drivers"
)

// errInvalid marks what a real cluster would refuse outright;
// errUnplaceable what it accepts but cannot place.
var (
	errInvalid     = errors.New("invalid")
	errUnplaceable = errors.New("unplaceable")
)

// validate refuses what Nomad's job validation refuses: a priority
// outside 1-100 (when the action carries its tier), a Start without
// spec or placement.
func validate(a drivers.Action) error {
	switch {
	case a.Spec == nil:
		return fmt.Errorf("%w: start needs the workspace spec", errInvalid)
	case a.Tier != nil && (a.Tier.Spec.Value < 1 || a.Tier.Spec.Value > 100):
		return fmt.Errorf("%w: priority %d of tier %s must be between 1 and 100", errInvalid, a.Tier.Spec.Value, a.Tier.Meta.Name)
	case len(a.Placements) == 0:
		return fmt.Errorf("%w: start needs a placement", errInvalid)
	}
	return nil
}

// classify sorts an Apply error as drivers do (drivers.ClassOf): a Wait
// or an invalid Start is invalid; a Start the cluster's state refuses (a
// GPU held, a node gone or draining, a run still stopping) is a conflict.
// Injected faults stay unclassified, that is transient.
func classify(a drivers.Action, err error) error {
	switch {
	case errors.Is(err, ErrInjected):
		return err
	case errors.Is(err, errUnplaceable):
		return &drivers.Error{Class: drivers.ClassUnplaceable, Op: "sim: " + a.Kind.String(), Workspace: a.Workspace, Err: err}
	case a.Kind == drivers.ActionWait || errors.Is(err, errInvalid):
		return &drivers.Error{Class: drivers.ClassInvalid, Op: "sim: " + a.Kind.String(), Workspace: a.Workspace, Err: err}
	case a.Kind == drivers.ActionStart:
		return &drivers.Error{Class: drivers.ClassConflict, Op: "sim: " + a.Kind.String(), Workspace: a.Workspace, Err: err}
	}
	return err
}
