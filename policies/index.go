package policies

import (
	"math/bits"
	"slices"
	"sort"
	"sync"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
)

// Levels of GPU grouping inside a node, from the tightest to the loosest.
// A placement takes all of one replica's GPUs from one group of a level.
const (
	levelCell   = iota // one NVLink domain and one NUMA node
	levelDomain        // one NVLink domain
	levelNUMA          // one NUMA node
	levelNode          // anywhere on the node
	numLevels
)

var levelName = [numLevels]string{"NVLink domain and NUMA node", "NVLink domain", "NUMA node", "node"}

// GPU owner markers; owners ≥ 0 index Decide's workspace table.
const (
	ownerFree     = -1
	ownerReserved = -2
)

// gpuSlot is one usable GPU: on a ready, eligible node, healthy.
type gpuSlot struct {
	node  int32
	dom   int32
	numa  int32
	index int
	id    string
	model string
	mi    int32 // model index of model
	// whole: a whole GPU, not a MIG instance (drivers.ParseMIG). Only
	// whole GPUs are in model index 0, so a workspace that names no model
	// never lands on a slice of a GPU; one that names a MIG instance's
	// model gets only those.
	whole bool
	// owner is ownerFree, ownerReserved or the workspace holding it.
	owner int32
	// releasing: its owner is leaving (stopping, stopped by the specs or a
	// victim of this decision); a start may use it after the owner is gone.
	releasing bool
	// sets[k] is the model index of this GPU in set k (-1: in none): set
	// 0 is model index 0, any whole GPU (never a MIG instance); set 1 its
	// own model; set 2 its declared kind (GPUKind), when one matches.
	sets [numSets]int32
	// groups[k][l] is the group of this GPU at level l in set k. Every
	// group holds GPUs of one model: a replica's GPUs are one Nomad
	// device group's.
	groups [numSets][numLevels]int32
}

// numSets is how many model indexes a GPU is in at most: any whole GPU,
// its model, its kind.
const numSets = 3

// setOf returns the set (gpuSlot.sets) model index mi is in: 0, 1 for a
// model, 2 for a kind.
func (c *cluster) setOf(mi int) int {
	switch {
	case mi == 0:
		return 0
	case mi < c.kindBase:
		return 1
	}
	return 2
}

// group is a set of usable GPUs that can host one replica at a level.
type group struct {
	node int32
	dom  int32 // -1 above domain level
	numa int32 // -1 above NUMA level
	gpus []int32
	free int
}

// levelIndex keeps the groups of one (model, level) bucketed by free
// count, so "the group with the fewest free GPUs ≥ n" is a few word scans.
type levelIndex struct {
	groups []group
	// countBuckets files the groups by free GPUs.
	countBuckets
}

func (li *levelIndex) init() {
	maxK := 0
	for _, g := range li.groups {
		maxK = max(maxK, len(g.gpus))
	}
	li.countBuckets = newCountBuckets(len(li.groups), maxK)
	for i := range li.groups {
		li.set(i, li.groups[i].free)
	}
}

func (li *levelIndex) add(gi, delta int) {
	g := &li.groups[gi]
	li.clear(gi, g.free)
	g.free += delta
	li.set(gi, g.free)
}

// most returns the group with the most free GPUs (first in node order), or -1.
func (li *levelIndex) most() int {
	for k := li.maxK; k >= 0; k-- {
		if g := li.first(k); g >= 0 {
			return g
		}
	}
	return -1
}

// countBuckets files groups (by index) under a small count, 0 to maxK:
// bits[k] is a bitset of the groups whose count is exactly k, counts[k]
// how many there are. Walks go by count, then in group order.
type countBuckets struct {
	maxK   int
	bits   [][]uint64
	counts []int
}

func newCountBuckets(groups, maxK int) countBuckets {
	words := (groups + 63) / 64
	b := countBuckets{maxK: maxK, bits: make([][]uint64, maxK+1), counts: make([]int, maxK+1)}
	all := make([]uint64, (maxK+1)*words)
	for k := range b.bits {
		b.bits[k] = all[k*words : (k+1)*words : (k+1)*words]
	}
	return b
}

