package nomad

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
	"github.com/hashicorp/nomad/api"
)

// The leader lease of berth's replicas is one Variable at LeasePath
// (default "berth/state/leader", in StateNamespace) with the items
// holder, ttl, term and renewed; its ModifyIndex is the lease's version,
// so every write is a check-and-set on it. Nomad 1.6 has no Variable
// locks (its API ignores ?lock-acquire and writes the Variable as a plain
// update, so two replicas would both "acquire"): berth uses check-and-set
// on every version.

// ReadLease returns the leader lease and its version (the Variable's
// ModifyIndex; 0 when there is none).
func (d *Driver) ReadLease(ctx context.Context) (drivers.Lease, uint64, error) {
	v, _, err := d.client.Variables().Peek(d.cfg.LeasePath, d.q(ctx, d.cfg.StateNamespace))
	if err != nil {
		return drivers.Lease{}, 0, wrap(err, schema.Ref{}, "read variable "+d.cfg.LeasePath)
	}
	if v == nil {
		return drivers.Lease{}, 0, nil
	}
	l := drivers.Lease{Holder: v.Items["holder"]}
	l.TTL, _ = time.ParseDuration(v.Items["ttl"])
	l.Term, _ = strconv.ParseUint(v.Items["term"], 10, 64)
	l.Renewed, _ = time.Parse(time.RFC3339Nano, v.Items["renewed"])
	return l, v.ModifyIndex, nil
}

// WriteLease writes the leader lease if its Variable is still at
// version (0: only if there is none) and returns the new version; a
// Variable written since is a conflict.
func (d *Driver) WriteLease(ctx context.Context, l drivers.Lease, version uint64) (uint64, error) {
	op := "write variable " + d.cfg.LeasePath
	v := &api.Variable{Namespace: d.cfg.StateNamespace, Path: d.cfg.LeasePath, ModifyIndex: version, Items: api.VariableItems{
		"holder": l.Holder, "ttl": l.TTL.String(), "term": strconv.FormatUint(l.Term, 10), "renewed": l.Renewed.UTC().Format(time.RFC3339Nano),
	}}
	out, _, err := d.client.Variables().CheckedUpdate(v, d.w(ctx, d.cfg.StateNamespace))
	if err != nil {
		var cas api.ErrCASConflict
		if errors.As(err, &cas) {
			return 0, conflictErr(op, cas.Conflict, version)
		}
		return 0, wrap(err, schema.Ref{}, op)
	}
	if out == nil || out.ModifyIndex == 0 {
		return 0, errorf(drivers.ClassTransient, schema.Ref{}, op, "Nomad answered without the Variable's index")
	}
	return out.ModifyIndex, nil
}
