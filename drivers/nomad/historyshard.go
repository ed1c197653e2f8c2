package nomad

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
)

// How the history is laid out in Nomad Variables (format 2).
//
// The head Variable at StatePath has two items: "head", the JSON of
// historyHead (the generation and the name of each shard), and "global",
// the JSON of the history's global fields (applied revision, usage time,
// and the per-project usage unless it is too large for the head). Each
// shard is a Variable at StatePath/<name> with one item, "history": the
// base64 of the gzip of the JSON of a drivers.History holding only the
// workspaces (and, when usage is sharded, the projects) that hash to it.
//
// A shard's name is "<index>-<generation>-<hash>": hash is the first 16
// hex digits of the SHA-256 of its JSON, generation the save that wrote
// it. A shard is never rewritten: a save writes changed shards under new
// names, then switches the head to them with check-and-set, then deletes
// the shards no head names. The head is the one commit point: a reader
// sees one save whole or the one before it, never a mix, and a save that
// stops between shard writes leaves unnamed shards that the next save
// deletes.
const (
	historyFormat = 2
	headItem      = "head"
	globalItem    = "global"
	shardItem     = "history"
	// legacyItem is format 1's one item: the JSON history, whole.
	legacyItem = "history"
)

// maxVariableBytes is Nomad's limit on one Variable: the sum over its
// items of the bytes of key and value (Nomad 1.6.5 answers 500 "variables
// are limited to 64KiB in total size" beyond it; the path does not count).
const maxVariableBytes = 64 << 10

// maxVariablePath is the longest Variable path Nomad accepts.
const maxVariablePath = 128

// shardBudget is the most bytes one shard's encoded item may take.
const shardBudget = maxVariableBytes - len(shardItem)

// usageHeadBudget is the most bytes the global item may take with the
// usage in it; beyond it the usage goes to the shards.
const usageHeadBudget = 16 << 10

// maxShards bounds the shard count (the head must still name them all).
const maxShards = 1 << 11

// historyHead is the head item: which shards make the history.
type historyHead struct {
	Format     int    `json:"format"`
	Generation uint64 `json:"generation"`
	// Shards names each shard, by index; len(Shards) is a power of two.
	Shards []string `json:"shards"`
	// UsageInShards says the per-project usage is in the shards (by
	// project), not in the global item.
	UsageInShards bool `json:"usageInShards,omitempty"`
}

// shardOf returns the shard (of n) that holds key.
func shardOf(key string, n int) int {
	h := fnv.New64a()
	_, _ = io.WriteString(h, key)
	return int(h.Sum64() % uint64(n))
}

// globalOf returns h's global fields, with the usage when withUsage.
func globalOf(h drivers.History, withUsage bool) drivers.History {
	g := drivers.History{AppliedRevision: h.AppliedRevision, AppliedAt: h.AppliedAt, UsageAt: h.UsageAt}
	if withUsage {
		g.Usage = h.Usage
	}
	return g
}