// clone returns a copy that shares nothing with b.
func (b *countBuckets) clone() countBuckets {
	words := 0
	if len(b.bits) > 0 {
		words = len(b.bits[0])
	}
	c := newCountBuckets(words*64, b.maxK)
	for k := range b.bits {
		copy(c.bits[k], b.bits[k])
	}
	copy(c.counts, b.counts)
	return c
}

func (b *countBuckets) set(gi, k int) {
	b.bits[k][gi/64] |= 1 << (gi % 64)
	b.counts[k]++
}

func (b *countBuckets) clear(gi, k int) {
	b.bits[k][gi/64] &^= 1 << (gi % 64)
	b.counts[k]--
}

// first returns the first group with a count of exactly k, or -1.
func (b *countBuckets) first(k int) int {
	if k < 0 || k > b.maxK || b.counts[k] == 0 {
		return -1
	}
	for w, word := range b.bits[k] {
		if word != 0 {
			return w*64 + bits.TrailingZeros64(word)
		}
	}
	return -1
}

// each calls fn for every group with a count ≥ from, smallest count
// first, then in group order, until fn returns false.
func (b *countBuckets) each(from int, fn func(gi int) bool) {
	for k := max(from, 0); k <= b.maxK; k++ {
		if !b.eachAt(k, fn) {
			return
		}
	}
}

// eachAt calls fn for every group whose count is exactly k, in group
// order, until fn returns false; it reports whether fn never did.
func (b *countBuckets) eachAt(k int, fn func(gi int) bool) bool {
	if k < 0 || k > b.maxK || b.counts[k] == 0 {
		return true
	}
	for w, word := range b.bits[k] {
		for word != 0 {
			i := bits.TrailingZeros64(word)
			word &^= 1 << i
			if !fn(w*64 + i) {
				return false
			}
		}
	}
	return true
}

// bestFit returns the first group with the smallest count ≥ n, or -1.
func (b *countBuckets) bestFit(n int) int {
	for k := max(n, 0); k <= b.maxK; k++ {
		if g := b.first(k); g >= 0 {
			return g
		}
	}
	return -1
}

// cluster is Decide's working copy of the usable GPUs. It is built from
// the snapshot and changed only by the decision's own tentative moves.
type cluster struct {
	nodes  []drivers.Node
	slots  []gpuSlot
	models []string // sorted distinct models; model index m ≥ 1 is models[m-1]
	// kinds are the declared kinds (GPUKind) by name; model index
	// kindBase+k is kinds[k], whose GPUs are those its pattern matches.
	kinds    []schema.GPUKind
	kindBase int
	// weights[m-1] is what one GPU of models[m-1] counts for fair share,
	// in GPU-equivalents (drivers.Weight: its declared kind's weight, else
	// 1 whole or a MIG instance's slices of seven).
	weights []float64
	// unitWeights: every model's weight is 1 (no MIG instance, no kind
	// of another weight): a GPU-equivalent is a GPU.
	unitWeights bool
	// index[m][l]: m 0 is "any model", then the models, then the kinds.
	index [][numLevels]*levelIndex
	// first[ni] is node ni's first slot; its slots run to first[ni+1]
	// (a node's slots are contiguous, by GPU order).
	first []int32
	// totalFree counts free GPUs per model index.
	totalFree []int
	// byName holds, for each node name, what nodeIndex(nodes, name)
	// returns (shared by the clones: nodes have the template's layout).
	byName map[string]int
	// tmpl is the template a clone was made from (nil in a template).
	tmpl *cluster
	// free is hold's scratch: by slot, whether it is free.
	free []bool
}

func newCluster(snap *drivers.Snapshot, kinds []schema.GPUKind) *cluster {
	clusterCache.Lock()
	t := clusterCache.tmpl
	if t == nil || !sameLayout(clusterCache.key, snap.Nodes) || !sameKinds(t.kinds, kinds) {
		t = buildCluster(snap, kinds)
		t.nodes = nil // each clone gets its caller's
		clusterCache.key = layoutOf(snap.Nodes)
		clusterCache.tmpl = t
	}
	clusterCache.Unlock()
	return t.clone(snap.Nodes)
}

// clusterCache keeps the last cluster index built, as it was before any
// allocation was marked, with the node layout it was built from: a
// replay or a reconciler decides again and again over the same nodes,
// and rebuilding the index is most of a decision's setup. The template is
// never changed; each decision gets its own clone of what it changes.
var clusterCache struct {
	sync.Mutex
	key  []drivers.Node
	tmpl *cluster
}

