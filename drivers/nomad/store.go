package nomad

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/reconcile/state"
	"github.com/berth-dev/berth/schema"
	"github.com/hashicorp/nomad/api"
)

// historyItem is the Variable item holding the JSON history.
const historyItem = "history"

// maxVariableBytes is Nomad's limit on one Variable's items.
const maxVariableBytes = 64 << 10

// LoadHistory reads the reconciler's memory (usage for fair share, queue
// places, preemption records) from the Nomad Variable at StatePath. A
// missing variable is an empty history: berth starts stateless.
func (d *Driver) LoadHistory(ctx context.Context) (state.History, error) {
	v, _, err := d.client.Variables().Peek(d.cfg.StatePath, d.q(ctx, d.cfg.StateNamespace))
	if err != nil {
		return state.History{}, wrap(err, schema.Ref{}, "read variable "+d.cfg.StatePath)
	}
	var h state.History
	var index uint64
	if v != nil {
		index = v.ModifyIndex
		if raw := v.Items[historyItem]; raw != "" {
			if err := json.Unmarshal([]byte(raw), &h); err != nil {
				return state.History{}, errorf(drivers.ClassInvalid, schema.Ref{}, "read variable "+d.cfg.StatePath, "item %q is not a history: %v", historyItem, err)
			}
		}
	}
	d.mu.Lock()
	d.histIndex = index
	d.mu.Unlock()
	return h, nil
}

// SaveHistory writes h with check-and-set against what LoadHistory (or
// the last SaveHistory) saw. Another writer in between makes it fail
// with a conflict: load again, then save.
func (d *Driver) SaveHistory(ctx context.Context, h state.History) error {
	b, err := json.Marshal(h)
	if err != nil {
		return errorf(drivers.ClassInvalid, schema.Ref{}, "write variable "+d.cfg.StatePath, "encode history: %v", err)
	}
	if len(b) > maxVariableBytes {
		return errorf(drivers.ClassInvalid, schema.Ref{}, "write variable "+d.cfg.StatePath, "history is %d bytes; a Nomad variable holds at most %d", len(b), maxVariableBytes)
	}
	d.mu.Lock()
	index := d.histIndex
	d.mu.Unlock()
	v := &api.Variable{
		Namespace: d.cfg.StateNamespace, Path: d.cfg.StatePath, ModifyIndex: index,
		Items: api.VariableItems{historyItem: string(b)},
	}
	out, _, err := d.client.Variables().CheckedUpdate(v, d.w(ctx, d.cfg.StateNamespace))
	if err != nil {
		var cas api.ErrCASConflict
		if errors.As(err, &cas) {
			return errorf(drivers.ClassConflict, schema.Ref{}, "write variable "+d.cfg.StatePath, "another writer changed it (index %d, expected %d): load it again", cas.Conflict.ModifyIndex, index)
		}
		return wrap(err, schema.Ref{}, "write variable "+d.cfg.StatePath)
	}
	d.mu.Lock()
	d.histIndex = out.ModifyIndex
	d.mu.Unlock()
	return nil
}