// splitHistory returns the JSON of each of n shards of h: the entries of
// QueuedSince, Preempted, Borrowing, Journal, Ran, Idle and Ended by the hash of their workspace,
// RunTimes by the hash of their key, and Usage by the hash of its project when usageInShards. It reads h
// and changes nothing.
func splitHistory(h drivers.History, n int, usageInShards bool) ([][]byte, error) {
	parts := make([]drivers.History, n)
	splitRefs(parts, h.QueuedSince, func(p *drivers.History) *map[schema.Ref]time.Time { return &p.QueuedSince })
	splitRefs(parts, h.Preempted, func(p *drivers.History) *map[schema.Ref]drivers.Preemption { return &p.Preempted })
	splitRefs(parts, h.Borrowing, func(p *drivers.History) *map[schema.Ref]bool { return &p.Borrowing })
	splitRefs(parts, h.Journal, func(p *drivers.History) *map[schema.Ref]json.RawMessage { return &p.Journal })
	splitRefs(parts, h.Ran, func(p *drivers.History) *map[schema.Ref]drivers.RunTime { return &p.Ran })
	splitRefs(parts, h.Idle, func(p *drivers.History) *map[schema.Ref]drivers.IdleSpan { return &p.Idle })
	splitRefs(parts, h.Ended, func(p *drivers.History) *map[schema.Ref]drivers.Ended { return &p.Ended })
	for key, rt := range h.RunTimes {
		p := &parts[shardOf(key, n)]
		if p.RunTimes == nil {
			p.RunTimes = map[string][]time.Duration{}
		}
		p.RunTimes[key] = rt
	}
	if usageInShards {
		for project, u := range h.Usage {
			p := &parts[shardOf(project, n)]
			if p.Usage == nil {
				p.Usage = map[string]float64{}
			}
			p.Usage[project] = u
		}
	}
	out := make([][]byte, n)
	for i, p := range parts {
		b, err := json.Marshal(shardJSON(p))
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

// splitRefs puts each entry of m in the part of its workspace's shard,
// in the map field picks.
func splitRefs[V any](parts []drivers.History, m map[schema.Ref]V, field func(*drivers.History) *map[schema.Ref]V) {
	for ref, v := range m {
		dst := field(&parts[shardOf(ref.String(), len(parts))])
		if *dst == nil {
			*dst = map[schema.Ref]V{}
		}
		(*dst)[ref] = v
	}
}

// shardJSON is a shard's History without the global fields, so that a
// shard's JSON (and its name) changes only with its own entries.
type shardBody struct {
	Usage       map[string]float64                `json:"usage,omitempty"`
	QueuedSince map[schema.Ref]time.Time          `json:"queuedSince,omitempty"`
	Preempted   map[schema.Ref]drivers.Preemption `json:"preempted,omitempty"`
	Borrowing   map[schema.Ref]bool               `json:"borrowing,omitempty"`
	Journal     map[schema.Ref]json.RawMessage    `json:"journal,omitempty"`
	RunTimes    map[string][]time.Duration        `json:"runTimes,omitempty"`
	Ran         map[schema.Ref]drivers.RunTime    `json:"ran,omitempty"`
	Idle        map[schema.Ref]drivers.IdleSpan   `json:"idle,omitempty"`
	Ended       map[schema.Ref]drivers.Ended      `json:"ended,omitempty"`
}

func shardJSON(h drivers.History) shardBody {
	return shardBody{Usage: h.Usage, QueuedSince: h.QueuedSince, Preempted: h.Preempted, Borrowing: h.Borrowing, Journal: h.Journal, RunTimes: h.RunTimes,
		Ran: h.Ran, Idle: h.Idle, Ended: h.Ended}
}

// mergeShard adds a shard's entries to h. Each entry is in one shard
// only; a key seen twice is a damaged history.
func mergeShard(h *drivers.History, b []byte) error {
	var s shardBody
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	return errors.Join(
		mergeInto(&h.Usage, s.Usage, "project"),
		mergeInto(&h.QueuedSince, s.QueuedSince, "workspace"),
		mergeInto(&h.Preempted, s.Preempted, "workspace"),
		mergeInto(&h.Borrowing, s.Borrowing, "workspace"),
		mergeInto(&h.Journal, s.Journal, "workspace"),
		mergeInto(&h.RunTimes, s.RunTimes, "run-time key"),
		mergeInto(&h.Ran, s.Ran, "workspace"),
		mergeInto(&h.Idle, s.Idle, "workspace"),
		mergeInto(&h.Ended, s.Ended, "workspace"))
}

// mergeInto adds src's entries to *dst (made when nil); a key already in
// *dst is a damaged history, reported as a what in two shards.
func mergeInto[K comparable, V any](dst *map[K]V, src map[K]V, what string) error {
	for k, v := range src {
		if *dst == nil {
			*dst = map[K]V{}
		}
		if _, dup := (*dst)[k]; dup {
			return fmt.Errorf("%s %v is in two shards", what, k)
		}
		(*dst)[k] = v
	}
	return nil
}

// contentHash names a shard's JSON.
func contentHash(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// shardName is "<index>-<generation>-<hash>".
func shardName(i int, gen uint64, hash string) string {
	return fmt.Sprintf("%d-%d-%s", i, gen, hash)
}

// parseShardName reads a shard name; ok is false for any other name.
func parseShardName(name string) (i int, gen uint64, hash string, ok bool) {
	f := strings.Split(name, "-")
	if len(f) != 3 || len(f[2]) != 16 {
		return 0, 0, "", false
	}
	i, err1 := strconv.Atoi(f[0])
	gen, err2 := strconv.ParseUint(f[1], 10, 64)
	if _, err3 := hex.DecodeString(f[2]); err1 != nil || err2 != nil || err3 != nil || i < 0 {
		return 0, 0, "", false
	}
	return i, gen, f[2], true
}

// encodeShard compresses a shard's JSON into its item value.
func encodeShard(b []byte) string {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// decodeShard is encodeShard's inverse.
func decodeShard(s string) ([]byte, error) {
	z, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}
