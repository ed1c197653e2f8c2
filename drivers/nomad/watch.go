package nomad

import (
	"context"
	"time"

	"github.com/berth-dev/berth/schema"
	"github.com/hashicorp/nomad/api"
)

// WaitForChange blocks until Nomad's state moves past what the last
// Observe saw (nodes, jobs or allocations), ctx ends, or wait passes. It
// uses blocking queries, so a change is seen as soon as Nomad has it.
func (d *Driver) WaitForChange(ctx context.Context, wait time.Duration) error {
	d.mu.Lock()
	after := d.lastIndex
	d.mu.Unlock()
	if after == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, wait+5*time.Second)
	defer cancel()
	done := make(chan error, 3)
	q := func(ns string) *api.QueryOptions {
		return (&api.QueryOptions{Namespace: ns, WaitIndex: after, WaitTime: wait}).WithContext(ctx)
	}
	go func() { _, _, err := d.client.Nodes().List(q("")); done <- err }()
	go func() { _, _, err := d.client.Jobs().List(q("*")); done <- err }()
	go func() { _, _, err := d.client.Allocations().List(q("*")); done <- err }()
	err := <-done
	if err != nil && ctx.Err() == nil {
		return wrap(err, schema.Ref{}, "wait for a change")
	}
	return nil
}

// Watch sends on the returned channel each time Nomad's nodes, jobs or
// allocations change after an Observe (blocking queries, so within a
// second of Nomad knowing), until ctx ends. The loop can merge it with its
// spec-change channel. Errors wait a second and try again.
func (d *Driver) Watch(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	go func() {
		defer close(ch)
		for ctx.Err() == nil {
			d.mu.Lock()
			before := d.lastIndex
			d.mu.Unlock()
			if before == 0 {
				if _, err := d.Observe(ctx); err != nil {
					_ = sleep(ctx, time.Second)
				}
				continue
			}
			if err := d.WaitForChange(ctx, 5*time.Minute); err != nil {
				_ = sleep(ctx, time.Second)
				continue
			}
			select {
			case ch <- struct{}{}:
			default:
			}
			// The receiver observes; until it does, do not spin.
			for ctx.Err() == nil {
				d.mu.Lock()
				after := d.lastIndex
				d.mu.Unlock()
				if after != before {
					break
				}
				_ = sleep(ctx, 50*time.Millisecond)
			}
		}
	}()
	return ch
}
