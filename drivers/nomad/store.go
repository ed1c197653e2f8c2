package nomad

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
	"github.com/hashicorp/nomad/api"
)

// storedHistory is the history as a driver last read or wrote it: what
// SaveHistory compares against to write only what changed, and the head
// index its check-and-set expects.
type storedHistory struct {
	index  uint64 // ModifyIndex of the head Variable; 0: there was none
	legacy bool   // the head is format 1 (one item, the whole history)
	head   historyHead
	global string   // the head's global item
	hashes []string // each shard's content hash, by index
	sizes  []int    // each shard's encoded bytes, by index
	// bodies holds each shard's JSON, by index. A shard's name fixes its
	// content (the name carries its hash and no shard is rewritten), so a
	// load reads again only the shards whose names changed.
	bodies [][]byte
}

// loadTries bounds how often LoadHistory starts over when a save
// deletes a shard it was reading.
const loadTries = 5

// variableParallel bounds the Variable requests in flight for one load
// or save.
const variableParallel = 8

// LoadHistory reads the reconciler's memory (usage for fair share, queue
// places, preemption records) from the Nomad Variables at StatePath (see
// historyshard.go for the layout; the single-Variable format of earlier
// berths loads too, and the next save upgrades it in place). A missing
// head Variable is an empty history: berth starts stateless. It returns
// one save whole, never a mix of two: a shard that a concurrent save
// deleted makes it read the new head and start over. It reads the head
// and only the shards this driver has not read or written before.
func (d *Driver) LoadHistory(ctx context.Context) (drivers.History, error) {
	d.storeMu.Lock()
	defer d.storeMu.Unlock()
	var err error
	for try := 0; try < loadTries; try++ {
		var (
			h     drivers.History
			st    storedHistory
			again bool
		)
		h, st, again, err = d.loadOnce(ctx)
		if err == nil {
			d.stored = st
			return h, nil
		}
		if !again {
			break
		}
	}
	return drivers.History{}, err
}

// loadOnce reads the head and its shards. again reports a shard the head
// names that is gone: a save committed a newer head meanwhile.
func (d *Driver) loadOnce(ctx context.Context) (h drivers.History, st storedHistory, again bool, err error) {
	op := "read variable " + d.cfg.StatePath
	v, _, err := d.client.Variables().Peek(d.cfg.StatePath, d.q(ctx, d.cfg.StateNamespace))
	if err != nil {
		return h, st, false, wrap(err, schema.Ref{}, op)
	}
	if v == nil {
		return h, st, false, nil
	}
	st.index = v.ModifyIndex
	rawHead, sharded := v.Items[headItem]
	if !sharded {
		// Format 1: the whole history in one item.
		st.legacy = true
		if raw := v.Items[legacyItem]; raw != "" {
			if err := json.Unmarshal([]byte(raw), &h); err != nil {
				return drivers.History{}, st, false, damaged(d.cfg.StatePath, "item %q is not a history: %v", legacyItem, err)
			}
		}
		return h, st, false, nil
	}
	if err := json.Unmarshal([]byte(rawHead), &st.head); err != nil {
		return h, st, false, damaged(d.cfg.StatePath, "item %q is not a history head: %v", headItem, err)
	}
	if st.head.Format != historyFormat {
		return h, st, false, errorf(drivers.ClassInvalid, schema.Ref{}, op, "the history is in format %d; this berth reads format %d: run a berth at least as new as the one that wrote it", st.head.Format, historyFormat)
	}
	st.global = v.Items[globalItem]
	if err := json.Unmarshal([]byte(st.global), &h); err != nil {
		return h, st, false, damaged(d.cfg.StatePath, "item %q is not a history: %v", globalItem, err)
	}
	n := len(st.head.Shards)
	st.hashes, st.sizes, st.bodies = make([]string, n), make([]int, n), make([][]byte, n)
	cached := map[string]int{}
	for i, name := range d.stored.head.Shards {
		cached[name] = i
	}
	var mu sync.Mutex
	missing := ""
	err = eachVariable(ctx, n, func(i int) error {
		name := st.head.Shards[i]
		path := d.cfg.StatePath + "/" + name
		idx, _, hash, ok := parseShardName(name)
		if !ok || idx != i {
			return damaged(d.cfg.StatePath, "shard %d is named %q", i, name)
		}
		if j, ok := cached[name]; ok && d.stored.bodies[j] != nil {
			st.bodies[i], st.hashes[i], st.sizes[i] = d.stored.bodies[j], hash, d.stored.sizes[j]
			return nil
		}
		sv, _, err := d.client.Variables().Peek(path, d.q(ctx, d.cfg.StateNamespace))
		if err != nil {
			return wrap(err, schema.Ref{}, "read variable "+path)
		}
		if sv == nil {
			mu.Lock()
			missing = path
			mu.Unlock()
			return nil
		}
		b, err := decodeShard(sv.Items[shardItem])
		if err != nil {
			return damaged(path, "item %q is not a compressed history: %v", shardItem, err)
		}
		if got := contentHash(b); got != hash {
			return damaged(path, "its content hashes to %s, its name says %s", got, hash)
		}
		st.bodies[i], st.hashes[i], st.sizes[i] = b, hash, len(sv.Items[shardItem])
		return nil
	})
	if err != nil {
		return h, st, false, err
	}
	if missing != "" {
		return h, st, true, damaged(d.cfg.StatePath, "its head (generation %d) names shard %s, which does not exist", st.head.Generation, missing)
	}
	for i, b := range st.bodies {
		if err := mergeShard(&h, b); err != nil {
			return h, st, false, damaged(d.cfg.StatePath+"/"+st.head.Shards[i], "%v", err)
		}
	}
	return h, st, false, nil
}