// layoutOf copies what buildCluster reads from nodes.
func layoutOf(nodes []drivers.Node) []drivers.Node {
	out := make([]drivers.Node, len(nodes))
	for i, n := range nodes {
		out[i] = drivers.Node{Name: n.Name, Ready: n.Ready, Eligible: n.Eligible, GPUs: slices.Clone(n.GPUs)}
	}
	return out
}

// sameKinds reports whether two lists of kinds have the same names,
// patterns and weights, in order: what buildCluster reads of them.
func sameKinds(a, b []schema.GPUKind) bool {
	return slices.EqualFunc(a, b, func(x, y schema.GPUKind) bool {
		return x.Meta.Name == y.Meta.Name && x.Spec.Match == y.Spec.Match && x.Spec.Weight == y.Spec.Weight
	})
}

// sameLayout reports whether nodes match the layout key in everything
// buildCluster reads.
func sameLayout(key, nodes []drivers.Node) bool {
	if len(key) != len(nodes) {
		return false
	}
	for i := range nodes {
		a, b := &key[i], &nodes[i]
		if a.Name != b.Name || a.Ready != b.Ready || a.Eligible != b.Eligible || len(a.GPUs) != len(b.GPUs) {
			return false
		}
		for j := range b.GPUs {
			g, h := &a.GPUs[j], &b.GPUs[j]
			if g.ID != h.ID || g.Index != h.Index || g.Model != h.Model || g.Domain != h.Domain || g.NUMA != h.NUMA || g.Healthy != h.Healthy || g.HeldBy != h.HeldBy {
				return false
			}
		}
	}
	return true
}

// clone copies what a decision changes (slot owners, group and total
// free counts, the buckets); the rest is shared and read-only. It reuses
// a clone of t that a finished decision gave back (release) as that
// decision left it: hold, which newDecider calls next, sets all of what
// a decision changes.
func (t *cluster) clone(nodes []drivers.Node) *cluster {
	if c, _ := clusterPool.Get().(*cluster); c != nil && c.tmpl == t {
		c.nodes = nodes
		return c
	}
	c := &cluster{nodes: nodes, models: t.models, kinds: t.kinds, kindBase: t.kindBase, weights: t.weights, unitWeights: t.unitWeights, first: t.first, byName: t.byName, slots: slices.Clone(t.slots), totalFree: slices.Clone(t.totalFree), tmpl: t}
	c.index = make([][numLevels]*levelIndex, len(t.index))
	for m := range t.index {
		for l := range numLevels {
			tl := t.index[m][l]
			li := &levelIndex{groups: slices.Clone(tl.groups), countBuckets: tl.countBuckets.clone()}
			c.index[m][l] = li
		}
	}
	return c
}

// release gives a finished decision's clone back for clone to reuse;
// nothing may use c after.
func (c *cluster) release() {
	c.nodes = nil
	clusterPool.Put(c)
}

// clusterPool recycles clones (of whichever template: clone checks).
var clusterPool sync.Pool // of *cluster

