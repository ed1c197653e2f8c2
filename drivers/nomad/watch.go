package nomad

import (
	"context"
	"errors"
	"time"

	"github.com/berth-dev/berth/schema"
	"github.com/hashicorp/nomad/api"
)

// watchTopics are the event stream topics that can change a snapshot.
var watchTopics = map[api.Topic][]string{
	api.TopicNode:       {"*"},
	api.TopicJob:        {"*"},
	api.TopicAllocation: {"*"},
}

// stream follows Nomad's event stream from index on one connection and
// calls seen with the index of every batch of events, until ctx ends,
// seen returns false, or the stream breaks (the error says why; nil when
// ctx ended or seen stopped it). Heartbeats are not events.
func (d *Driver) stream(ctx context.Context, index uint64, seen func(uint64) bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, err := d.client.EventStream().Stream(ctx, watchTopics, index, &api.QueryOptions{Namespace: "*"})
	if err != nil {
		return wrap(err, schema.Ref{}, "follow the event stream")
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			switch {
			case !ok:
				return nil
			case ev.Err != nil:
				if ctx.Err() != nil {
					return nil
				}
				return wrap(ev.Err, schema.Ref{}, "follow the event stream")
			case !seen(ev.Index):
				return nil
			}
		}
	}
}

func (d *Driver) observedIndex() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lastIndex
}

// WaitForChange blocks until Nomad's nodes, jobs or allocations move past
// what the last Observe saw, ctx ends, or wait passes; it returns at once
// when nothing was observed yet. It follows Nomad's event stream on one
// connection, closed when it returns (Nomad lets go of it at its next
// heartbeat, within about 10 s); a loop should use Watch, which keeps one
// stream open.
func (d *Driver) WaitForChange(ctx context.Context, wait time.Duration) error {
	after := d.observedIndex()
	if after == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	err := d.stream(ctx, after+1, func(idx uint64) bool { return idx <= after })
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// Watch sends on the returned channel each time Nomad's nodes, jobs or
// allocations change past what the last Observe saw, until ctx ends; then
// it closes the channel. Sends never block: changes that come while one
// is pending merge into it.
//
// It holds one connection to Nomad, its event stream (topics Node, Job,
// Allocation), and never abandons a request: the stream stays open until
// ctx ends, and one that breaks is opened again after a pause (1 s,
// doubling to 30 s while it keeps breaking). So a busy loop costs Nomad
// one connection, never a pile of cancelled blocking queries that it holds
// until they time out (its per-address limit then refuses everyone).
//
// The same stream keeps the driver's cache current (follow.go): while it
// follows from the last full read, Observe answers from the cache.
func (d *Driver) Watch(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	go func() {
		defer close(ch)
		pause := time.Second
		for ctx.Err() == nil {
			from := d.observedIndex()
			if from > 0 {
				from++
			}
			got := false
			err := d.follow(ctx, from, func(idx uint64) bool {
				got = true
				if idx > d.observedIndex() {
					select {
					case ch <- struct{}{}:
					default:
					}
				}
				return true
			})
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, errNewNamespace) {
				continue // the stream that carries the new namespace, now
			}
			if got && err == nil {
				pause = time.Second
			}
			_ = sleep(ctx, pause)
			pause = min(2*pause, 30*time.Second)
		}
	}()
	return ch
}