func damaged(path, format string, args ...any) error {
	return errorf(drivers.ClassInvalid, schema.Ref{}, "read variable "+path,
		format+"; the history is damaged: delete the Variables under %s to start over (berth then forgets usage, queue places and preemption records)",
		append(args, path)...)
}

// SaveHistory writes h with check-and-set against the head as
// LoadHistory (or the last SaveHistory) saw it: another writer in between
// makes it fail with a conflict (load again, then save). It writes only
// the shards whose content changed, under new names, then the head; a
// history equal to the one last loaded or saved writes nothing (it still
// reports a conflict if the head changed meanwhile). The shard count
// doubles when a shard outgrows a Variable and halves when the shards are
// less than a quarter full; shards no head names are deleted after the
// head is written. h is not changed.
func (d *Driver) SaveHistory(ctx context.Context, h drivers.History) error {
	d.storeMu.Lock()
	defer d.storeMu.Unlock()
	op := "write variable " + d.cfg.StatePath
	if longest := len(d.cfg.StatePath) + len("/") + len(shardName(maxShards, ^uint64(0), "0123456789abcdef")); longest > maxVariablePath {
		return errorf(drivers.ClassInvalid, schema.Ref{}, op, "the state path is %d characters; its shards' paths would exceed Nomad's %d: choose a state path of at most %d", len(d.cfg.StatePath), maxVariablePath, len(d.cfg.StatePath)-(longest-maxVariablePath))
	}
	st := d.stored
	p, err := planSave(h, st)
	if err != nil {
		return errorf(drivers.ClassInvalid, schema.Ref{}, op, "%v", err)
	}
	if p.unchanged {
		v, _, err := d.client.Variables().Peek(d.cfg.StatePath, d.q(ctx, d.cfg.StateNamespace))
		if err != nil {
			return wrap(err, schema.Ref{}, "read variable "+d.cfg.StatePath)
		}
		if v == nil || v.ModifyIndex != st.index {
			return conflictErr(op, v, st.index)
		}
		return nil
	}

	// 1. List what is under the head, to pick a generation above every
	// shard there (an unfinished save's too) and to delete the leftovers.
	prefix := d.cfg.StatePath + "/"
	metas, _, err := d.client.Variables().PrefixList(prefix, d.q(ctx, d.cfg.StateNamespace))
	if err != nil {
		return wrap(err, schema.Ref{}, "list variables under "+prefix)
	}
	gen := st.head.Generation
	for _, m := range metas {
		if _, g, _, ok := parseShardName(strings.TrimPrefix(m.Path, prefix)); ok && m.Namespace == d.cfg.StateNamespace && strings.HasPrefix(m.Path, prefix) {
			gen = max(gen, g)
		}
	}
	gen++

	// 2. Write the changed shards under new names; a name is never reused,
	// so create-only check-and-set fails only for a concurrent save.
	head := historyHead{Format: historyFormat, Generation: gen, Shards: make([]string, len(p.hashes)), UsageInShards: p.usageInShards}
	for i := range p.hashes {
		if p.encoded[i] == "" {
			head.Shards[i] = st.head.Shards[i]
		} else {
			head.Shards[i] = shardName(i, gen, p.hashes[i])
		}
	}
	err = eachVariable(ctx, len(p.hashes), func(i int) error {
		if p.encoded[i] == "" {
			return nil
		}
		path := prefix + head.Shards[i]
		sv := &api.Variable{Namespace: d.cfg.StateNamespace, Path: path, Items: api.VariableItems{shardItem: p.encoded[i]}}
		_, _, err := d.client.Variables().CheckedCreate(sv, d.w(ctx, d.cfg.StateNamespace))
		var cas api.ErrCASConflict
		if errors.As(err, &cas) {
			return conflictErr("write variable "+path, cas.Conflict, 0)
		}
		return wrap(err, schema.Ref{}, "write variable "+path)
	})
	if err != nil {
		return err
	}

	// 3. Commit: the head, with check-and-set.
	hb, err := json.Marshal(head)
	if err != nil {
		return errorf(drivers.ClassInvalid, schema.Ref{}, op, "encode history head: %v", err)
	}
	if n := len(headItem) + len(hb) + len(globalItem) + len(p.global); n > maxVariableBytes {
		return errorf(drivers.ClassInvalid, schema.Ref{}, op, "the history head is %d bytes (%d shards); a Nomad variable holds at most %d", n, len(head.Shards), maxVariableBytes)
	}
	v := &api.Variable{
		Namespace: d.cfg.StateNamespace, Path: d.cfg.StatePath, ModifyIndex: st.index,
		Items: api.VariableItems{headItem: string(hb), globalItem: p.global},
	}
	out, _, err := d.client.Variables().CheckedUpdate(v, d.w(ctx, d.cfg.StateNamespace))
	if err != nil {
		var cas api.ErrCASConflict
		if errors.As(err, &cas) {
			return conflictErr(op, cas.Conflict, st.index)
		}
		return wrap(err, schema.Ref{}, op)
	}
	d.stored = storedHistory{index: out.ModifyIndex, head: head, global: p.global, hashes: p.hashes, sizes: p.sizes, bodies: p.bodies}

	// 4. Delete the shards no head names: those this save replaced and
	// any an unfinished save left. Each delete checks the index listed, so
	// it never removes a shard written since. A failure leaves garbage for
	// the next save, not damage.
	keep := map[string]bool{}
	for _, name := range head.Shards {
		keep[prefix+name] = true
	}
	_ = eachVariable(ctx, len(metas), func(i int) error {
		m := metas[i]
		if m.Namespace != d.cfg.StateNamespace || keep[m.Path] || !strings.HasPrefix(m.Path, prefix) {
			return nil
		}
		if _, _, _, ok := parseShardName(strings.TrimPrefix(m.Path, prefix)); !ok {
			return nil
		}
		_, _ = d.client.Variables().CheckedDelete(m.Path, m.ModifyIndex, d.w(ctx, d.cfg.StateNamespace))
		return nil
	})
	return nil
}