// buildCluster indexes the usable GPUs of snap's nodes, all free, by
// model and by the kinds declared.
func buildCluster(snap *drivers.Snapshot, kinds []schema.GPUKind) *cluster {
	c := &cluster{nodes: snap.Nodes, kinds: kinds}
	modelSet := map[string]bool{} // model → a whole GPU's
	for _, n := range snap.Nodes {
		for gi := range n.GPUs {
			if m := n.GPUs[gi].Model; !modelSet[m] {
				_, mig := drivers.ParseMIG(m)
				modelSet[m] = !mig
			}
		}
	}
	for m := range modelSet {
		c.models = append(c.models, m)
	}
	sort.Strings(c.models)
	c.kindBase = len(c.models) + 1
	// kindOf[m-1] is the model index of models[m-1]'s kind (-1: none).
	kindOf := make([]int32, len(c.models))
	c.weights = make([]float64, len(c.models))
	for m, model := range c.models {
		kindOf[m] = -1
		var kind *schema.GPUKind
		for k := range kinds {
			if kinds[k].Matches(model) {
				kindOf[m] = int32(c.kindBase + k)
				kind = &kinds[k]
				break
			}
		}
		c.weights[m] = drivers.Weight(kind, model)
	}
	c.unitWeights = !slices.ContainsFunc(c.weights, func(w float64) bool { return w != 1 })
	c.index = make([][numLevels]*levelIndex, c.kindBase+len(kinds))
	for m := range c.index {
		for l := range numLevels {
			c.index[m][l] = &levelIndex{}
		}
	}
	c.totalFree = make([]int, len(c.index))
	c.first = make([]int32, len(snap.Nodes)+1)
	c.byName = make(map[string]int, len(snap.Nodes))
	for _, n := range snap.Nodes {
		c.byName[n.Name] = nodeIndex(snap.Nodes, n.Name)
	}
	// of is the model of the group's GPUs: in model index 0 too, a node's
	// groups are split by model, as Nomad takes the devices of one request
	// from one device group (a model), never from two.
	type gkey struct {
		m, l, dom, numa, of int32
	}
	for ni, n := range snap.Nodes {
		c.first[ni] = int32(len(c.slots))
		c.first[ni+1] = int32(len(c.slots))
		if !n.Ready || !n.Eligible {
			continue
		}
		// This node's groups, by key: few, so a slice beats a map.
		type localGroup struct {
			key gkey
			gi  int32
		}
		var local []localGroup
		for _, g := range n.GPUs {
			if !g.Healthy {
				continue
			}
			mi := int32(sort.SearchStrings(c.models, g.Model) + 1)
			s := gpuSlot{node: int32(ni), dom: int32(g.Domain), numa: int32(g.NUMA), index: g.Index, id: g.ID, model: g.Model, mi: mi, whole: modelSet[g.Model], owner: ownerFree}
			s.sets = [numSets]int32{0, mi, kindOf[mi-1]}
			if !s.whole {
				s.sets[0] = -1
			}
			si := int32(len(c.slots))
			for k, m := range s.sets {
				if m < 0 {
					for l := range s.groups[k] {
						s.groups[k][l] = -1
					}
					continue
				}
				for l := range int32(numLevels) {
					key := gkey{m, l, -1, -1, mi}
					if l == levelCell || l == levelDomain {
						key.dom = s.dom
					}
					if l == levelCell || l == levelNUMA {
						key.numa = s.numa
					}
					gi, ok := int32(0), false
					for _, lg := range local {
						if lg.key == key {
							gi, ok = lg.gi, true
							break
						}
					}
					li := c.index[m][l]
					if !ok {
						gi = int32(len(li.groups))
						li.groups = append(li.groups, group{node: int32(ni), dom: key.dom, numa: key.numa})
						local = append(local, localGroup{key, gi})
					}
					li.groups[gi].gpus = append(li.groups[gi].gpus, si)
					li.groups[gi].free++
					s.groups[k][l] = gi
				}
			}
			c.slots = append(c.slots, s)
			c.first[ni+1] = int32(len(c.slots))
			for _, m := range s.sets {
				if m >= 0 {
					c.totalFree[m]++
				}
			}
		}
	}
	for m := range c.index {
		for l := range numLevels {
			c.index[m][l].init()
		}
	}
	return c
}

// modelIndex returns the model index for a gpuModel constraint ("" is any
// model), or -1 when no GPU of that model exists.
func (c *cluster) modelIndex(model string) int {
	if model == "" {
		return 0
	}
	i := sort.SearchStrings(c.models, model)
	if i < len(c.models) && c.models[i] == model {
		return i + 1
	}
	return -1
}

// kindIndex returns the model index of the declared kind named name, or
// -1 when no kind has that name. A kind no GPU matches has an index,
// with no groups.
func (c *cluster) kindIndex(name string) int {
	i := sort.Search(len(c.kinds), func(i int) bool { return c.kinds[i].Meta.Name >= name })
	if i < len(c.kinds) && c.kinds[i].Meta.Name == name {
		return c.kindBase + i
	}
	return -1
}

// setOwner changes who holds slot si, keeping the free indexes current.
func (c *cluster) setOwner(si int32, owner int32) {
	s := &c.slots[si]
	wasFree := s.owner == ownerFree
	s.owner = owner
	isFree := owner == ownerFree
	if wasFree == isFree {
		return
	}
	delta := 1
	if wasFree {
		delta = -1
	}
	for k, m := range s.sets {
		if m < 0 {
			continue
		}
		for l := range numLevels {
			c.index[m][l].add(int(s.groups[k][l]), delta)
		}
		c.totalFree[m] += delta
	}
}

