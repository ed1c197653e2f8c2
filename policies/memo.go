package policies

// Machinery for admission: placement failures and wait reasons memoized
// per workspace shape, so a long queue of alike workspaces costs one
// search until the cluster changes.

// shapeKey identifies what a placement attempt depends on besides the
// cluster, the workspace's project and whether it fits in its quota:
// the shape of one replica and the preemptor's rights.
type shapeKey struct {
	gpus, replicas int
	cpu, mem, disk int64 // per replica; zero: not asked for
	cores          int
	feat           int32 // wsState.feat
	mi             int   // model index: one to one with the model asked for
	topo           int   // wsState.topo: one to one with the NVLink and NUMA constraints
	tier           int
	canPreempt     bool
}

// shapeMemo is what a decision remembers of one shape.
type shapeMemo struct {
	// failed[p+1] is the last failure inside project p's quota (p ≥ 0),
	// failed[1+len(projs)+p] beyond it for a preemptor that may take
	// project p's own lower tiers, failed[0] beyond a quota otherwise;
	// nil until the first failure.
	failed []failure
	// reason[c] is its wait reason with couldPreempt = (c == 1), valid
	// while d.gen+1 == reasonGen[c] (see waitForCapacity).
	reason    [2]Reason
	reasonGen [2]int
}

// failure records that a shape failed to place at memoGen gen-1 (0:
// never) and whether its search saw a workspace it may preempt.
type failure struct {
	gen   int
	could bool
}

// shapeOf returns the memo of w's shape; mi is w's model index.
func (d *decider) shapeOf(w *wsState, mi int) *shapeMemo {
	key := shapeKey{gpus: w.gpus, replicas: w.replicas, cpu: w.cpu, mem: w.mem, disk: w.disk, cores: w.cores, feat: w.feat, mi: mi, topo: w.topo, tier: w.tier, canPreempt: w.canPreempt}
	// Workspaces of one shape often come one after another in the queue.
	if d.lastShape != nil && key == d.lastKey {
		return d.lastShape
	}
	id, ok := d.shapeIDs[key]
	if !ok {
		id = int32(len(d.shapes))
		d.shapeIDs[key] = id
		d.shapes = append(d.shapes, &shapeMemo{})
	}
	d.lastKey, d.lastShape = key, d.shapes[id]
	return d.lastShape
}