func conflictErr(op string, now *api.Variable, expected uint64) error {
	got := uint64(0)
	if now != nil {
		got = now.ModifyIndex
	}
	return errorf(drivers.ClassConflict, schema.Ref{}, op, "another writer changed it (index %d, expected %d): load it again", got, expected)
}

// savePlan is what SaveHistory writes.
type savePlan struct {
	unchanged     bool
	usageInShards bool
	global        string
	hashes        []string
	sizes         []int
	bodies        [][]byte
	// encoded holds the item of each shard to write; "" for a shard
	// whose content the stored history already holds.
	encoded []string
}

// planSave lays h out over shards, as few as fit, reusing st's shard
// count while it fits (grow when a shard overflows, shrink when all are
// under a quarter full). It does no I/O.
func planSave(h drivers.History, st storedHistory) (savePlan, error) {
	var p savePlan
	g, err := json.Marshal(globalOf(h, true))
	if err != nil {
		return p, fmt.Errorf("encode history: %v", err)
	}
	if len(g) > usageHeadBudget {
		p.usageInShards = true
		if g, err = json.Marshal(globalOf(h, false)); err != nil {
			return p, fmt.Errorf("encode history: %v", err)
		}
	}
	p.global = string(g)
	sameLayout := func(n int) bool {
		return !st.legacy && st.index != 0 && n == len(st.hashes) && p.usageInShards == st.head.UsageInShards
	}
	n, grew := max(len(st.head.Shards), 1), false
	for {
		parts, err := splitHistory(h, n, p.usageInShards)
		if err != nil {
			return p, fmt.Errorf("encode history: %v", err)
		}
		p.hashes, p.sizes, p.encoded, p.bodies = make([]string, n), make([]int, n), make([]string, n), parts
		total, largest := 0, 0
		same := sameLayout(n)
		for i, b := range parts {
			p.hashes[i] = contentHash(b)
			if same && st.hashes[i] == p.hashes[i] {
				p.sizes[i] = st.sizes[i]
			} else {
				p.encoded[i] = encodeShard(b)
				p.sizes[i] = len(p.encoded[i])
			}
			total += p.sizes[i]
			largest = max(largest, p.sizes[i])
		}
		switch {
		case largest > shardBudget:
			if n*2 > maxShards {
				return p, fmt.Errorf("the history needs more than %d shards of %d bytes", maxShards, maxVariableBytes)
			}
			n, grew = n*2, true
			continue
		case !grew && n > 1 && total < n*shardBudget/4:
			n /= 2
			continue
		}
		p.unchanged = same && p.global == st.global
		for _, e := range p.encoded {
			if e != "" {
				p.unchanged = false
			}
		}
		return p, nil
	}
}

// eachVariable runs fn(0..n-1), variableParallel at a time, and returns
// the first error (the rest still run to their end).
func eachVariable(ctx context.Context, n int, fn func(i int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		sem   = make(chan struct{}, variableParallel)
	)
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			mu.Lock()
			if first == nil {
				first = err
			}
			mu.Unlock()
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := fn(i); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}