// in reports whether slot s is in model index mi (0: any whole GPU).
func (s *gpuSlot) in(mi int) bool {
	return s.sets[0] == int32(mi) || s.sets[1] == int32(mi) || s.sets[2] == int32(mi)
}

// hold sets the state a decision starts from: each slot slots[i] held
// by owners[i] (the last one wins where a slot repeats), every other
// slot free, none releasing, and the free indexes counted to match.
func (c *cluster) hold(slots, owners []int32) {
	// The passes below read who is free from a dense copy: the slots
	// themselves are many times larger.
	c.free = slices.Grow(c.free[:0], len(c.slots))[:len(c.slots)]
	for si := range c.slots {
		c.slots[si].owner, c.slots[si].releasing = ownerFree, false
		c.free[si] = true
	}
	copy(c.totalFree, c.tmpl.totalFree) // the template's GPUs are all free
	for i, si := range slots {
		s := &c.slots[si]
		if c.free[si] {
			c.free[si] = false
			for _, m := range s.sets {
				if m >= 0 {
					c.totalFree[m]--
				}
			}
		}
		s.owner = owners[i]
	}
	// Count each group's free GPUs from the free slots alone: on a busy
	// cluster they are few.
	for m := range c.index {
		for l := range numLevels {
			li := c.index[m][l]
			for gi := range li.groups {
				li.groups[gi].free = 0
			}
		}
	}
	for si, free := range c.free {
		if !free {
			continue
		}
		s := &c.slots[si]
		for k, m := range s.sets {
			if m < 0 {
				continue
			}
			for l := range numLevels {
				c.index[m][l].groups[s.groups[k][l]].free++
			}
		}
	}
	for m := range c.index {
		for l := range numLevels {
			li := c.index[m][l]
			for k := range li.bits {
				clear(li.bits[k])
			}
			clear(li.counts)
			for gi := range li.groups {
				li.set(gi, li.groups[gi].free)
			}
		}
	}
}

// nodeIndex is nodeIndex(c.nodes, name), looked up in byName (a name
// not in it is in no node).
func (c *cluster) nodeIndex(name string) int {
	if ni, ok := c.byName[name]; ok {
		return ni
	}
	return -1
}

// slot finds the usable slot for a GPU ID on a node name's index, or -1.
func (c *cluster) slot(node int, id string) int32 {
	if node < 0 || node+1 >= len(c.first) {
		return -1
	}
	for si := c.first[node]; si < c.first[node+1]; si++ {
		if c.slots[si].id == id {
			return si
		}
	}
	return -1
}

// countIndex buckets the groups of one (model, level) by a per-group count,
// so the group with the smallest count ≥ n, and all groups in ascending
// count from n, are found without scanning every group.
type countIndex struct {
	count []int32
	countBuckets
}

func newCountIndex(groups []group, initial func(gi int) int) *countIndex {
	maxK := 0
	for _, g := range groups {
		maxK = max(maxK, len(g.gpus))
	}
	ci := &countIndex{count: make([]int32, len(groups)), countBuckets: newCountBuckets(len(groups), maxK)}
	for gi := range groups {
		c := initial(gi)
		ci.count[gi] = int32(c)
		ci.set(gi, c)
	}
	return ci
}

func (ci *countIndex) add(gi, delta int) {
	c := int(ci.count[gi])
	ci.clear(gi, c)
	c += delta
	ci.count[gi] = int32(c)
	ci.set(gi, c)
}

// modelIndexOf returns the model index of the GPUs w may use: its kind's,
// its model's, or 0 (any whole GPU); -1 when no GPU can be of it (a
// model no node has, a kind not declared).
func (d *decider) modelIndexOf(w *wsState) int {
	if w.kind != "" {
		return d.c.kindIndex(w.kind)
	}
	return d.c.modelIndex(w.model)
}

// weightOf is what n GPUs of model count in GPU-equivalents (a model
// the cluster does not list: one each).
func (c *cluster) weightOf(model string, n int) float64 {
	if c.unitWeights {
		return float64(n)
	}
	if m := c.modelIndex(model); m > 0 {
		return c.weights[m-1] * float64(n)
	}
	return float64(n)
}
